"""The one error type of the web layer, and its two renderings.

Views, API handlers and actions raise :class:`HubError` (a message in plain words, a stable
code, an HTTP status and optional headers such as ``Retry-After``). It is turned into a
response in exactly two places:

* JSON for ``/api/v1/``: :func:`json_error` (``{"error": ..., "code": ...}``), used by the
  API's exception handler (``webapp.api.app``) and the middlewares that answer API requests;
* HTML for pages: :func:`show_error` (a message on the next page, or the 403 page for a
  refused role), and :class:`HubErrorMiddleware` for an error no page view caught.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.defaults import page_not_found, permission_denied

from model_store.text import Said
from webapp.text import localize


class HubError(Exception):
    """A refusal a user can act on: ``message`` says what and what to do, ``code`` is stable.

    ``message`` is words already in the request's language (``gettext``) or a message, said in
    the language of whoever is shown it.
    """

    def __init__(
        self,
        message: Said,
        code: str = "bad_request",
        status: int = 400,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.headers: dict[str, str] = dict(headers or {})

    @property
    def retry_after(self) -> int | None:
        """Seconds from the ``Retry-After`` header, when the error carries one."""
        value = self.headers.get("Retry-After")
        return int(value) if value else None


def json_error(
    message: str, code: str, status: int, headers: Mapping[str, str] | None = None
) -> JsonResponse:
    """The API's one error shape."""
    response = JsonResponse({"error": message, "code": code}, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def error_json(exc: HubError) -> JsonResponse:
    """A :class:`HubError` as the API answers it."""
    return json_error(localize(exc.message), exc.code, exc.status, exc.headers)


def show_error(request: HttpRequest, exc: HubError) -> None:
    """A :class:`HubError` on a page: a refused role is the 403 page, the rest a message."""
    if exc.status == 403:
        raise PermissionDenied(localize(exc.message)) from None
    messages.error(request, localize(exc.message))


class HubErrorMiddleware:
    """A :class:`HubError` no view caught: JSON under ``/api/``; on pages the 403/404 page, or
    a message shown on the page the user came from."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        if not isinstance(exception, HubError):
            return None
        if request.path.startswith("/api/"):
            return error_json(exception)
        if exception.status == 403:
            return permission_denied(request, PermissionDenied(localize(exception.message)))
        if exception.status == 404:
            return page_not_found(request, exception)
        messages.error(request, localize(exception.message))
        back = request.META.get("HTTP_REFERER", "")
        if not url_has_allowed_host_and_scheme(
            back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            back = "/"
        return redirect(back)

"""Authentication: API tokens, and sign-in required everywhere unless a view opts out.

Tokens arrive as ``Authorization: Token <key>`` (``Bearer <key>`` is accepted too). A browser
never sends that header by itself, so token-authenticated requests are exempt from CSRF checks;
session requests are not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequired
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from webapp.accounts.models import ApiToken
from webapp.api.errors import error_response

API_PREFIX = "/api/"


def is_api_request(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


class TokenAuthenticationMiddleware:
    """Sets ``request.user`` from an API token; must sit after AuthenticationMiddleware."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        header = request.headers.get("Authorization", "")
        if header:
            scheme, _, key = header.partition(" ")
            # "Bearer" too: Prometheus's `authorization` block and many HTTP clients send it.
            if scheme.lower() not in ("token", "bearer") or not key.strip():
                return error_response(
                    "Authorization header must be 'Token <key>' (or 'Bearer <key>').",
                    "not_authenticated",
                    401,
                )
            token = ApiToken.objects.for_key(key.strip())
            if token is None:
                return error_response(
                    "This API token is not valid. Create one with "
                    "'python manage.py apitoken USERNAME'.",
                    "not_authenticated",
                    401,
                )
            request.user = token.user
            request.api_token = token  # type: ignore[attr-defined]
            request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]
            # One write per minute at most: last_used is a hint, not an audit trail.
            now = timezone.now()
            if token.last_used is None or (now - token.last_used).total_seconds() > 60:
                ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        return self.get_response(request)


class LoginRequiredMiddleware(DjangoLoginRequired):
    """Django's sign-in-everywhere middleware, answering API calls with JSON 401."""

    def handle_no_permission(  # type: ignore[override]
        self, request: HttpRequest, view_func: Any
    ) -> HttpResponse:
        if is_api_request(request):
            return error_response(
                "Sign in or send 'Authorization: Token <key>'.", "not_authenticated", 401
            )
        return super().handle_no_permission(request, view_func)

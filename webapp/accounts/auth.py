"""Authentication: API tokens, and sign-in and a role required everywhere unless a view opts out.

Tokens arrive as ``Authorization: Token <key>`` (``Bearer <key>`` is accepted too). A browser
never sends that header by itself, so token-authenticated requests are exempt from CSRF checks;
session requests are not.

A signed-in user without a role (say, created in the Django admin and given no group) gets one
page asking them to ask an admin, or a JSON 403 ``no_role`` from the API, and nothing else.
Views that need no sign-in (``login_not_required``) do their own checks; ``role_not_required``
lets a signed-in user without a role through (signing out).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.middleware import LoginRequiredMiddleware as DjangoLoginRequired
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop

from webapp.accounts.models import ApiToken
from webapp.accounts.roles import Role, role_of
from webapp.errors import json_error
from webapp.inference.tokens import Refusal, token_verdict
from webapp.nodes import tokens as node_scope

API_PREFIX = "/api/"
ADMIN_PREFIX = "/admin/"
#: In English (marked for translation): say it with ``gettext(NO_ROLE_MESSAGE)``.
NO_ROLE_MESSAGE = gettext_noop(
    "Your account has no role in this hub yet. Ask an admin to give you the viewer, "
    "operator or admin role."
)

ViewFunc = Callable[..., Any]


def role_not_required(view: ViewFunc) -> ViewFunc:
    """Let a signed-in user without a role reach ``view`` (sign-in is still required)."""
    view.role_required = False  # type: ignore[attr-defined]
    return view


def is_api_request(request: HttpRequest) -> bool:
    """The hub's API, or Triton's protocol on the hub (``/v2``): answered in JSON."""
    return (
        request.path.startswith(API_PREFIX)
        or request.path == "/v2"
        or (request.path.startswith("/v2/"))
    )


class TokenAuthenticationMiddleware:
    """Sets ``request.user`` from an API token; must sit after AuthenticationMiddleware.

    A token is refused when revoked (at once: every request reads the token's row) or
    expired, and on ``/admin/``, where only a signed-in session counts. Its scope caps the
    role every check of this request sees (:func:`webapp.accounts.roles.role_of` caches the
    role on the user object, which this request alone holds). A node token (scope
    ``node:<name>``) reaches only what :mod:`webapp.nodes.tokens` allows.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        header = request.headers.get("Authorization", "")
        if header:
            refused = self._authenticate(request, header)
            if refused is not None:
                return refused
        return self.get_response(request)

    def _authenticate(self, request: HttpRequest, header: str) -> HttpResponse | None:
        if request.path.startswith(ADMIN_PREFIX):
            return json_error(
                gettext("API tokens are not accepted on the admin site; sign in with a password."),
                "token_not_accepted",
                403,
            )
        scheme, _, key = header.partition(" ")
        # "Bearer" too: Prometheus's `authorization` block and many HTTP clients send it.
        if scheme.lower() not in ("token", "bearer") or not key.strip():
            return json_error(
                gettext("Authorization header must be 'Token <key>' (or 'Bearer <key>')."),
                "not_authenticated",
                401,
            )
        now = timezone.now()
        verdict = token_verdict(key.strip(), now)
        if isinstance(verdict, Refusal):
            return json_error(verdict.message, verdict.code, 401)
        token, user = verdict.token, verdict.token.user
        if verdict.node is not None:
            refused = node_scope.refusal(verdict.node, request)
            if refused is not None:
                return json_error(refused, node_scope.REFUSED_CODE, 403)
        if verdict.capped:
            user._hub_role = verdict.role  # type: ignore[attr-defined]
        request.user = user
        request.api_token = token  # type: ignore[attr-defined]
        request._dont_enforce_csrf_checks = True  # type: ignore[attr-defined]
        # One write per minute at most: last_used is a hint, not an audit trail.
        if token.last_used is None or (now - token.last_used).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used=now)
        return None


class LoginRequiredMiddleware(DjangoLoginRequired):
    """Django's sign-in-everywhere middleware, answering API calls with JSON 401.

    It also refuses signed-in users without a role: one place for every page and API call.
    """

    def process_view(
        self, request: HttpRequest, view_func: ViewFunc, view_args: Any, view_kwargs: Any
    ) -> HttpResponseBase | None:
        refused = super().process_view(request, view_func, view_args, view_kwargs)
        if refused is not None:
            return refused
        # Public views (sign-in page, liveness, /metrics) decide for themselves.
        if not getattr(view_func, "login_required", True):
            return None
        if not getattr(view_func, "role_required", True):
            return None
        if role_of(request.user) is Role.NONE:
            return self.handle_no_role(request)
        return None

    def handle_no_role(self, request: HttpRequest) -> HttpResponse:
        if is_api_request(request):
            return json_error(gettext(NO_ROLE_MESSAGE), "no_role", 403)
        return render(request, "accounts/no_role.html", status=403)

    def handle_no_permission(  # type: ignore[override]
        self, request: HttpRequest, view_func: Any
    ) -> HttpResponse:
        if is_api_request(request):
            return json_error(
                gettext("Sign in or send 'Authorization: Token <key>'."), "not_authenticated", 401
            )
        return super().handle_no_permission(request, view_func)

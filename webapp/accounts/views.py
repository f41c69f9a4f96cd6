"""The account page: the signed-in person's API tokens."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext, gettext_lazy, pgettext, pgettext_lazy
from django.views.decorators.http import require_POST

from webapp.accounts import tokens
from webapp.accounts.models import ApiToken
from webapp.accounts.roles import Role, role_of
from webapp.errors import HubError, show_error
from webapp.http import HubRequest

EXPIRY_CHOICES = [
    ("30", gettext_lazy("30 days")),
    ("90", gettext_lazy("90 days")),
    ("365", gettext_lazy("a year")),
    # "never" as an expiry (永不), not as in "never used" (从未).
    ("", pgettext_lazy("token expiry", "never")),
]


def account_tokens(request: HubRequest) -> HttpResponse:
    """List the person's tokens; POST makes a new one and shows its key once."""
    new_key = None
    if request.method == "POST":
        try:
            _token, new_key = tokens.create(
                request.user,  # type: ignore[arg-type]
                name=request.POST.get("name", ""),
                scope=request.POST.get("scope") or None,
                days=request.POST.get("expires_in_days", ""),
                via_token=False,
            )
        except HubError as exc:
            show_error(request, exc)
            return redirect("account-tokens")
    role = role_of(request.user)
    context = {
        "tokens": ApiToken.objects.live().filter(user=request.user),  # type: ignore[misc]
        "new_key": new_key,
        "scopes": [(c, label) for c, label in ApiToken.Scope.choices if Role.parse(c) <= role],
        "own_role": role.label,
        "expiry_choices": EXPIRY_CHOICES,
        "default_days": str(settings.TOKEN_DEFAULT_DAYS),
        "nav": "account",
    }
    return render(request, "accounts/tokens.html", context)


@require_POST
def token_revoke(request: HubRequest, token_id: int) -> HttpResponse:
    try:
        token = tokens.owned(request.user, token_id)  # type: ignore[arg-type]
    except HubError as exc:
        show_error(request, exc)
    else:
        tokens.revoke(token)
        message = gettext("Token %(prefix)s… is revoked; it no longer works.")
        messages.success(request, message % {"prefix": token.key_prefix})
    return redirect("account-tokens")


@require_POST
def token_expiry(request: HubRequest, token_id: int) -> HttpResponse:
    try:
        token = tokens.owned(request.user, token_id)  # type: ignore[arg-type]
        tokens.set_expiry(token, request.POST.get("expires_in_days", ""))
    except HubError as exc:
        show_error(request, exc)
    else:
        when = f"{token.expires:%Y-%m-%d}" if token.expires else pgettext("token expiry", "never")
        message = gettext("Token %(prefix)s… now expires: %(when)s.")
        messages.success(request, message % {"prefix": token.key_prefix, "when": when})
    return redirect("account-tokens")

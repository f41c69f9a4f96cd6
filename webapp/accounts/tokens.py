"""API tokens as their owners manage them: create (key shown once), list, expire, revoke.

Every change goes through these functions, from the account page and from the API alike.
Creating a token needs a signed-in session (or ``manage.py apitoken``): a leaked token must
not be able to mint more of itself. Listing, setting an expiry and revoking work with a token
too, so that a script can retire its own.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone
from django.utils.translation import gettext

from webapp.accounts.models import ApiToken
from webapp.accounts.roles import Role, role_of
from webapp.errors import HubError

MAX_DAYS = 3650
MAX_TOKENS_PER_USER = 50
#: The most calls a minute a token's own limit may name (0 is "no limit").
MAX_RATE_PER_MINUTE = 10_000_000
#: What a token's rate_per_minute is left as when a request does not name one.
UNSET = "unset"


def _expiry(days: object) -> timedelta | None:
    """``days`` from a form or JSON: a whole number from 1 to 3650, or None for no expiry."""
    if days is None or days == "":
        return None
    if isinstance(days, str) and days.strip().isdigit():
        days = int(days)
    if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= MAX_DAYS:
        message = gettext(
            "expires_in_days must be a whole number from 1 to %(most)s, or null for none."
        )
        raise HubError(message % {"most": MAX_DAYS}, "invalid_field")
    return timedelta(days=days)


def _scope(user: User, scope: object) -> str:
    if scope is None or scope == "":
        return role_of(user).label
    if not isinstance(scope, str) or scope not in ApiToken.Scope.values:
        raise HubError(gettext("scope must be viewer, operator or admin."), "invalid_field")
    if Role.parse(scope) > role_of(user):
        message = gettext(
            "A token cannot do more than its owner: you are %(role)s, so its scope may be at "
            "most %(scope)s."
        )
        raise HubError(
            message % {"role": role_of(user).display, "scope": role_of(user).label},
            "scope_too_wide",
            403,
        )
    return scope


def create(
    user: User,
    *,
    name: str,
    scope: object = None,
    days: object = "default",
    via_token: bool,
    rate_per_minute: object = UNSET,
) -> tuple[ApiToken, str]:
    """A new token of ``user`` and its key (shown once)."""
    if via_token:
        raise HubError(
            gettext(
                "Create tokens from your account page (signed in) or with manage.py apitoken; "
                "a token cannot create another."
            ),
            "session_required",
            403,
        )
    if ApiToken.objects.live().filter(user=user).count() >= MAX_TOKENS_PER_USER:
        message = gettext("You have %(count)s tokens; revoke one first.")
        raise HubError(message % {"count": MAX_TOKENS_PER_USER}, "too_many_tokens", 409)
    name = name.strip()[:100] or "api"
    lifetime = _expiry(settings.TOKEN_DEFAULT_DAYS if days == "default" else days)
    expires = timezone.now() + lifetime if lifetime else None
    token, key = ApiToken.issue(user, name, scope=_scope(user, scope), expires=expires)
    if rate_per_minute != UNSET:
        set_rate(token, rate_per_minute, by=user)
    return token, key


def set_rate(token: ApiToken, rate: object, *, by: User) -> ApiToken:
    """Give ``token`` its own inference limit (calls a minute; 0: none; None: its owner's).

    Admins only: a limit is what keeps one client from taking Triton from the others, so the
    people it protects do not lift it for themselves.
    """
    if role_of(by) < Role.ADMIN:
        raise HubError(
            gettext("Only an admin sets a token's rate_per_minute."), "admin_required", 403
        )
    if rate is not None and (
        not isinstance(rate, int) or isinstance(rate, bool) or not 0 <= rate <= MAX_RATE_PER_MINUTE
    ):
        message = gettext(
            "rate_per_minute must be a whole number from 0 (no limit) to %(most)s, or null for "
            "the owner's INFER_RATE_PER_MINUTE."
        )
        raise HubError(message % {"most": MAX_RATE_PER_MINUTE}, "invalid_field")
    token.rate_per_minute = rate
    token.save(update_fields=["rate_per_minute"])
    return token


def any_token(token_id: object) -> ApiToken:
    """A live token of anyone (an admin setting a service's limit)."""
    token = (
        ApiToken.objects.live().filter(pk=token_id).first()
        if isinstance(token_id, int) or (isinstance(token_id, str) and token_id.isdigit())
        else None
    )
    if token is None:
        raise HubError(gettext("There is no such token."), "not_found", 404)
    return token


def owned(user: User, token_id: object) -> ApiToken:
    token = (
        ApiToken.objects.live().filter(user=user, pk=token_id).first()
        if isinstance(token_id, int) or (isinstance(token_id, str) and token_id.isdigit())
        else None
    )
    if token is None:
        raise HubError(gettext("You have no such token."), "not_found", 404)
    return token


def set_expiry(token: ApiToken, days: object) -> ApiToken:
    lifetime = _expiry(days)
    token.expires = timezone.now() + lifetime if lifetime else None
    token.save(update_fields=["expires"])
    return token


def revoke(token: ApiToken) -> None:
    """Refused from the next request on: every request reads the token's row."""
    ApiToken.objects.filter(pk=token.pk).update(revoked=timezone.now())

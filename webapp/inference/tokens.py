"""The token verdict: may this API token act, as whom, with which role, and until when.

One reading of a token's row for both sides that accept tokens: the token middleware
(:class:`webapp.accounts.auth.TokenAuthenticationMiddleware`, every request through Django)
and the ``/v2`` fast path's grant (:meth:`webapp.fast_path_reads.DjangoReads.grant`, read once
and kept until the access epoch moves). The fast path says no by passing the call to Django,
which then refuses it with the reason given here; so a token is never accepted by one side and
refused by the other.

What a door does with the verdict stays the door's: the middleware also refuses tokens on the
admin site and applies a node token's path rules (:func:`webapp.nodes.tokens.refusal`); the
fast path serves no node token at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils.translation import gettext

from webapp.accounts.models import ApiToken
from webapp.accounts.roles import Role, role_of
from webapp.nodes import tokens as node_scope
from webapp.sso.tokens import vouched_until


@dataclass(frozen=True)
class Refusal:
    """Why a token may not act: said to the caller with a 401."""

    message: str
    code: str


@dataclass(frozen=True)
class TokenVerdict:
    """A token that may act. ``role`` is its owner's role capped by the token's scope (a
    node token's by viewer); ``node`` names a node token's node; ``ends`` is the earlier of
    the token's expiry and the end of the directory's vouching (None: neither applies)."""

    token: ApiToken
    role: Role
    capped: bool
    node: str | None
    ends: datetime | None


def token_verdict(key: str, now: datetime) -> TokenVerdict | Refusal:
    """The verdict on the token whose key is ``key`` at ``now``: one read of its row (with
    its user) and of the user's directory identity."""
    token = ApiToken.objects.for_key(key)
    if token is None:
        return Refusal(
            gettext(
                "This API token is not valid (or was revoked). Create one on your account "
                "page or with 'python manage.py apitoken USERNAME'."
            ),
            "not_authenticated",
        )
    if token.is_expired(now):
        assert token.expires is not None
        message = gettext(
            "This API token expired on %(when)s UTC. Create a new one on your account page."
        )
        return Refusal(message % {"when": f"{token.expires:%Y-%m-%d %H:%M}"}, "token_expired")
    vouched = vouched_until(token.user)
    if vouched is not None and vouched <= now:
        return Refusal(
            gettext(
                "This account signs in through the company's directory, which has not "
                "vouched for it recently (no sign-in within SSO_TOKEN_MAX_AGE, or LDAP no "
                "longer finds it): sign in again to use its API tokens."
            ),
            "sso_sign_in_needed",
        )
    node = node_scope.node_of(token.scope)
    role = role_of(token.user)
    capped = node is not None or bool(token.scope)
    if node is not None:
        role = min(role, Role.VIEWER)
    elif token.scope:
        role = min(role, Role.parse(token.scope))
    ends = [t for t in (token.expires, vouched) if t is not None]
    return TokenVerdict(token, role, capped, node, min(ends) if ends else None)

"""Types of the API token endpoints: create, list, change the expiry of, and revoke tokens.

:class:`NewToken` is the only answer that carries the key, once; :class:`TokenOut` is a token
as listed afterwards (its prefix, never the key).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from webapp.api.types.common import DateTime, In, Out

__all__ = [
    "NewToken",
    "TokenExpiryIn",
    "TokenIn",
    "TokenList",
    "TokenOut",
]


class TokenIn(In):
    name: Annotated[str, Field(max_length=100)] = "api"
    scope: Any = Field(None, description="viewer, operator or admin; default: the owner's role")
    expires_in_days: Any = Field(
        "default", description="Days until it expires, null for never; default TOKEN_DEFAULT_DAYS"
    )
    rate_per_minute: Any = Field(
        "unset",
        description="Admins only: inference calls a minute for this token, replacing the "
        "owner's INFER_RATE_PER_MINUTE; 0 for no limit; null or absent for the owner's",
    )


class TokenExpiryIn(In):
    expires_in_days: Any = Field("unset", description="Days from now, or null for never")
    rate_per_minute: Any = Field(
        "unset",
        description="Admins only, on any token: its own inference calls a minute (0: no "
        "limit; null: its owner's INFER_RATE_PER_MINUTE)",
    )


class TokenOut(Out):
    id: int
    name: str
    prefix: str
    scope: str
    created: DateTime
    last_used: DateTime | None
    expires: DateTime | None
    expired: bool
    rate_per_minute: int | None = Field(
        None, description="The token's own inference limit a minute; null: its owner's"
    )
    infer_rate_per_minute: int | None = Field(
        None, description="The inference calls a minute it may make now (0: no limit)"
    )


class NewToken(TokenOut):
    key: str = Field(description="Shown once")


class TokenList(Out):
    tokens: list[TokenOut]


class Me(Out):
    username: str
    role: str | None = Field(description="viewer, operator or admin; null: no role yet")
    source: str = Field(
        description="How the caller signed in: local, ldap, oidc, or token (an API token)"
    )

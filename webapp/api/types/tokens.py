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


class TokenExpiryIn(In):
    expires_in_days: Any = Field(description="Days from now, or null for never")


class TokenOut(Out):
    id: int
    name: str
    prefix: str
    scope: str
    created: DateTime
    last_used: DateTime | None
    expires: DateTime | None
    expired: bool


class NewToken(TokenOut):
    key: str = Field(description="Shown once")


class TokenList(Out):
    tokens: list[TokenOut]

"""``/api/v1/tokens``: the caller's own API tokens (list, create, set an expiry, revoke)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Router, Status

from webapp.accounts import tokens
from webapp.accounts.roles import Role, role_of
from webapp.api import types
from webapp.api.app import errors

router = Router(tags=["tokens"], exclude_unset=True)


@router.get("/tokens", response=types.TokenList, url_name="api-tokens", summary="Your tokens")
def token_list(request: HttpRequest) -> Any:
    rows = tokens.ApiToken.objects.live().filter(user=request.user)  # type: ignore[misc]
    return {"tokens": [t.to_dict() for t in rows]}


@router.post(
    "/tokens",
    response={201: types.NewToken, **errors(400, 403)},
    summary="Make a token (its key is shown once); a token may not do more than its owner",
)
def token_create(request: HttpRequest, data: types.TokenIn) -> Any:
    token, key = tokens.create(
        request.user,  # type: ignore[arg-type]
        name=data.name,
        scope=data.scope,
        days=data.expires_in_days,
        via_token=hasattr(request, "api_token"),
        rate_per_minute=data.rate_per_minute,
    )
    return Status(201, token.to_dict() | {"key": key})


@router.get(
    "/tokens/{int:token_id}",
    response={200: types.TokenOut, **errors(404)},
    url_name="api-token",
    summary="One of your tokens",
)
def token_detail(request: HttpRequest, token_id: int) -> Any:
    return tokens.owned(request.user, token_id).to_dict()  # type: ignore[arg-type]


@router.patch(
    "/tokens/{int:token_id}",
    response={200: types.TokenOut, **errors(400, 403, 404)},
    summary="Set its expiry; an admin may also set any token's rate_per_minute",
)
def token_expiry(request: HttpRequest, token_id: int, data: types.TokenExpiryIn) -> Any:
    user = request.user
    if data.rate_per_minute != tokens.UNSET and role_of(user) >= Role.ADMIN:
        token = tokens.any_token(token_id)
    else:
        token = tokens.owned(user, token_id)  # type: ignore[arg-type]
    if data.expires_in_days != tokens.UNSET:
        tokens.set_expiry(token, data.expires_in_days)
    if data.rate_per_minute != tokens.UNSET:
        tokens.set_rate(token, data.rate_per_minute, by=user)  # type: ignore[arg-type]
    return token.to_dict()


@router.delete("/tokens/{int:token_id}", response={204: None, **errors(404)}, summary="Revoke it")
def token_revoke(request: HttpRequest, token_id: int) -> Any:
    tokens.revoke(tokens.owned(request.user, token_id))  # type: ignore[arg-type]
    return HttpResponse(status=204)

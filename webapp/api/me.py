"""``/api/v1/me``: who the caller is, with which role, signed in how."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from webapp.accounts.roles import Role, role_of
from webapp.api import types
from webapp.api.app import any_role

router = Router(tags=["tokens"], exclude_unset=True)


@router.get("/me", response=types.Me, auth=None, url_name="api-me", summary="Who you are")
@any_role
def me(request: HttpRequest) -> Any:
    """Answered to anyone signed in, also without a role (``"role": null``)."""
    user = request.user
    role = role_of(user)
    if getattr(request, "api_token", None) is not None:
        source = "token"
    else:
        source = request.session.get("sign_in_source") or "local"
    return {
        "username": user.get_username(),
        "role": role.label if role is not Role.NONE else None,
        "source": source,
    }

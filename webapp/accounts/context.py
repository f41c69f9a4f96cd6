from __future__ import annotations

from django.http import HttpRequest

from webapp.accounts.roles import Role, role_of


def role(request: HttpRequest) -> dict[str, object]:
    """Expose the user's role to templates, so pages hide actions the user cannot take."""
    user_role = role_of(request.user) if hasattr(request, "user") else Role.NONE
    return {
        "hub_role": user_role,
        "can_operate": user_role >= Role.OPERATOR,
        "is_hub_admin": user_role >= Role.ADMIN,
    }

"""Roles are Django groups, ordered: a higher role can do everything a lower one can.

viewer   reads everything.
operator also uploads, compiles, serves, rolls back.
admin    also overrides failed verifications and manages users (Django admin).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from django.contrib.auth.models import Group
from django.utils.functional import Promise
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _


class Role(IntEnum):
    NONE = 0
    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        """The role's code: its group's name, the token scope, the API's ``role``."""
        return self.name.lower()

    @property
    def display(self) -> str | Promise:
        """The role's name for people, in the page's language (the header, messages)."""
        return ROLE_LABELS[self]

    @classmethod
    def parse(cls, text: str) -> Role:
        try:
            role = cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown role {text!r}; use viewer, operator or admin") from None
        if role is cls.NONE:
            raise ValueError("role 'none' cannot be granted")
        return role


GROUP_NAMES = ("viewer", "operator", "admin")

#: What people read for each role (the codes above stay English in data and the API).
ROLE_LABELS: dict[Role, str | Promise] = {
    Role.NONE: _("none"),
    Role.VIEWER: _("viewer"),
    Role.OPERATOR: _("operator"),
    Role.ADMIN: _("admin"),
}


def role_display(code: str) -> str | Promise:
    """A role code (``viewer``, ``operator``, ``admin``) in the page's language; anything
    else (a node token's ``node:<name>`` scope) as it is."""
    try:
        return ROLE_LABELS[Role[code.strip().upper()]] if code else code
    except KeyError:
        return code


def role_of(user: Any) -> Role:
    """The highest role of ``user`` (a User or AnonymousUser)."""
    if not user.is_authenticated or not user.is_active:
        return Role.NONE
    # Cached per request object: the group list does not change within a request. Read
    # first: a scoped API token caps the role here, a superuser's too (a viewer token of an
    # admin acts as a viewer).
    cached: Role | None = getattr(user, "_hub_role", None)
    if cached is not None:
        return cached
    if getattr(user, "is_superuser", False):
        return Role.ADMIN
    names = set(user.groups.values_list("name", flat=True))
    role = max((Role.parse(n) for n in names if n in GROUP_NAMES), default=Role.NONE)
    user._hub_role = role
    return role


def grant(user: Any, role: Role) -> None:
    """Make ``role`` the user's only hub group (staff/superuser flags follow admin)."""
    groups = Group.objects.filter(name__in=GROUP_NAMES)
    user.groups.remove(*groups)
    # get_or_create: test databases flushed between tests lose the migration-made groups.
    user.groups.add(Group.objects.get_or_create(name=role.label)[0])
    is_admin = role is Role.ADMIN
    user.is_staff = is_admin
    user.is_superuser = is_admin
    user.save(update_fields=["is_staff", "is_superuser"])
    user.__dict__.pop("_hub_role", None)


def require_role(user: Any, role: Role) -> None:
    """The one role check of the product (pages, API, actions): ``HubError`` 403 if too low."""
    from webapp.errors import HubError

    have = role_of(user)
    if have < role:
        raise HubError(
            gettext("This needs the %(role)s role; you are %(have)s.")
            % {"role": role.display, "have": have.display},
            "forbidden",
            403,
        )

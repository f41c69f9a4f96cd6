"""``SSO_ROLE_MAP``: which directory groups give which of the hub's roles.

The setting is ``;``-separated ``GROUP=ROLE`` entries. The role is what follows the *last*
``=``, so a group may be an LDAP DN (``cn=ml-admins,ou=groups,dc=example,dc=org=admin``) or a
plain name (an LDAP group's ``cn``, an OpenID Connect ``groups`` value). A person in several
mapped groups gets the highest role; in none, no role (the "no access yet" page).

DNs are compared as LDAP compares them: case-insensitively, with the spaces around ``,`` and
``=`` ignored. Plain names are compared exactly (an OIDC provider's groups are case-sensitive
strings). No Django here: the setting is checked when settings load.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

ROLES = ("viewer", "operator", "admin")
_RANK = {name: rank for rank, name in enumerate(ROLES, start=1)}
_DN_SPACES = re.compile(r"\s*([,=])\s*")


class RoleMapError(ValueError):
    """The setting cannot be read; the message says which entry and why."""


@dataclass(frozen=True)
class RoleMap:
    entries: tuple[tuple[str, str], ...]  # (group as compared, role)

    def role_for(self, groups: Iterable[str]) -> str | None:
        """The highest role any of ``groups`` maps to, or None."""
        keys = {_key(g) for g in groups if isinstance(g, str) and g.strip()}
        found = [role for group, role in self.entries if group in keys]
        return max(found, key=_RANK.__getitem__, default=None)

    def __bool__(self) -> bool:
        return bool(self.entries)


def parse(text: str) -> RoleMap:
    """The map a ``SSO_ROLE_MAP`` value describes.

    Raises:
        RoleMapError: An entry without ``=``, with no group, or naming an unknown role.
    """
    entries = []
    for raw in text.split(";"):
        entry = raw.strip()
        if not entry:
            continue
        group, sep, role = entry.rpartition("=")
        if not sep or not group.strip():
            raise RoleMapError(f"SSO_ROLE_MAP entry {entry!r} is not GROUP=ROLE.")
        role = role.strip().lower()
        if role not in _RANK:
            raise RoleMapError(
                f"SSO_ROLE_MAP entry {entry!r}: {role!r} is not a role; use viewer, operator "
                "or admin."
            )
        entries.append((_key(group), role))
    return RoleMap(tuple(entries))


def _key(group: str) -> str:
    """How a group is compared: a DN (it holds ``=``) normalised, a plain name as it is."""
    group = group.strip()
    return dn_key(group) if "=" in group else group


def dn_key(dn: str) -> str:
    """A DN as LDAP compares it (case and the spaces around ``,`` and ``=`` do not count)."""
    return _DN_SPACES.sub(r"\1", dn.strip()).lower()

"""LDAP sign-in through the normal form: django-auth-ldap, set from the hub's ``LDAP_*`` settings.

The flow is django-auth-ldap's: bind as the service account (``LDAP_BIND_DN``), search one
entry under ``LDAP_USER_SEARCH_BASE`` with ``LDAP_USER_FILTER`` (what the person typed is
escaped into it, so ``*``, ``)(`` or a NUL byte match nothing but themselves), bind as that
entry with the typed password, then read the groups under ``LDAP_GROUP_SEARCH_BASE``. An empty
password never reaches the directory: an LDAP server takes a bind with a DN and no password as
an anonymous bind, which succeeds.

Only the account step is the hub's (:meth:`HubLDAPBackend.get_or_build_user`): the person is
found by their entry's DN, never by user name, and their role comes from their groups' DNs and
names through ``SSO_ROLE_MAP``, as for OpenID Connect (:mod:`webapp.sso.accounts`).

This module imports python-ldap, which needs the system's OpenLDAP library to build: it is
imported only when ``LDAP_SERVER_URI`` is set (:mod:`webapp.sso.backends`).
"""

from __future__ import annotations

import logging
from typing import Any

import ldap
from django.conf import settings
from django.dispatch import receiver
from django_auth_ldap.backend import LDAPBackend, ldap_error
from django_auth_ldap.config import (
    GroupOfNamesType,
    GroupOfUniqueNamesType,
    LDAPGroupType,
    LDAPSearch,
    LDAPSettings,
    MemberDNGroupType,
    PosixGroupType,
)

from webapp.sso import accounts
from webapp.sso.models import Identity
from webapp.sso.role_map import dn_key

log = logging.getLogger(__name__)

#: LDAP_GROUP_TYPE: how each kind of group lists its members, and the filter that finds them.
GROUP_TYPES: dict[str, tuple[type[LDAPGroupType], dict[str, str], str]] = {
    "groupOfNames": (GroupOfNamesType, {}, "(objectClass=groupOfNames)"),
    "groupOfUniqueNames": (GroupOfUniqueNamesType, {}, "(objectClass=groupOfUniqueNames)"),
    "posixGroup": (PosixGroupType, {}, "(objectClass=posixGroup)"),
    "activeDirectory": (MemberDNGroupType, {"member_attr": "member"}, "(objectClass=group)"),
}
#: Where a person's user name, e-mail and full name are read from, first found wins.
_NAME_ATTRS = ("uid", "sAMAccountName", "cn")
_MAIL_ATTRS = ("mail", "userPrincipalName")
_FULL_NAME_ATTRS = ("displayName", "cn")
#: No prefix any Django setting has: every value comes from :func:`_settings`.
_NO_PREFIX = "HUB_SSO_LDAP_UNUSED_"


def connection_options() -> dict[int, Any]:
    """Bounded time for every connect and operation; the certificate always checked; no
    referrals chased (Active Directory hands them out for its other partitions)."""
    timeout = float(settings.LDAP_TIMEOUT_SECONDS)
    options: dict[int, Any] = {
        ldap.OPT_NETWORK_TIMEOUT: timeout,
        ldap.OPT_TIMEOUT: timeout,
        ldap.OPT_REFERRALS: 0,
        ldap.OPT_X_TLS_REQUIRE_CERT: ldap.OPT_X_TLS_DEMAND,
    }
    if settings.LDAP_CA_FILE:
        options[ldap.OPT_X_TLS_CACERTFILE] = settings.LDAP_CA_FILE
    # Applies the TLS options above to this connection; must come last.
    options[ldap.OPT_X_TLS_NEWCTX] = 0
    return options


def _settings() -> LDAPSettings:
    kind, kwargs, group_filter = GROUP_TYPES[settings.LDAP_GROUP_TYPE]
    group_base = settings.LDAP_GROUP_SEARCH_BASE
    return LDAPSettings(
        _NO_PREFIX,
        {
            "SERVER_URI": settings.LDAP_SERVER_URI,
            "BIND_DN": settings.LDAP_BIND_DN,
            "BIND_PASSWORD": settings.LDAP_BIND_PASSWORD,
            "START_TLS": settings.LDAP_START_TLS,
            "CONNECTION_OPTIONS": connection_options(),
            "USER_SEARCH": LDAPSearch(
                settings.LDAP_USER_SEARCH_BASE, ldap.SCOPE_SUBTREE, settings.LDAP_USER_FILTER
            ),
            "GROUP_SEARCH": LDAPSearch(group_base, ldap.SCOPE_SUBTREE, group_filter)
            if group_base
            else None,
            "GROUP_TYPE": kind(**kwargs) if group_base else None,
            # The hub keeps its own account fields and roles (get_or_build_user below).
            "ALWAYS_UPDATE_USER": False,
            "PERMIT_EMPTY_PASSWORD": False,
            "CACHE_TIMEOUT": 0,
        },
    )


class HubLDAPBackend(LDAPBackend):
    """django-auth-ldap with the hub's settings and its identity-based accounts."""

    #: True while re-checking (:func:`webapp.sso.recheck`): update the person, no sign-in.
    rechecking = False

    @property
    def settings(self) -> LDAPSettings:
        # Read on each use: a backend lives for one sign-in, and tests change the settings.
        return _settings()

    @settings.setter
    def settings(self, value: LDAPSettings) -> None:  # django-auth-ldap's API; unused here
        raise AttributeError("the hub's LDAP settings come from LDAP_* only")

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kw: Any
    ) -> Any:
        if not username or not password:  # never an anonymous bind
            return None
        user = super().authenticate(request, username=username, password=password)
        if user is not None and not user.is_active:
            # An admin deactivated this account on the hub: the directory does not override it.
            return None
        return user

    def get_or_build_user(self, username: str, ldap_user: Any) -> tuple[Any, bool]:
        person = _person(username, ldap_user)
        if self.rechecking:
            identity = accounts.recheck(person)
        else:
            identity = accounts.sign_in(person, login=username)
        return identity.user, False


def _person(typed: str, ldap_user: Any) -> accounts.Person:
    attrs = ldap_user.attrs or {}
    groups: list[str] = []
    if ldap_user.settings.GROUP_TYPE is not None:
        groups = sorted(ldap_user.group_dns) + sorted(ldap_user.group_names)
    return accounts.Person(
        source=Identity.Source.LDAP,
        issuer=settings.LDAP_SERVER_URI,
        subject=dn_key(ldap_user.dn),
        username=_first(attrs, _NAME_ATTRS) or typed,
        email=_first(attrs, _MAIL_ATTRS),
        name=_first(attrs, _FULL_NAME_ATTRS),
        groups=tuple(groups),
    )


def _first(attrs: dict[str, list[str]], names: tuple[str, ...]) -> str:
    lowered = {key.lower(): values for key, values in attrs.items()}
    for name in names:
        values = lowered.get(name.lower())
        if values:
            return str(values[0])[:254]
    return ""


@receiver(ldap_error)
def _remember_directory_error(
    sender: Any, context: str, user: Any, request: Any, exception: Exception, **kw: Any
) -> None:
    """The sign-in page says the directory did not answer, rather than "wrong password"."""
    log.warning("LDAP directory error (%s): %s", context, _describe(exception))
    if request is not None:
        request.sso_directory_error = _describe(exception)


def _describe(exc: Exception) -> str:
    """python-ldap's errors carry a dict (``desc``, ``info``); one line of it."""
    detail = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
    parts = [str(detail.get("desc", "")) or type(exc).__name__, str(detail.get("info", ""))]
    return ": ".join(p for p in parts if p)[:300]


def probe() -> str:
    """Bind as the service account and read the user search base, as a sign-in would; what
    was found, in a line. Raises ``ldap.LDAPError`` (or ValueError) saying what failed."""
    conn = ldap.initialize(settings.LDAP_SERVER_URI, bytes_mode=False)
    try:
        for option, value in connection_options().items():
            conn.set_option(option, value)
        if settings.LDAP_START_TLS:
            conn.start_tls_s()
        conn.simple_bind_s(settings.LDAP_BIND_DN, settings.LDAP_BIND_PASSWORD)
        found = conn.search_s(
            settings.LDAP_USER_SEARCH_BASE, ldap.SCOPE_BASE, "(objectClass=*)", ["1.1"]
        )
        if not found:
            raise ValueError(f"LDAP_USER_SEARCH_BASE {settings.LDAP_USER_SEARCH_BASE!r} is empty")
        return settings.LDAP_BIND_DN or "anonymous"
    finally:
        conn.unbind_s()


def describe_error(exc: Exception) -> str:
    return _describe(exc) if isinstance(exc, ldap.LDAPError) else str(exc)

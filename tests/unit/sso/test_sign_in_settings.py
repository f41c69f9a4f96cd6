"""The sign-in settings a hub refuses to start with, each saying which and why."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from webapp.sso.settings import checked_settings

LDAP = {
    "LDAP_SERVER_URI": "ldap://ldap.example.org",
    "LDAP_USER_SEARCH_BASE": "ou=people,dc=example,dc=org",
    "LDAP_USER_FILTER": "(uid=%(user)s)",
    "LDAP_GROUP_TYPE": "groupOfNames",
    "LDAP_START_TLS": False,
}


def _apply(settings: Any, **values: Any) -> None:
    for name, value in {**LDAP, **values}.items():
        setattr(settings, name, value)


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"LDAP_SERVER_URI": "http://ldap.example.org"}, "ldap:// or ldaps://"),
        ({"LDAP_SERVER_URI": "ldaps://x", "LDAP_START_TLS": True}, "TLS already"),
        ({"LDAP_USER_SEARCH_BASE": ""}, "LDAP_USER_SEARCH_BASE"),
        ({"LDAP_USER_FILTER": "uid=%(user)s"}, "in parentheses"),
        ({"LDAP_USER_FILTER": "(uid=ana)"}, "%(user)s"),
        ({"LDAP_USER_FILTER": "(&(uid=%(user)s)(cn=%(name)s))"}, "only placeholder"),
        ({"LDAP_GROUP_TYPE": "nestedGroups"}, "groupOfUniqueNames"),
        ({"LOCAL_SIGN_IN": "nobody"}, "everyone or admins"),
    ],
)
def test_unusable_ldap_settings_stop_the_start(settings: Any, values: dict, says: str) -> None:
    _apply(settings, **values)
    with pytest.raises(ImproperlyConfigured, match=says.replace("(", r"\(").replace(")", r"\)")):
        checked_settings()


def test_usable_ldap_settings_pass(settings: Any) -> None:
    pytest.importorskip("ldap")
    _apply(settings, LDAP_USER_FILTER="(&(objectClass=person)(sAMAccountName=%(user)s))")
    checked_settings()


def test_without_ldap_server_nothing_about_ldap_is_checked(settings: Any) -> None:
    _apply(settings, LDAP_SERVER_URI="", LDAP_USER_SEARCH_BASE="", LDAP_GROUP_TYPE="x")
    checked_settings()

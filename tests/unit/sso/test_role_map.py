"""``SSO_ROLE_MAP``: groups to roles, the highest wins, DNs compared as LDAP compares them."""

from __future__ import annotations

import pytest

from webapp.sso.role_map import RoleMapError, parse

MAP = "cn=ml-admins,ou=groups,dc=example,dc=org=admin;ml-ops=operator; ml-viewers = viewer"


def test_the_role_follows_the_last_equals_sign() -> None:
    roles = parse(MAP)
    assert roles.role_for(["cn=ml-admins,ou=groups,dc=example,dc=org"]) == "admin"
    assert roles.role_for(["ml-ops"]) == "operator"
    assert roles.role_for(["ml-viewers"]) == "viewer"


def test_several_groups_give_the_highest_role() -> None:
    assert parse(MAP).role_for(["ml-viewers", "ml-ops", "other"]) == "operator"


def test_no_mapped_group_gives_no_role() -> None:
    assert parse(MAP).role_for(["other", "ML-OPS", ""]) is None  # plain names: exact
    assert parse("").role_for(["ml-ops"]) is None
    assert not parse(" ; ")


def test_dns_match_whatever_their_case_and_spaces() -> None:
    roles = parse(MAP)
    assert roles.role_for(["CN=ML-Admins, OU=groups, DC=example, DC=org"]) == "admin"


@pytest.mark.parametrize(
    ("text", "needle"),
    [("ml-ops", "not GROUP=ROLE"), ("=admin", "not GROUP=ROLE"), ("ml-ops=root", "not a role"),
     ("ml-ops=none", "not a role")],
)  # fmt: skip
def test_a_bad_entry_is_refused_naming_it(text: str, needle: str) -> None:
    with pytest.raises(RoleMapError, match=needle):
        parse(text)

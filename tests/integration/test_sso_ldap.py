"""Signing in through a real OpenLDAP directory (tests/fixtures/ldap_directory.py) with the
normal sign-in form: the service account's search, the person's bind, their groups of each
kind mapped to roles. Then what an attacker or a broken network brings: filter injection
through the user name, an empty password, the directory down or too slow (local accounts still
work), a person removed from the directory (their API tokens stop after the re-check), TLS
with and without the directory's CA."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from tests.fixtures.ldap_directory import GROUPS, PEOPLE, Directory
from tests.fixtures.ports import free_ports, silent_server
from tests.fixtures.users import PASSWORD, token_for

pytestmark = [pytest.mark.integration, pytest.mark.sso, pytest.mark.django_db(transaction=True)]

ROLE_MAP = f"cn=ml-admins,{GROUPS}=admin;ml-ops=operator;ml-viewers-unique=viewer"


def _configure(settings: Any, directory: Directory, **more: Any) -> None:
    from webapp.sso.settings import checked_settings

    for name, value in directory.settings(**more).items():
        setattr(settings, name, value)
    settings.SSO_ROLE_MAP = more.pop("SSO_ROLE_MAP", ROLE_MAP)
    checked_settings()


def _sign_in(username: str, password: str) -> tuple[Client, Any]:
    client = Client()
    answer = client.post("/login/", {"username": username, "password": password})
    return client, answer


def _me(client: Client) -> dict[str, Any]:
    answer = client.get("/api/v1/me")
    assert answer.status_code == 200, answer.content
    return dict(answer.json())


def test_people_sign_in_with_the_role_of_their_groups(
    settings: Any, ldap_directory: Directory
) -> None:
    from webapp.registry.jobs.models import Event
    from webapp.sso.models import Identity

    _configure(settings, ldap_directory)
    page = Client().get("/login/").content.decode()
    assert "company account (LDAP)" in page

    # ana: in ml-admins (mapped by DN) and ml-ops (by name): the higher role wins.
    client, answer = _sign_in("ana", "ana-pass-1")
    assert answer.status_code == 302, answer.content
    assert _me(client) == {"username": "ana", "role": "admin", "source": "ldap"}
    identity = Identity.objects.get(user__username="ana")
    assert identity.source == "ldap" and identity.subject == f"uid=ana,{PEOPLE}"
    assert f"cn=ml-admins,{GROUPS}" in identity.groups and "ml-ops" in identity.groups
    event = Event.objects.get(kind="user.signed_in")
    assert event.data["source"] == "ldap" and event.data["role"] == "admin"

    # bo: ml-ops only, named by its cn.
    client, _ = _sign_in("bo", "bo-pass-1")
    assert _me(client)["role"] == "operator"
    # cy: no groupOfNames group: signed in, with no role (the "no access yet" page).
    client, answer = _sign_in("cy", "cy-pass-1")
    assert answer.status_code == 302
    assert _me(client)["role"] is None
    assert "no role" in client.get("/models/").content.decode()

    # Case does not make a second person.
    client, _ = _sign_in("ANA", "ana-pass-1")
    assert _me(client)["username"] == "ana"
    assert Identity.objects.filter(source="ldap").count() == 3


@pytest.mark.parametrize(
    ("group_type", "person", "password", "role_map", "role"),
    [
        ("groupOfUniqueNames", "cy", "cy-pass-1", ROLE_MAP, "viewer"),
        ("posixGroup", "dee", "dee-pass-1", "ml-posix=operator", "operator"),
    ],
)
def test_other_kinds_of_groups_by_setting(
    settings: Any,
    ldap_directory: Directory,
    group_type: str,
    person: str,
    password: str,
    role_map: str,
    role: str,
) -> None:
    _configure(settings, ldap_directory, LDAP_GROUP_TYPE=group_type, SSO_ROLE_MAP=role_map)
    client, answer = _sign_in(person, password)
    assert answer.status_code == 302, answer.content
    assert _me(client)["role"] == role


def test_hostile_user_names_and_passwords_are_refused(
    settings: Any, ldap_directory: Directory
) -> None:
    """The typed name is escaped into the filter: wildcards and filter pieces match only
    themselves. An empty password never binds (it would be an anonymous bind)."""
    from django.contrib.auth import authenticate
    from django.test import RequestFactory

    from webapp.sso.models import Identity

    _configure(settings, ldap_directory)
    for name in ("*", "an*", "ana)(uid=*", "*)(|(uid=*", "ana\x00", "ana)", "(uid=ana)"):
        _, answer = _sign_in(name, "ana-pass-1")
        assert answer.status_code == 200, name
        assert "do not match" in answer.content.decode(), name
    _, answer = _sign_in("ana", "wrong")
    assert "do not match" in answer.content.decode()
    request = RequestFactory().post("/login/")
    for password in ("", None):
        assert authenticate(request, username="ana", password=password) is None
    from webapp.sso.directory import HubLDAPBackend

    assert HubLDAPBackend().authenticate(request, username="ana", password="") is None
    assert not Identity.objects.exists()


def test_a_directory_name_never_takes_over_a_local_account(
    settings: Any, ldap_directory: Directory, admin_user: Any
) -> None:
    """The directory's ``admin`` person is not the hub's local ``ada``-like admin: a local
    account with the same name keeps its password and role; the person gets ``admin.ldap``."""
    from django.contrib.auth.models import User

    from tests.fixtures.users import make_user

    local = make_user("admin", "viewer")
    _configure(settings, ldap_directory)
    client, answer = _sign_in("admin", "dir-admin-pass")
    assert answer.status_code == 302
    assert _me(client) == {"username": "admin.ldap", "role": None, "source": "ldap"}
    local.refresh_from_db()
    assert local.check_password(PASSWORD)
    client, _ = _sign_in("admin", PASSWORD)
    assert _me(client) == {"username": "admin", "role": "viewer", "source": "local"}
    assert User.objects.filter(username__startswith="admin").count() == 2


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers: a hung directory."""
    with silent_server() as port:
        yield port


def test_the_directory_down_or_hung_is_said_and_local_accounts_still_work(
    settings: Any, ldap_directory: Directory, operator: Any, silent_port: int
) -> None:
    (closed,) = free_ports(1)
    for uri in (f"ldap://127.0.0.1:{closed}", f"ldap://127.0.0.1:{silent_port}"):
        _configure(settings, ldap_directory, LDAP_SERVER_URI=uri, LDAP_TIMEOUT_SECONDS=1)
        started = time.monotonic()
        _, answer = _sign_in("ana", "ana-pass-1")
        took = time.monotonic() - started
        assert answer.status_code == 503, uri
        assert "did not answer" in answer.content.decode()
        # Bounded: a connect and one operation, each within LDAP_TIMEOUT_SECONDS.
        assert took < 10, (uri, took)
        client, answer = _sign_in("otto", PASSWORD)
        assert answer.status_code == 302
        assert _me(client)["source"] == "local"


def test_tls_needs_the_directorys_ca(settings: Any, ldap_directory: Directory) -> None:
    ca = str(ldap_directory.ca_file)
    _configure(settings, ldap_directory, LDAP_START_TLS=True, LDAP_CA_FILE=ca)
    client, answer = _sign_in("bo", "bo-pass-1")
    assert answer.status_code == 302 and _me(client)["role"] == "operator"
    _configure(settings, ldap_directory, LDAP_SERVER_URI=ldap_directory.ldaps_uri,
               LDAP_CA_FILE=ca)  # fmt: skip
    client, answer = _sign_in("bo", "bo-pass-1")
    assert answer.status_code == 302
    # A certificate this host does not trust: refused, never sent a password in the clear.
    _configure(settings, ldap_directory, LDAP_START_TLS=True, LDAP_CA_FILE="")
    _, answer = _sign_in("bo", "bo-pass-1")
    assert answer.status_code == 503


def test_the_recheck_follows_the_directory_and_stops_tokens_of_people_removed(
    settings: Any, ldap_directory: Directory
) -> None:
    from webapp.registry.jobs.models import Event
    from webapp.sso.models import Identity
    from webapp.sso.recheck import recheck_directory

    _configure(settings, ldap_directory)
    session, _ = _sign_in("ana", "ana-pass-1")
    _sign_in("bo", "bo-pass-1")
    ana = Identity.objects.get(user__username="ana")
    token = token_for(ana.user)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    assert Client().get("/api/v1/me", **headers).json()["role"] == "admin"

    # Out of ml-admins: the re-check lowers the role to ml-ops' operator, and says so.
    ldap_directory.set_members("ml-admins", "bo")
    before = ana.vouched
    assert recheck_directory() == {"enabled": True, "directory": "ok", "found": 2, "gone": 0}
    ana.refresh_from_db()
    assert ana.role == "operator" and ana.vouched > before
    assert Client().get("/api/v1/me", **headers).json()["role"] == "operator"
    assert Event.objects.filter(kind="user.role_changed").count() == 2  # ana down, bo up

    # Removed from the directory: not vouched for any more; 15 minutes on, the token stops.
    ldap_directory.remove_person("ana")
    assert recheck_directory()["gone"] == 1
    Identity.objects.filter(pk=ana.pk).update(vouched=ana.vouched - timedelta(minutes=16))
    answer = Client().get("/api/v1/me", **headers)
    assert answer.status_code == 401 and answer.json()["code"] == "sso_sign_in_needed"
    assert session.get("/api/v1/me").status_code == 401  # the open session ended too
    _, answer = _sign_in("ana", "ana-pass-1")
    assert "do not match" in answer.content.decode()

    # The directory down: nobody is vouched for (fail closed), and the run says why.
    (closed,) = free_ports(1)
    settings.LDAP_SERVER_URI = f"ldap://127.0.0.1:{closed}"
    settings.LDAP_TIMEOUT_SECONDS = 1
    result = recheck_directory()
    assert result["directory"] == "unreachable" and result["reason"]


def test_diagnostics_check_the_bind(settings: Any, ldap_directory: Directory) -> None:
    from webapp.ops.diagnostics import run_hub_checks

    _configure(settings, ldap_directory)
    checks = {c["id"]: c for c in run_hub_checks()["checks"]}
    assert checks["ldap_bind"]["state"] == "ok"
    assert checks["oidc_discovery"]["state"] == "not_applicable"
    settings.LDAP_BIND_PASSWORD = "not-the-password"
    checks = {c["id"]: c for c in run_hub_checks()["checks"]}
    assert checks["ldap_bind"]["state"] == "failing"
    assert "Invalid credentials" in str(checks["ldap_bind"]["found"])

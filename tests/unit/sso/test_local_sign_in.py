"""LOCAL_SIGN_IN=admins: only admins and the accounts named in LOCAL_SIGN_IN_ACCOUNTS sign in
with a local password; the others are told to use their company account, and their open
sessions end. The default keeps every local account working."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.fixtures.users import PASSWORD, make_user, signed_in

pytestmark = pytest.mark.django_db


def _sign_in(username: str) -> Any:
    return Client().post("/login/", {"username": username, "password": PASSWORD})


def test_every_local_account_signs_in_by_default(operator: Any) -> None:
    assert _sign_in("otto").status_code == 302


def test_admins_only_refuses_the_others_with_the_reason(settings: Any, operator: Any,
                                                        admin_user: Any) -> None:  # fmt: skip
    settings.LOCAL_SIGN_IN = "admins"
    answer = _sign_in("otto")
    assert answer.status_code == 403
    assert "Local sign-in is turned off for this account" in answer.content.decode()
    assert _sign_in("ada").status_code == 302
    # A wrong password still says only "do not match": nothing about the account leaks.
    answer = Client().post("/login/", {"username": "otto", "password": "wrong"})
    assert answer.status_code == 200 and "do not match" in answer.content.decode()


def test_the_break_glass_account_is_named(settings: Any) -> None:
    make_user("breakglass", "operator")
    settings.LOCAL_SIGN_IN = "admins"
    settings.LOCAL_SIGN_IN_ACCOUNTS = ["breakglass"]
    assert _sign_in("breakglass").status_code == 302


def test_turning_it_off_ends_open_sessions(settings: Any, operator: Any) -> None:
    client = signed_in(operator)
    assert client.get("/api/v1/me").status_code == 200
    settings.LOCAL_SIGN_IN = "admins"
    assert client.get("/api/v1/me").status_code in (401, 403)
    assert client.get("/models/").status_code == 302  # to the sign-in page

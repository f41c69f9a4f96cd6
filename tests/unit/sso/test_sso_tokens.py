"""An SSO user's API tokens follow their directory: they stop ``SSO_TOKEN_MAX_AGE`` after the
last sign-in through it; ``/api/v1/me`` says how each caller came in."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tests.fixtures.users import make_user, signed_in, token_for
from webapp.sso.models import Identity

pytestmark = pytest.mark.django_db


def _directory_user(hours_ago: float) -> tuple[str, Client]:
    user = make_user("ana", "operator")
    when = timezone.now() - timedelta(hours=hours_ago)
    Identity.objects.create(user=user, source="oidc", issuer="https://id.example.org",
                            subject="ana-sub", signed_in=when, vouched=when)  # fmt: skip
    return token_for(user), Client()


def test_tokens_work_while_the_directory_vouched_recently(settings) -> None:
    settings.SSO_TOKEN_MAX_AGE = 3600
    key, client = _directory_user(hours_ago=0.5)
    answer = client.get("/api/v1/me", HTTP_AUTHORIZATION=f"Token {key}")
    assert answer.status_code == 200
    assert answer.json() == {"username": "ana", "role": "operator", "source": "token"}


def test_tokens_stop_once_the_directory_has_not_vouched_for_too_long(settings) -> None:
    settings.SSO_TOKEN_MAX_AGE = 3600
    key, client = _directory_user(hours_ago=2)
    answer = client.get("/api/v1/models", HTTP_AUTHORIZATION=f"Token {key}")
    assert answer.status_code == 401 and answer.json()["code"] == "sso_sign_in_needed"


def test_me_for_a_local_session_and_a_person_without_a_role(operator) -> None:
    assert signed_in(operator).get("/api/v1/me").json() == {
        "username": "otto", "role": "operator", "source": "local",
    }  # fmt: skip
    from django.contrib.auth.models import User

    nobody = User.objects.create_user("nobody")
    answer = signed_in(nobody).get("/api/v1/me")
    assert answer.status_code == 200 and answer.json()["role"] is None
    assert signed_in(nobody).get("/api/v1/models").status_code == 403
    assert Client().get("/api/v1/me").status_code == 401

"""One token verdict (webapp/inference/tokens.py) for both sides that take API tokens.

For each kind of token, the middleware's answer (through Django's test client) and the ``/v2``
fast path's grant (its reads, webapp/fast_path_reads.py) follow the same verdict: a token the
verdict refuses gets Django's 401 with the verdict's code and no grant on the fast path, and a
token it accepts is served by both, with the same role cap and end."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tests.fixtures.users import make_user
from webapp import fast_path_reads
from webapp.accounts.models import ApiToken
from webapp.accounts.roles import Role
from webapp.fast_path_reads import READS
from webapp.inference.tokens import Refusal, TokenVerdict, token_verdict
from webapp.sso.models import Identity

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _same_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path's reads run in a worker thread and first let go of a connection the
    database may have closed; here they run in the test's thread, inside its transaction."""
    monkeypatch.setattr(fast_path_reads, "close_old_connections", lambda: None)


def _answer(key: str) -> tuple[int, str | None]:
    answer = Client().get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {key}")
    return answer.status_code, answer.json().get("code") if answer.status_code != 200 else None


@pytest.mark.parametrize("kind", ["unknown", "revoked", "expired", "not_vouched"])
def test_a_refused_token_is_refused_by_both_sides_alike(kind: str, settings) -> None:
    settings.SSO_TOKEN_MAX_AGE = 3600
    user = make_user("ana", "operator")
    token, key = ApiToken.issue(user)
    if kind == "unknown":
        key = "not-a-key"
    elif kind == "revoked":
        ApiToken.objects.filter(pk=token.pk).update(revoked=timezone.now())
    elif kind == "expired":
        ApiToken.objects.filter(pk=token.pk).update(expires=timezone.now() - timedelta(minutes=1))
    else:
        long_ago = timezone.now() - timedelta(hours=2)
        Identity.objects.create(user=user, source="oidc", issuer="https://id.example.org",
                                subject="ana", signed_in=long_ago, vouched=long_ago)  # fmt: skip
    verdict = token_verdict(key, timezone.now())
    assert isinstance(verdict, Refusal)
    assert _answer(key) == (401, verdict.code)
    assert READS.grant(key) is None


def test_an_accepted_token_carries_its_scope_cap_and_its_earliest_end(settings) -> None:
    settings.SSO_TOKEN_MAX_AGE = 3600
    user = make_user("ana", "admin")
    expires = timezone.now() + timedelta(days=2)
    _, key = ApiToken.issue(user, scope="viewer", expires=expires)
    vouched = timezone.now() - timedelta(minutes=30)
    Identity.objects.create(user=user, source="oidc", issuer="https://id.example.org",
                            subject="ana", signed_in=vouched, vouched=vouched)  # fmt: skip
    verdict = token_verdict(key, timezone.now())
    assert isinstance(verdict, TokenVerdict)
    assert verdict.role is Role.VIEWER and verdict.capped and verdict.node is None
    assert verdict.ends == vouched + timedelta(seconds=3600)  # before the token's own expiry
    answer = Client().get("/api/v1/me", HTTP_AUTHORIZATION=f"Token {key}")
    # A superuser too: the token's scope caps the admin's role.
    assert answer.status_code == 200 and answer.json()["role"] == "viewer"
    assert Client().post("/api/v1/models", {"name": "m"}, content_type="application/json",
                         HTTP_AUTHORIZATION=f"Token {key}").status_code == 403  # fmt: skip
    grant = READS.grant(key)
    assert grant is not None and grant.expires == pytest.approx(verdict.ends.timestamp())


def test_a_node_token_is_left_to_django_by_the_fast_path() -> None:
    user = make_user("node-b", "operator")
    _, key = ApiToken.issue(user, scope="node:b")
    verdict = token_verdict(key, timezone.now())
    assert isinstance(verdict, TokenVerdict) and verdict.node == "b"
    assert verdict.role is Role.VIEWER
    assert READS.grant(key) is None

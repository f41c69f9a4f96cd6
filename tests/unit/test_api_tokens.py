"""Security finding 10: tokens expire, are scoped, can be listed and revoked, not on /admin/."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from tests.fixtures.users import signed_in
from webapp.accounts.models import ApiToken


def _bearer(key: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {key}")


def test_a_revoked_token_is_refused_from_its_next_request(operator) -> None:
    token, key = ApiToken.issue(operator)
    client = _bearer(key)
    assert client.get("/api/v1/models").status_code == 200
    assert client.delete(f"/api/v1/tokens/{token.pk}").status_code == 204  # revokes itself
    refused = client.get("/api/v1/models")
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]


def test_an_expired_token_is_refused_with_when(viewer) -> None:
    _, key = ApiToken.issue(viewer, expires=timezone.now() - timedelta(minutes=1))
    refused = _bearer(key).get("/api/v1/models")
    assert refused.status_code == 401 and refused.json()["code"] == "token_expired"


def test_a_scope_caps_the_token_below_its_owners_role(operator) -> None:
    _, key = ApiToken.issue(operator, scope="viewer")
    client = _bearer(key)
    assert client.get("/api/v1/models").status_code == 200
    create = client.post(
        "/api/v1/models", data=json.dumps({"name": "m"}), content_type="application/json"
    )
    assert create.status_code == 403 and "viewer" in create.json()["error"]


def test_the_owners_lower_role_still_caps_a_wider_scope(operator) -> None:
    from webapp.accounts.roles import Role, grant

    _, key = ApiToken.issue(operator, scope="operator")
    grant(operator, Role.VIEWER)
    create = _bearer(key).post(
        "/api/v1/models", data=json.dumps({"name": "m"}), content_type="application/json"
    )
    assert create.status_code == 403


def test_a_token_cannot_be_wider_than_its_owner_or_mint_another(viewer) -> None:
    session = signed_in(viewer)
    wide = session.post(
        "/api/v1/tokens", data=json.dumps({"name": "x", "scope": "admin"}),
        content_type="application/json",
    )  # fmt: skip
    assert wide.status_code == 403 and wide.json()["code"] == "scope_too_wide"
    made = session.post(
        "/api/v1/tokens", data=json.dumps({"name": "ci"}), content_type="application/json"
    )
    assert made.status_code == 201
    body = made.json()
    assert body["key"].startswith("tmh_") and body["scope"] == "viewer"
    expires = timezone.datetime.fromisoformat(body["expires"])
    assert timedelta(days=89) < expires - timezone.now() <= timedelta(days=90)
    minted = _bearer(body["key"]).post(
        "/api/v1/tokens", data=json.dumps({"name": "more"}), content_type="application/json"
    )
    assert minted.status_code == 403 and minted.json()["code"] == "session_required"


def test_owners_list_and_set_an_expiry_on_old_tokens_and_see_no_one_elses(viewer, operator) -> None:
    old, _ = ApiToken.issue(viewer)  # as made before expiry existed
    ApiToken.issue(operator)
    session = signed_in(viewer)
    listed = session.get("/api/v1/tokens").json()["tokens"]
    assert [t["id"] for t in listed] == [old.pk] and listed[0]["expires"] is None
    patched = session.patch(
        f"/api/v1/tokens/{old.pk}", data=json.dumps({"expires_in_days": 30}),
        content_type="application/json",
    )  # fmt: skip
    assert patched.status_code == 200 and patched.json()["expires"] is not None
    other = ApiToken.objects.exclude(user=viewer).get()
    assert session.delete(f"/api/v1/tokens/{other.pk}").status_code == 404


def test_tokens_are_not_accepted_on_the_admin_site(admin_user) -> None:
    _, key = ApiToken.issue(admin_user)
    response = _bearer(key).get("/admin/")
    assert response.status_code == 403 and response.json()["code"] == "token_not_accepted"
    assert signed_in(admin_user).get("/admin/").status_code == 200


def test_the_account_page_creates_shows_once_expires_and_revokes(viewer) -> None:
    session = signed_in(viewer)
    old, _ = ApiToken.issue(viewer, name="from-before")
    page = session.get("/account/tokens/").content.decode()
    assert "from-before" in page and "NO EXPIRY" in page and "Set expiry" in page
    created = session.post(
        "/account/tokens/", {"name": "laptop", "scope": "viewer", "expires_in_days": "30"}
    )
    assert created.status_code == 200
    assert "shown this once" in created.content.decode()
    session.post(f"/account/tokens/{old.pk}/expiry/", {"expires_in_days": "90"})
    old.refresh_from_db()
    assert old.expires is not None
    session.post(f"/account/tokens/{old.pk}/revoke/")
    old.refresh_from_db()
    assert old.revoked is not None
    assert "from-before" not in session.get("/account/tokens/").content.decode()


@pytest.mark.django_db
def test_the_command_keeps_printing_the_key_last_and_takes_days_and_scope() -> None:
    out = io.StringIO()
    call_command("apitoken", "ci", "--role", "operator", "--days", "7", "--scope", "viewer",
                 stdout=out)  # fmt: skip
    key = out.getvalue().split()[-1]
    token = ApiToken.objects.for_key(key)
    assert token is not None and token.scope == "viewer" and token.expires is not None


# -- a token's own inference limit (rate_per_minute) ---------------------------------------------


def test_an_admin_gives_a_service_token_its_own_limit(admin_user, operator, settings) -> None:
    from tests.fixtures.api import ApiClient
    from webapp.accounts.models import ApiToken

    settings.INFER_RATE_PER_MINUTE = 600
    service, _ = ApiToken.issue(operator, "service")
    assert service.to_dict()["infer_rate_per_minute"] == 600
    admin = ApiClient(admin_user)
    answer = admin("patch", f"/api/v1/tokens/{service.pk}", {"rate_per_minute": 0})
    assert answer.status_code == 200, answer.content
    assert answer.json()["rate_per_minute"] == 0 and answer.json()["infer_rate_per_minute"] == 0
    answer = admin("patch", f"/api/v1/tokens/{service.pk}", {"rate_per_minute": None})
    assert answer.json()["rate_per_minute"] is None
    assert answer.json()["infer_rate_per_minute"] == 600


@pytest.mark.parametrize("value", [-1, 1.5, "100", True, 10**9])
def test_a_bad_limit_is_refused(admin_user, operator, value) -> None:
    from tests.fixtures.api import ApiClient
    from webapp.accounts.models import ApiToken

    service, _ = ApiToken.issue(operator, "service")
    answer = ApiClient(admin_user)(
        "patch", f"/api/v1/tokens/{service.pk}", {"rate_per_minute": value}
    )
    assert answer.status_code == 400
    assert ApiToken.objects.get(pk=service.pk).rate_per_minute is None


def test_only_an_admin_sets_a_limit(operator) -> None:
    from tests.fixtures.api import ApiClient
    from webapp.accounts.models import ApiToken

    own, _ = ApiToken.issue(operator, "mine")
    answer = ApiClient(operator)("patch", f"/api/v1/tokens/{own.pk}", {"rate_per_minute": 0})
    assert answer.status_code == 403 and answer.json()["code"] == "admin_required"
    assert ApiToken.objects.get(pk=own.pk).rate_per_minute is None


def test_the_expiry_alone_is_set_as_before(operator) -> None:
    from tests.fixtures.api import ApiClient
    from webapp.accounts.models import ApiToken

    own, _ = ApiToken.issue(operator, "mine")
    answer = ApiClient(operator)("patch", f"/api/v1/tokens/{own.pk}", {"expires_in_days": 7})
    assert answer.status_code == 200 and answer.json()["expires"] is not None


def test_the_infer_api_counts_a_limited_token_apart(operator, settings, redis_url) -> None:
    from tests.fixtures.api import ApiClient
    from webapp.accounts.models import ApiToken
    from webapp.registry.catalogue.models import Model

    settings.LIMITS_REDIS_URL = redis_url
    settings.INFER_RATE_PER_MINUTE = 100
    Model.objects.create(name=f"unserved{operator.pk}", created_by=operator)
    client = ApiClient(operator)
    ApiToken.objects.filter(key_prefix=client.key[:12]).update(rate_per_minute=1)
    path = f"/api/v1/models/unserved{operator.pk}/infer"
    assert client("post", path, {"inputs": {}}).status_code == 409  # counted, then not served
    refused = client("post", path, {"inputs": {}})
    assert (
        refused.status_code == 429
        and "this token's limit is 1 per minute" in refused.json()["error"]
    )
    assert ApiClient(operator)("post", path, {"inputs": {}}).status_code == 409  # another token


def test_apitoken_sets_a_limit(db) -> None:
    from io import StringIO

    from django.core.management import call_command

    from webapp.accounts.models import ApiToken

    out = StringIO()
    call_command("apitoken", "svc", "--role", "operator", "--rate-per-minute", "6000", stdout=out)
    token = ApiToken.objects.get(user__username="svc")
    assert token.rate_per_minute == 6000 and token.to_dict()["infer_rate_per_minute"] == 6000

"""Sign-in is required everywhere; roles gate actions; CSRF protects session writes."""

import importlib
import json

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from tests.fixtures.users import token_for

PAGES = ["/models/", "/models/new/", "/server/", "/admin/"]
API = ["/api/v1/health", "/api/v1/server", "/api/v1/models", "/api/v1/devices", "/api/v1/schema"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", PAGES)
def test_pages_redirect_anonymous_visitors_to_sign_in(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 302
    assert "/login/" in response["Location"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", API)
def test_api_answers_anonymous_callers_with_json_401(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


@pytest.mark.django_db
def test_liveness_probe_needs_no_sign_in(client: Client) -> None:
    assert client.get("/api/v1/health/live").json() == {"status": "ok"}


@pytest.mark.django_db
def test_the_migration_creates_the_role_groups() -> None:
    # The migration's own function, on an empty table: a test database keeps the groups that
    # migrate made only until a transactional test (run earlier by the same worker) flushes it.
    from django.apps import apps

    migration = importlib.import_module("webapp.accounts.migrations.0002_role_groups")
    Group.objects.all().delete()
    migration.create_groups(apps, None)
    migration.create_groups(apps, None)  # run twice (a re-run migration) it makes no copies
    assert sorted(Group.objects.values_list("name", flat=True)) == ["admin", "operator", "viewer"]


def test_a_valid_token_authenticates(client: Client, viewer) -> None:
    response = client.get("/api/v1/models", HTTP_AUTHORIZATION=f"Token {token_for(viewer)}")
    assert response.status_code == 200
    assert response.json() == {"models": []}


@pytest.mark.django_db
@pytest.mark.parametrize("header", ["Token nope", "Bearer abc", "Token", "Basic dXNlcjpwYXNz"])
def test_bad_tokens_are_refused(client: Client, header: str) -> None:
    response = client.get("/api/v1/models", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_token_of_a_deactivated_user_stops_working(client: Client, viewer) -> None:
    key = token_for(viewer)
    viewer.is_active = False
    viewer.save()
    assert client.get("/api/v1/models", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401


def test_a_viewer_cannot_create_models_through_the_api(client: Client, viewer) -> None:
    response = client.post(
        "/api/v1/models",
        data=json.dumps({"name": "m"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token_for(viewer)}",
    )
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"


def test_a_viewer_cannot_open_the_new_model_page(viewer_client: Client) -> None:
    assert viewer_client.get("/models/new/").status_code == 403
    assert (
        viewer_client.post("/models/new/", {"name": "m", "target": "onnxruntime"}).status_code
        == 403
    )


def test_a_viewer_does_not_see_the_new_model_button(viewer_client: Client) -> None:
    body = viewer_client.get("/models/").content.decode()
    assert "New model" not in body and "ask an operator" in body


def test_a_viewer_cannot_reach_the_admin(viewer_client: Client) -> None:
    assert viewer_client.get("/admin/").status_code == 302  # to the admin's own sign-in


def test_session_writes_need_a_csrf_token(operator) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post(
        "/api/v1/models", data=json.dumps({"name": "m"}), content_type="application/json"
    )
    assert response.status_code == 403
    assert response.json()["code"] == "csrf_failed"
    page = client.post("/models/new/", {"name": "m", "target": "onnxruntime"})
    assert page.status_code == 403


def test_token_writes_need_no_csrf_token(operator) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post(
        "/api/v1/models",
        data=json.dumps({"name": "m"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {token_for(operator)}",
    )
    assert response.status_code == 201


def test_sign_in_with_the_form_works(client: Client, viewer) -> None:
    from tests.fixtures.users import PASSWORD

    response = client.post("/login/", {"username": "vera", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get("/models/").status_code == 200


def test_sign_in_with_a_wrong_password_says_so(client: Client, viewer) -> None:
    response = client.post("/login/", {"username": "vera", "password": "wrong"})
    assert response.status_code == 200
    assert "do not match" in response.content.decode()

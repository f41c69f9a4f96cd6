"""Management commands other tools rely on."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from webapp.accounts.roles import Role, role_of


@pytest.mark.django_db
def test_apitoken_creates_the_user_and_prints_the_token_last() -> None:
    out = io.StringIO()
    call_command("apitoken", "robot", "--role", "operator", stdout=out)
    key = out.getvalue().split()[-1]
    user = get_user_model().objects.get(username="robot")
    assert role_of(user) is Role.OPERATOR
    response = Client().get("/api/v1/models", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200


@pytest.mark.django_db
def test_apitoken_defaults_new_users_to_viewer() -> None:
    call_command("apitoken", "reader", stdout=io.StringIO())
    assert role_of(get_user_model().objects.get(username="reader")) is Role.VIEWER


@pytest.mark.django_db
def test_ensure_admin_creates_admin_once_with_the_given_password(monkeypatch) -> None:
    monkeypatch.setenv("HUB_ADMIN_PASSWORD", "s3cret-passw0rd")
    call_command("ensure_admin", stdout=io.StringIO())
    out = io.StringIO()
    call_command("ensure_admin", stdout=out)
    assert "exists" in out.getvalue()
    admin = get_user_model().objects.get(username="admin")
    assert admin.check_password("s3cret-passw0rd") and role_of(admin) is Role.ADMIN


@pytest.mark.django_db
def test_ensure_admin_prints_a_generated_password_once(monkeypatch) -> None:
    monkeypatch.delenv("HUB_ADMIN_PASSWORD", raising=False)
    out = io.StringIO()
    call_command("ensure_admin", stdout=out)
    password = out.getvalue().split("password: ")[1].split()[0]
    assert get_user_model().objects.get(username="admin").check_password(password)


@pytest.mark.django_db
def test_no_model_change_lacks_a_migration() -> None:
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db
@pytest.mark.parametrize("weak", ["admin", "12345678901234", "password1234", "short"])
def test_ensure_admin_refuses_a_weak_password_from_the_environment(monkeypatch, weak) -> None:
    from django.core.management.base import CommandError

    monkeypatch.setenv("HUB_ADMIN_PASSWORD", weak)
    with pytest.raises(CommandError, match="HUB_ADMIN_PASSWORD is not accepted"):
        call_command("ensure_admin", stdout=io.StringIO())
    assert not get_user_model().objects.filter(username="admin").exists()

"""Security finding 7: HTTPS in one setting, a clean deploy check, and throttled sign-in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from model_store import spawn
from tests.fixtures.users import PASSWORD

ROOT = Path(__file__).resolve().parents[2]


def _production_env(tmp_path: Path) -> dict[str, str]:
    """The production env example, filled in as its comments ask, plus HTTPS=true."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE"))}
    for line in (ROOT / "deploy" / "production.env.example").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            env[key] = value
    env |= {
        "SECRET_KEY": "k" * 20 + "-a-long-random-production-key-0123456789abcdefghijklmnop",
        "POSTGRES_PASSWORD": "0123456789abcdef",
        "TRITON_API_KEY": "0123456789abcdef0123456789abcdef",
        "HUB_VAR_DIR": str(tmp_path / "var"),
        "DJANGO_SETTINGS_MODULE": "webapp.settings",
    }
    return env


def test_the_production_example_passes_djangos_deploy_check(tmp_path: Path) -> None:
    env = _production_env(tmp_path)
    assert env.get("HTTPS") == "true", "deploy/production.env.example should turn HTTPS on"
    done = spawn.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


def test_https_turns_on_secure_cookies_hsts_redirect_and_the_proxy_header(settings) -> None:
    env = _production_env(Path("/nonexistent"))
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, "
        "s.SECURE_HSTS_SECONDS, list(s.SECURE_PROXY_SSL_HEADER)]))"
    )
    env["HUB_VAR_DIR"] = str(Path(settings.VAR_DIR))
    done = spawn.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == (
        '[true, true, true, 31536000, ["HTTP_X_FORWARDED_PROTO", "https"]]'
    )


@pytest.mark.django_db
def test_sign_in_is_paused_after_five_failures_for_that_user_and_address(settings) -> None:
    user = get_user_model().objects.create_user("victim", password=PASSWORD)
    attacker = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        wrong = attacker.post("/login/", {"username": "victim", "password": "guess-1234567"})
        assert wrong.status_code == 200  # the form again, with its error
    last = attacker.post("/login/", {"username": "victim", "password": "guess-1234567"})
    assert last.status_code == 429  # the failure that reaches the limit pauses the pair
    locked = attacker.post("/login/", {"username": "victim", "password": PASSWORD})
    assert locked.status_code == 429
    assert "Sign-in paused" in locked.content.decode()
    # Another address signs in as usual; the lock is per user and address.
    other = Client(REMOTE_ADDR="198.51.100.7")
    assert other.post("/login/", {"username": "victim", "password": PASSWORD}).status_code == 302
    assert user.is_active


@pytest.mark.django_db
def test_the_admin_sign_in_is_throttled_too(settings) -> None:
    get_user_model().objects.create_superuser("boss", password=PASSWORD)
    client = Client(REMOTE_ADDR="203.0.113.10")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/admin/login/", {"username": "boss", "password": "nope-nope-nope"})
    assert (
        client.post("/admin/login/", {"username": "boss", "password": PASSWORD}).status_code == 429
    )

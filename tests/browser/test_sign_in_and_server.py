"""A person signs in and sees Triton ready on the server page (real Triton, real Chromium)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.users import PASSWORD, make_user


@pytest.fixture
def live_triton(settings, embedded_triton):
    urls = embedded_triton.triton.urls
    settings.TRITON_URL = urls["http"]
    settings.TRITON_GRPC_URL = urls["grpc"]
    settings.TRITON_METRICS_URL = urls["metrics"]
    settings.TRITON_API_KEY = embedded_triton.triton.api_key  # the server page reads the index
    return embedded_triton


def sign_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/server/")
    expect(page).to_have_url(f"{base}/login/?next=/server/")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()


def test_sign_in_then_see_triton_ready(
    page: Page, live_server, live_triton, transactional_db, screenshot_dir: Path
) -> None:
    make_user("vera", "viewer")
    sign_in(page, live_server.url, "vera")
    expect(page).to_have_url(f"{live_server.url}/server/")
    status = page.locator("#server-status")
    expect(status.get_by_text("LIVE", exact=True)).to_be_visible()
    # .first: the server's own badge; models other tests left loaded show READY rows too.
    expect(status.get_by_text("READY", exact=True).first).to_be_visible()
    expect(status).to_contain_text("2.51")
    expect(status).to_contain_text("model_repository")
    page.screenshot(path=str(screenshot_dir / "server.png"), full_page=True)


def test_wrong_password_is_explained(page: Page, live_server, transactional_db) -> None:
    make_user("vera", "viewer")
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("User name").fill("vera")
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("do not match")


def test_operator_creates_a_model_from_the_empty_state(
    page: Page, live_server, transactional_db, screenshot_dir: Path
) -> None:
    make_user("otto", "operator")
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("User name").fill("otto")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("No models yet")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "models-empty.png"), full_page=True)
    page.get_by_role("button", name="Create your first model").click()
    page.get_by_label("Name").fill("../escape")
    page.get_by_role("button", name="Create model").click()
    expect(page.get_by_role("alert")).to_contain_text("not allowed")
    page.get_by_label("Name").fill("digits-mlp")
    page.get_by_role("button", name="Create model").click()
    expect(page).to_have_url(f"{live_server.url}/models/digits-mlp/")
    expect(page.get_by_role("heading", name="digits-mlp")).to_be_visible()

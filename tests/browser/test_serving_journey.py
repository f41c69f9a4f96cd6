"""Serve v1, serve v2, roll back to v1 from the browser while a client sends traffic the whole
time: not one request fails, and the model page shows each step in its history."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from playwright.sync_api import Page, expect

from tests.fixtures.users import PASSWORD, token_for
from tests.integration.test_compile_pipeline import create_model
from tests.integration.test_serving_product import (  # noqa: F401  (fixtures)
    Traffic,
    add_version,
    triton,
    triton_ports,
    worker_env,
)

pytestmark = pytest.mark.integration


def click_and_follow_job(page: Page, base: str, button) -> None:  # type: ignore[no-untyped-def]
    page.once("dialog", lambda dialog: dialog.accept())
    button.click()
    page.wait_for_url("**/jobs/**")
    expect(page.locator("#job-status").get_by_text("SUCCEEDED")).to_be_visible(timeout=90_000)


def test_serve_switch_and_roll_back_from_the_browser_under_traffic(
    page: Page,
    live_server,
    celery_worker,
    triton,  # noqa: F811
    operator,
    screenshot_dir: Path,
) -> None:
    key = token_for(operator)
    client = Client()

    def api(method: str, path: str, **kwargs):  # type: ignore[no-untyped-def]
        return getattr(client, method)(path, HTTP_AUTHORIZATION=f"Token {key}", **kwargs)

    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    add_version(api, celery_worker, 2)
    base = live_server.url
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill("otto")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    page.goto(f"{base}/models/mlp/")
    v1_row = page.locator("#version-rows tr", has_text="v1")
    click_and_follow_job(page, base, v1_row.get_by_role("button", name="Serve"))
    with Traffic(triton.urls["http"], threads=2) as traffic:
        page.goto(f"{base}/models/mlp/")
        expect(page.get_by_role("heading", name="mlp")).to_contain_text("v1 READY")
        v2_row = page.locator("#version-rows tr", has_text="v2")
        click_and_follow_job(page, base, v2_row.get_by_role("button", name="Serve"))
        page.goto(f"{base}/models/mlp/")
        expect(page.get_by_role("heading", name="mlp")).to_contain_text("v2 READY")
        click_and_follow_job(page, base, page.get_by_role("button", name="Roll back to v1"))
        page.goto(f"{base}/models/mlp/")
        expect(page.get_by_role("heading", name="mlp")).to_contain_text("v1 READY")
    assert len(traffic.results) > 20
    assert traffic.failures() == []
    assert {v for _, v, _ in traffic.results} == {1, 2}
    history = page.locator("table.events")
    expect(history).to_contain_text("rolled back mlp from v2 to v1")
    expect(history).to_contain_text("switched mlp from v1 to v2")
    page.screenshot(path=str(screenshot_dir / "serving.png"), full_page=True)

"""Serve v1, serve v2, roll back to v1 from the browser while a client sends traffic the whole
time: not one request fails, and the model page shows each step in its history."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.pipeline import add_version, create_model, mlp_traffic
from tests.fixtures.users import PASSWORD

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
    triton,
    api,
    screenshot_dir: Path,
) -> None:
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
    with mlp_traffic(triton.urls["http"], threads=2) as traffic:
        page.goto(f"{base}/models/mlp/")
        expect(page.get_by_role("heading", name="mlp")).to_contain_text("v1 READY")
        v2_row = page.locator("#version-rows tr", has_text="v2")
        click_and_follow_job(page, base, v2_row.get_by_role("button", name="Serve"))
        page.goto(f"{base}/models/mlp/")
        expect(page.get_by_role("heading", name="mlp")).to_contain_text("v2 READY")
        click_and_follow_job(page, base, page.get_by_role("button", name="Roll back to v1"))
        page.goto(f"{base}/models/mlp/")
        expect(page.get_by_role("heading", name="mlp")).to_contain_text("v1 READY")
    assert len(traffic.outcomes) > 20
    assert traffic.failures() == []
    assert traffic.versions_between(0) == {1, 2}
    history = page.locator("table.events")
    expect(history).to_contain_text("rolled back mlp from v2 to v1")
    expect(history).to_contain_text("switched mlp from v1 to v2")
    page.screenshot(path=str(screenshot_dir / "serving.png"), full_page=True)

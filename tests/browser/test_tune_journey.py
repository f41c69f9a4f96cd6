"""Find the best config from the Performance tab: ask within a p99 budget, watch the trials
arrive in the table and the chart, and turn the winner into a revision with one click."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.browser import serve_mlp, sign_in
from webapp.registry.performance.models import TuningRun

pytestmark = [pytest.mark.integration, pytest.mark.load]


@pytest.fixture
def worker_env(triton_env: dict[str, str]) -> dict[str, str]:
    """Each load level is measured for 1 s instead of 2 (``TUNE_STEP_SECONDS``): the journey
    is under test, not the figures, and the search ends sooner."""
    return triton_env | {"TUNE_STEP_SECONDS": "1"}


def test_an_operator_finds_a_better_config_and_makes_it_a_revision(
    page: Page, live_server, celery_worker, triton, api, screenshot_dir: Path
) -> None:
    serve_mlp(api, celery_worker)
    base = live_server.url
    sign_in(page, base)

    page.goto(f"{base}/models/mlp/perf/")
    panel = page.locator("#tune-panel")
    expect(panel.get_by_text("Find the best config").first).to_be_visible()
    panel.locator("input[name=p99_ms]").fill("1000")
    panel.locator("select[name=budget_s]").select_option("60")
    panel.get_by_role("button", name="Find the best config").click()

    # Trials arrive while it runs: the serving config first, drawn as a point.
    rows = page.locator(".tune-trials tbody tr")
    expect(rows.first).to_contain_text("serving config", timeout=60_000)
    expect(page.locator("#tune-chart svg circle").first).to_be_attached()
    page.screenshot(path=str(screenshot_dir / "tune-running.png"), full_page=True)

    expect(panel.locator(".badge", has_text="Succeeded")).to_be_visible(timeout=120_000)
    run = TuningRun.objects.get()
    assert rows.count() == len(run.trials) >= 2
    assert page.locator("#tune-chart svg circle").count() == sum(
        1 for t in run.trials if t["state"] == "measured"
    )
    page.screenshot(path=str(screenshot_dir / "tune-finished.png"), full_page=True)
    if run.best in (None, 0):
        expect(panel.locator(".note")).to_be_visible()
        return
    # The winner differs from the serving config by at least one line: one added (more
    # instances, a batch size) or only removed (a winner without the serving config's batching).
    expect(panel.locator(".config-diff .diff-add, .config-diff .diff-del").first).to_be_visible()
    panel.get_by_role("button", name="Make the winner a revision of v1").click()
    page.wait_for_url("**/models/mlp/versions/2/")
    expect(page.get_by_text("Revision of v1").first).to_be_visible()

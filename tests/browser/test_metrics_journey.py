"""The Metrics tab in Chromium: a served model, inferences sent by this test through the hub's
API, the scrape task run, and the page's numbers and charts move to exactly that count; after a
switch to v2 both versions are drawn side by side."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from model_store.runtime.client import TritonRuntime
from model_store.runtime.metrics import parse_scrape
from tests.fixtures.pipeline import add_version, create_model
from tests.fixtures.users import PASSWORD
from tests.fixtures.waiting import wait_until
from webapp.ops.metrics_store import flush_client_calls, scrape_and_store

pytestmark = pytest.mark.integration


def _triton_success(metrics_url: str, version: int) -> float:
    text = TritonRuntime("127.0.0.1:9", metrics_url=metrics_url).scrape_metrics()
    series = parse_scrape(text, at=0).series.get(("mlp", str(version)))
    return (series.get("success") or 0) if series else 0


def _wait_until_triton_counted(metrics_url: str, version: int, expected: float) -> None:
    """Triton may publish a finished request's counters a moment later: wait (bounded)."""
    wait_until(
        lambda: _triton_success(metrics_url, version) >= expected, 10,
        message=f"Triton never counted {expected} for v{version}",
    )  # fmt: skip


@pytest.fixture(autouse=True)
def no_leftover_client_calls(transactional_db) -> None:  # type: ignore[no-untyped-def]
    """Calls counted by earlier tests in this process must not land in this test's numbers."""
    from webapp.ops.metrics_store import _take_pending
    from webapp.ops.models import ClientTally

    _take_pending()
    ClientTally.objects.all().delete()


def test_the_metrics_tab_shows_the_count_this_test_sent(
    page: Page,
    live_server,
    celery_worker,
    triton,
    api,
    settings,
    screenshot_dir: Path,
) -> None:
    # The test server has no websocket: the page falls back to polling every scrape interval.
    settings.METRICS_SCRAPE_SECONDS = 1
    settings.INFER_RATE_PER_MINUTE = 0

    def infer(count: int) -> None:
        for i in range(count):
            answer = api("post", "/api/v1/models/mlp/infer", {"inputs": {"x": [[0.1 * i] * 8]}})
            assert answer.status_code == 200, answer.json()

    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    add_version(api, celery_worker, 2)
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1}).status_code == 200
    scrape_and_store()  # the baseline the next scrape is diffed with

    page.goto(f"{live_server.url}/login/")
    page.get_by_label("User name").fill("otto")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{live_server.url}/models/mlp/metrics/")
    charts = page.locator("#metrics-charts")
    expect(charts).to_have_attribute("data-total-requests", "0")
    expect(page.locator("#chart-throughput")).to_contain_text("No data")

    sent = 12
    before = _triton_success(settings.TRITON_METRICS_URL, 1)  # serving ran a check request
    infer(sent)
    flush_client_calls()
    _wait_until_triton_counted(settings.TRITON_METRICS_URL, 1, before + sent)
    scrape_and_store()
    expect(charts).to_have_attribute("data-total-requests", str(sent), timeout=15_000)
    expect(page.locator("#chart-throughput canvas").first).to_be_visible()
    expect(page.locator('[data-metric="total_requests"]')).to_have_text(str(sent))
    expect(page.locator('[data-metric="total_client_requests"]')).to_have_text(str(sent))
    expect(page.locator('[data-metric="requests_per_s"]')).not_to_have_text("0 /s")

    # Switch to v2 and send more: both versions are drawn, and the total adds up.
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 2}).status_code == 200
    more = 5
    scrape_and_store()  # the switch's own check requests, before this test's
    before = _triton_success(settings.TRITON_METRICS_URL, 2)
    base = api("get", "/api/v1/models/mlp/metrics").json()["totals"]["requests"]
    infer(more)
    flush_client_calls()
    _wait_until_triton_counted(settings.TRITON_METRICS_URL, 2, before + more)
    scrape_and_store()
    expect(charts).to_have_attribute("data-total-requests", str(base + more), timeout=15_000)
    expect(charts).to_have_attribute("data-versions", "1,2")
    expect(page.locator("#chart-throughput .u-legend")).to_contain_text("v2 requests")
    page.screenshot(path=str(screenshot_dir / "metrics.png"), full_page=True)

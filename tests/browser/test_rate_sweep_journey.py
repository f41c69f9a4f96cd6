"""A fixed-rate sweep from the Performance tab in Chromium, next to a fixed-concurrency one: the
form shows each mode's fields, a real worker measures the served MLP at the rates asked, the
table shows offered and achieved rates with the late count, and the chart's x axis follows
the kind of sweep ticked."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.browser import serve_mlp, sign_in
from webapp.registry.performance.models import PerfRun

# load: it drives a model at fixed rates for seconds; run once in CI, not per database.
pytestmark = [pytest.mark.integration, pytest.mark.load]


def test_a_fixed_rate_sweep_is_drawn_against_the_offered_rate(
    page: Page, live_server, celery_worker, triton, api, screenshot_dir: Path
) -> None:
    serve_mlp(api, celery_worker)
    base = live_server.url
    sign_in(page, base)

    # First a fixed-concurrency sweep, the default.
    page.goto(f"{base}/models/mlp/perf/")
    rates = page.locator("input[name=rates]")
    expect(rates).to_be_hidden()
    page.locator("select[name=max_concurrency]").select_option("2")
    page.locator("input[name=step_seconds]").fill("1")
    page.get_by_role("button", name="Start sweep").click()
    first = page.locator(".perf-run").first
    expect(first.get_by_text("Succeeded")).to_be_visible(timeout=90_000)

    # Then the same model at fixed rates.
    page.get_by_label("Fixed request rate").check()
    expect(rates).to_be_visible()
    expect(page.locator("select[name=max_concurrency]")).to_be_hidden()
    # 2000 req/s is more than this machine's client and Triton keep up with: some are late.
    rates.fill("20, 200, 2000")
    page.locator("input[name=step_seconds]").fill("1")
    page.get_by_role("button", name="Start sweep").click()
    newest = page.locator(".perf-run").first
    expect(newest.get_by_text("Succeeded")).to_be_visible(timeout=90_000)

    run = PerfRun.objects.order_by("-created").first()
    assert run is not None and run.plan["mode"] == "rate"
    offered = [level["offered_rps"] for level in run.levels]
    assert offered == [20.0, 200.0, 2000.0][: len(offered)] and offered
    for level in run.levels:
        assert level["failed"] == 0 and level["completed"] > 0
        assert level["completed"] + level["unsent"] == round(level["offered_rps"])
    table = newest.locator("table.levels")
    expect(table.locator("thead")).to_contain_text("Offered req/s")
    expect(table.locator("thead")).to_contain_text("late")
    expect(table.locator("tbody tr")).to_have_count(len(run.levels))
    expect(table.locator("tbody tr").first.locator("td").first).to_have_text("20")
    print("rate sweep:", [
        (lv["offered_rps"], round(lv["throughput_rps"], 1), lv["late"], lv["unsent"],
         lv["concurrency"], lv["latency"] and round(lv["latency"]["p99_ms"], 2))
        for lv in run.levels
    ], "stopped:", run.stopped)  # fmt: skip
    # The form comes back in the mode of the newest sweep, with its rates.
    expect(page.get_by_label("Fixed request rate")).to_be_checked()
    expect(rates).to_have_value("20, 200, 2000")

    # Both are ticked; the newest (fixed rate) decides the axis and the other is named.
    chart = page.locator("#perf-chart")
    expect(chart).to_have_attribute("data-drawn", "1")
    title = page.locator("[data-chart-title]")
    expect(title).to_have_text("Throughput and latency by offered rate")
    expect(page.locator("[data-chart-skipped]")).to_contain_text("fixed concurrency not drawn")
    page.screenshot(path=str(screenshot_dir / "perf-rate-sweep.png"), full_page=True)

    # Unticking it shows the concurrency sweep on its own axis.
    page.locator(f"[data-run-toggle='{run.pk}']").uncheck()
    expect(title).to_have_text("Throughput and latency by concurrency")
    expect(chart).to_have_attribute("data-drawn", "1")
    page.screenshot(path=str(screenshot_dir / "perf-concurrency-sweep.png"), full_page=True)

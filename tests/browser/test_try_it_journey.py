"""From an empty dashboard to a classified photo: add the demo model with one click, watch it
compile and serve, drop a real photo on Try it and see "espresso" first; refuse a file that is
not a photo with a reason; save and rerun an example; run a sweep and see its chart drawn."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.users import PASSWORD

pytestmark = pytest.mark.integration

DEMO = Path(__file__).resolve().parents[2] / "demo"


def test_from_one_click_to_espresso_and_a_sweep_chart(
    page: Page,
    live_server,
    celery_worker,
    triton,
    operator,
    screenshot_dir: Path,
) -> None:
    base = live_server.url
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill("otto")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    started = time.monotonic()

    page.goto(f"{base}/models/")
    page.get_by_role("button", name="Add the demo model").click()
    page.wait_for_url("**/jobs/**")
    expect(page.locator("#job-status").get_by_text("SUCCEEDED")).to_be_visible(timeout=180_000)

    # The Try it tab waits for the version to serve, then shows the panel by itself.
    page.goto(f"{base}/models/efficientnet-lite0/try/")
    photo_input = page.locator("[data-image-file]")
    expect(photo_input).to_be_attached(timeout=90_000)
    expect(page.get_by_role("heading", name="efficientnet-lite0")).to_contain_text("READY")

    photo_input.set_input_files(str(DEMO / "images" / "coffee.png"))
    first = page.locator("[data-topk] li").first
    expect(first).to_contain_text("espresso", timeout=30_000)
    percent = float(re.search(r"([\d.]+)%", first.inner_text()).group(1))  # type: ignore[union-attr]
    assert percent > 90
    seconds = time.monotonic() - started
    print(f"one click to a classified photo: {seconds:.1f} s")
    expect(page.locator("[data-latency]")).to_contain_text("round trip")
    expect(page.locator("[data-snippet=python]")).to_contain_text("tritonclient")
    page.screenshot(path=str(screenshot_dir / "try-it-espresso.png"), full_page=True)

    # Save this input, then rerun it from the list.
    page.get_by_text("Saved examples").click()
    page.locator("[data-example-name]").fill("espresso photo")
    page.get_by_role("button", name="Save current input").click()
    saved = page.locator("[data-examples] li", has_text="espresso photo")
    expect(saved).to_be_visible()
    page.locator("[data-result]").evaluate("el => el.innerHTML = ''")
    saved.get_by_role("button", name="Run").click()
    expect(page.locator("[data-topk] li").first).to_contain_text("espresso", timeout=30_000)

    # A file that is not a photo is refused with a reason, next to the result.
    photo_input.set_input_files(str(DEMO / "efficientnet-lite0" / "labels.txt"))
    expect(page.locator("[data-result] .error")).to_contain_text("not an image", timeout=30_000)

    # A sweep from the Performance tab draws its chart and fills the table.
    page.goto(f"{base}/models/efficientnet-lite0/perf/")
    page.locator("select[name=max_concurrency]").select_option("2")
    page.locator("input[name=step_seconds]").fill("1")
    page.get_by_role("button", name="Start sweep").click()
    run = page.locator(".perf-run").first
    expect(run.get_by_text("Succeeded")).to_be_visible(timeout=90_000)
    expect(run.locator("table.levels tbody tr")).to_have_count(2)
    expect(page.locator("#perf-chart")).to_have_attribute("data-drawn", "1")
    expect(page.locator("#perf-chart canvas")).to_be_attached()
    page.screenshot(path=str(screenshot_dir / "try-it-sweep.png"), full_page=True)

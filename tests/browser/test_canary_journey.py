"""A canary from the model page: start it from the form, watch the card follow it live while a
client calls ``/v2``, and see it promoted; the same card in Chinese."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from playwright.sync_api import Page, expect

from tests.fixtures.pipeline import add_version, create_model
from tests.fixtures.users import PASSWORD

pytestmark = [pytest.mark.integration, pytest.mark.canary]


def _calls(address: str, key: str, stop: threading.Event) -> None:
    """A client of the hub's /v2 naming no version, until ``stop``."""
    x = np.ones((1, 8), dtype=np.float32)
    client = httpclient.InferenceServerClient(address, network_timeout=30)
    given = httpclient.InferInput("x", [1, 8], "FP32")
    given.set_data_from_numpy(x, binary_data=True)
    while not stop.is_set():
        try:
            client.infer("mlp", [given], headers={"Authorization": f"Bearer {key}"})
        except Exception:  # the assertions are on the page; a refused call just waits
            stop.wait(0.2)
        stop.wait(0.02)


def test_start_follow_and_promote_a_canary_from_the_page(
    page: Page, live_server, celery_worker, triton, api, screenshot_dir: Path
) -> None:
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    add_version(api, celery_worker, 2)
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1}).status_code == 200
    base = live_server.url
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill("otto")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    stop = threading.Event()
    client = threading.Thread(
        target=_calls, args=(base.removeprefix("http://"), api.key, stop), daemon=True
    )
    client.start()
    try:
        page.goto(f"{base}/models/mlp/")
        card = page.locator("#canary")
        expect(card).to_contain_text("Start a canary")
        card.get_by_label("Candidate").select_option("2")
        card.get_by_label("Steps, in percent of traffic").fill("50, 100")
        card.get_by_label("Seconds per step").fill("8")
        # A gate that only a broken candidate fails: one cold first call is p99 of 15 calls.
        card.get_by_label("Highest p99 (x serving)").fill("50")
        card.get_by_label("Least requests per side").fill("15")
        card.get_by_role("button", name="Start the canary").click()
        expect(card.get_by_role("button", name="Promote now")).to_be_visible(timeout=60_000)
        expect(card).to_contain_text("50%")
        expect(card.locator("table.canary-sides")).to_contain_text("p99")
        page.wait_for_timeout(3000)  # the card refreshes itself: numbers come in
        card.screenshot(path=str(screenshot_dir / "canary-running.png"))
        expect(card).to_contain_text("PROMOTED", timeout=90_000)
        card.get_by_text("Decisions").click()
        expect(card).to_contain_text("passed")
        card.screenshot(path=str(screenshot_dir / "canary-promoted.png"))
        page.reload()  # the history is read when the page loads
        expect(page.locator("table.events")).to_contain_text("Canary of mlp v2")
    finally:
        stop.set()
        client.join(10)

    page.set_extra_http_headers({"Accept-Language": "zh-Hans"})
    page.goto(f"{base}/models/mlp/")
    expect(page.locator("#canary")).to_contain_text("金丝雀发布")
    page.locator("#canary").screenshot(path=str(screenshot_dir / "canary-zh.png"))

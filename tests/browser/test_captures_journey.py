"""The Captures tab in Chromium: an operator turns capture on, sees captured requests (an image
input as a picture), filters them by version, keeps one as a Try it example, deletes one; a
viewer sees only the counts.

The captures are written by the capture writer itself (``recorder.write``), as it writes the
ones the inference paths hand it; the inference paths are tests/integration/test_capture.py's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.browser import sign_in
from tests.fixtures.registry import served_model
from tests.fixtures.users import make_user

SIGNATURE = {
    "inputs": [{"name": "pixels", "dtype": "TYPE_FP32", "dims": [-1, 3, 32, 32]}],
    "outputs": [{"name": "means", "dtype": "TYPE_FP32", "dims": [-1, 3]}],
}


def _picture(seed: int) -> np.ndarray:
    """A 32 x 32 picture, NCHW: a gradient whose colour depends on ``seed``."""
    ramp = np.linspace(0, 1, 32, dtype=np.float32)
    picture = np.zeros((1, 3, 32, 32), dtype=np.float32)
    picture[0, seed % 3] = ramp[None, :] * ramp[:, None]
    return picture


@pytest.mark.usefixtures("transactional_db")
def test_an_operator_works_through_captured_requests(
    page: Page, live_server, operator, screenshot_dir: Path
) -> None:
    from webapp.registry.capture import recorder
    from webapp.registry.capture.models import CapturePolicy
    from webapp.registry.catalogue.models import Version

    model = served_model("channels", operator, SIGNATURE)
    Version.objects.create(model=model, number=2, status=Version.Status.READY,
                           source_filename="m.onnx", source_sha256="1" * 64, source_size=1,
                           signature=SIGNATURE)  # fmt: skip
    base = live_server.url
    sign_in(page, base)
    page.goto(f"{base}/models/channels/captures/")
    expect(page.locator("#capture-settings")).to_contain_text("OFF")
    expect(page.locator("#captures-empty")).to_contain_text("Turn capture on")
    page.get_by_label("Sample rate (percent)").fill("50")
    page.get_by_role("button", name="Save capture settings").click()
    expect(page.locator(".flash")).to_contain_text("Capture settings saved")
    expect(page.locator("#capture-settings")).to_contain_text("ON · 50%")
    assert CapturePolicy.objects.get(model=model).sample_rate == 50

    for seed, version in ((0, 1), (1, 1), (2, 2)):
        picture = _picture(seed)
        item = recorder.Item("channels", version, "otto", 3.5 + seed, "v2",
                             inputs={"pixels": picture},
                             outputs={"means": picture.mean(axis=(2, 3))})  # fmt: skip
        assert recorder.write(item) == "written"
    page.reload()
    expect(page.locator("#capture-count")).to_have_text("3")
    rows = page.locator("table.captures tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first.locator("img.capture-thumb")).to_be_visible()
    # The picture is really drawn (the browser decoded a PNG of the right size).
    width = rows.first.locator("img.capture-thumb").evaluate(
        "img => img.decode().then(() => img.naturalWidth)"
    )
    assert width == 32
    page.screenshot(path=str(screenshot_dir / "captures-tab.png"), full_page=True)

    page.get_by_label("Version").select_option("1")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(2)
    rows.first.get_by_label("Example name").fill("real photo")
    rows.first.get_by_role("button", name="Save as example").click()
    expect(page.locator(".flash")).to_contain_text("real photo")
    expect(rows).to_have_count(2)  # the filter is kept
    assert model.examples.filter(name="real photo").exists()
    rows.first.get_by_role("button", name="Delete").click()
    expect(rows).to_have_count(1)
    expect(page.locator("#capture-count")).to_have_text("2")

    # A viewer sees the counts, never the requests.
    make_user("vera", "viewer")
    page.goto("about:blank")  # no refresh of the old page may set a cookie now
    page.context.clear_cookies()
    sign_in(page, base, "vera")
    page.goto(f"{base}/models/channels/captures/")
    expect(page.locator("#capture-count")).to_have_text("2")
    expect(page.locator("#captures")).to_have_count(0)
    expect(page.locator("#capture-form")).to_have_count(0)
    assert page.request.get(f"{base}/models/channels/captures/1/image.png").status == 403

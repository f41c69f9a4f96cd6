"""Issue 20 in Chromium: an operator marks an input of a served model as an image on Try it,
with the preprocessing preset chosen in the same form, and a dropped photo then runs through
Triton; and the first-run tour: the empty Models page, then the demo's next steps.

The served model averages each colour channel of an 8x8 picture (``ReduceMean`` over height
and width), and its channel axis has no fixed size, so the hub cannot guess that it takes
photos: that is what the mark is for. A pure red photo, scaled to 0..1, must come back as
exactly (1, 0, 0).
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image
from playwright.sync_api import Page, expect

from tests.fixtures.browser import sign_in
from tests.fixtures.pipeline import create_model, upload, wait_for_job
from tests.fixtures.registry import served_model
from webapp.registry.catalogue import demo
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.models import Job

# Puts a PNG (base64) into a DataTransfer, as the browser builds one for a dropped file.
DROPPED_FILE = """(b64) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const transfer = new DataTransfer();
  transfer.items.add(new File([bytes], "red.png", { type: "image/png" }));
  return transfer;
}"""


def channel_means_onnx() -> bytes:
    """``means[n, c] = mean(pixels[n, c, :, :])`` for pixels of shape [batch, channels, 8, 8]."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["pixels"], ["means"], axes=[2, 3], keepdims=0)],
        "channel_means",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["batch", "channels", 8, 8])],
        [helper.make_tensor_value_info("means", TensorProto.FLOAT, ["batch", "channels"])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def red_png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (24, 16), (255, 0, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


def _sign_in(page: Page, base: str) -> None:
    sign_in(page, base)
    expect(page).to_have_url(f"{base}/models/")


@pytest.mark.integration
def test_an_input_marked_as_an_image_takes_a_dropped_photo(
    page: Page, live_server, celery_worker, triton, api, screenshot_dir: Path
) -> None:
    create_model(api, "channels")
    response = upload(api, "channels", channel_means_onnx())
    assert response.status_code == 201, response.content
    job = wait_for_job(response.json()["job"], celery_worker)
    assert job.state == Job.State.SUCCEEDED, job.error
    served = api("post", "/api/v1/models/channels/serve?wait=true", {"version": 1})
    assert served.status_code == 200, served.content

    base = live_server.url
    _sign_in(page, base)
    page.goto(f"{base}/models/channels/try/")
    section = page.locator('[data-input="pixels"]')
    # Nothing says this input takes photos yet: it starts as a tensor.
    expect(section).to_have_attribute("data-kind", "tensor")
    expect(section.locator("textarea[data-tensor]")).to_be_visible()

    section.get_by_text("Treat as an image").click()
    section.get_by_label("Pixels scaled to 0..1").check()
    expect(section.get_by_text("short side 256, centre 224 crop; mean 0, std 255")).to_be_visible()
    expect(section.locator("select[name=layout]")).to_have_value("NCHW")
    page.screenshot(path=str(screenshot_dir / "try-it-mark-image.png"), full_page=True)
    section.get_by_role("button", name="Treat pixels as an image").click()

    expect(page.locator(".flash")).to_contain_text("pixels now takes a photo")
    expect(section).to_have_attribute("data-kind", "image")
    expect(section.locator("[data-preset-name]")).to_have_text("Pixels scaled to 0..1")
    expect(section.get_by_text("marked as an image by an operator")).to_be_visible()

    transfer = page.evaluate_handle(DROPPED_FILE, base64.b64encode(red_png()).decode("ascii"))
    section.locator("[data-drop]").dispatch_event("drop", {"dataTransfer": transfer})
    output = page.locator('[data-output="means"]')
    expect(output.locator("pre.values")).to_have_text("1, 0, 0", timeout=30_000)
    expect(output.locator(".tag").last).to_have_text("[1, 3]")
    expect(section.locator("[data-chosen]")).to_have_text("red.png")
    page.screenshot(path=str(screenshot_dir / "try-it-marked-image-result.png"), full_page=True)

    # And back: the same input takes a tensor again.
    section.get_by_role("button", name="Treat as a tensor instead").click()
    expect(page.locator(".flash")).to_contain_text("pixels now takes a tensor")
    expect(section).to_have_attribute("data-kind", "tensor")
    expect(section.locator("textarea[data-tensor]")).to_be_visible()
    assert Model.objects.get(name="channels").try_settings["image_inputs"] == []


def test_the_first_run_tour(page: Page, live_server, operator, screenshot_dir: Path) -> None:
    base = live_server.url
    _sign_in(page, base)
    empty = page.locator("article.empty")
    expect(empty.get_by_role("heading", name="No models yet")).to_be_visible()
    expect(empty.locator("ol > li")).to_have_count(3)
    expect(empty.locator("ol > li").nth(1)).to_contain_text("Compile and verify")
    expect(empty.get_by_role("button", name="Add the demo model")).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "models-empty.png"), full_page=True)

    # The demo as it is once its first version serves (adding it for real compiles a CNN,
    # which tests/browser/test_try_it_journey.py does).
    served_model(
        demo.NAME,
        operator,
        {
            "inputs": [{"name": "input", "dtype": "TYPE_FP32", "dims": [1, 3, 224, 224]}],
            "outputs": [{"name": "logits", "dtype": "TYPE_FP32", "dims": [1, 1000]}],
        },
        verification=None,
        description=demo.DESCRIPTION,
    )
    page.goto(f"{base}/models/{demo.NAME}/")
    card = page.locator("[data-next-steps]")
    expect(card).to_contain_text("Next steps with the demo")
    expect(card.get_by_role("link")).to_have_text(["Try it", "Performance", "Metrics"])
    page.screenshot(path=str(screenshot_dir / "demo-next-steps.png"), full_page=True)
    card.get_by_role("link", name="Try it").click()
    expect(page).to_have_url(f"{base}/models/{demo.NAME}/try/")
    expect(page.locator('[data-input="input"]')).to_have_attribute("data-kind", "image")

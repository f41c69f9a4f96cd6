"""Labels in one click, in Chromium: a classifier with 1000 outputs and Ultralytics-style names
in its ONNX metadata is uploaded, validated, compiled and served for real; its Try it tab
offers ImageNet-1k and the file's names, and after each click a run shows that class name
first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from playwright.sync_api import Page, expect

from tests.fixtures.pipeline import create_model, upload, wait_for_job
from tests.fixtures.users import PASSWORD

pytestmark = pytest.mark.integration

# With an input of zeros the logits are the bias, whose highest value is class 1: "goldfish" in
# ImageNet-1k, "dog" in the names the file carries.
TOP = 1
FILE_NAMES = {0: "cat", 1: "dog", 2: "bird"}


def classifier_1000() -> bytes:
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((8, 1000)).astype(np.float32) * 0.01
    bias = rng.standard_normal(1000).astype(np.float32)
    bias[TOP] = 10.0
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["xw"]),
            helper.make_node("Add", ["xw", "B"], ["logits"]),
        ],
        "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1000])],
        initializer=[numpy_helper.from_array(weight, "W"), numpy_helper.from_array(bias, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    # As Ultralytics writes it: str() of a dict, beside other notes.
    helper.set_model_props(model, {"stride": "32", "task": "classify", "names": str(FILE_NAMES)})
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def test_imagenet_and_the_files_names_in_one_click_each(
    page: Page,
    live_server,
    celery_worker,
    triton,
    api,
    tmp_path: Path,
    screenshot_dir: Path,
) -> None:
    create_model(api, "classifier")
    sent = upload(api, "classifier", classifier_1000())
    assert sent.status_code == 201, sent.content
    assert wait_for_job(sent.json()["job"], celery_worker).state == "succeeded"
    served = api("post", "/api/v1/models/classifier/serve?wait=true", {"version": 1})
    assert served.status_code == 200, served.content

    base = live_server.url
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill("otto")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto(f"{base}/models/classifier/try/")

    # No labels yet and two sets offered: the section is open, the offers in sight.
    section = page.locator("#try-labels")
    expect(section).to_have_attribute("open", "")
    expect(section.locator("summary")).to_have_text("Labels: none")
    imagenet = section.get_by_role("button", name="Use ImageNet-1k labels (1000 classes)")
    from_file = section.get_by_role(
        "button", name="Use the labels in the model file (key names, 3 classes)"
    )
    expect(imagenet).to_be_visible()
    expect(from_file).to_be_visible()
    section.screenshot(path=str(screenshot_dir / "labels-offers.png"))

    # Before: indexes only.
    page.get_by_role("button", name="Run", exact=True).click()
    first = page.locator("[data-topk] li").first
    expect(first).to_contain_text(f"class {TOP}", timeout=30_000)

    imagenet.click()
    expect(section.locator("summary")).to_have_text("Labels: 1000 class names")
    expect(section.get_by_role("status")).to_contain_text("1000 class names saved")
    expect(section.get_by_text("in use")).to_be_visible()
    section.screenshot(path=str(screenshot_dir / "labels-imagenet-in-use.png"))
    page.get_by_role("button", name="Run", exact=True).click()
    expect(first).to_contain_text("goldfish", timeout=30_000)

    section.get_by_role(
        "button", name="Replace the labels with those in the model file (key names, 3 classes)"
    ).click()
    expect(section.locator("summary")).to_have_text("Labels: 3 class names")
    page.get_by_role("button", name="Run", exact=True).click()
    expect(first).to_contain_text("dog", timeout=30_000)
    page.screenshot(path=str(screenshot_dir / "labels-try-it.png"), full_page=True)

    # A file still works, and the section then shows its count and offers ImageNet again.
    names = tmp_path / "labels.txt"
    names.write_text("zero\nuno\n", encoding="utf-8")
    section.locator("[data-labels-file]").set_input_files(str(names))
    expect(section.locator("summary")).to_have_text("Labels: 2 class names")
    expect(section.locator("[data-labels-status]")).to_have_text(
        "2 labels saved; the next run shows them."
    )
    expect(
        section.get_by_role("button", name="Replace the labels with ImageNet-1k")
    ).to_be_visible()
    page.get_by_role("button", name="Run", exact=True).click()
    expect(first).to_contain_text("uno", timeout=30_000)

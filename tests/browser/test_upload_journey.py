"""The heart of the product in a real browser: drop a real ImageNet model, watch the upload's
progress, follow the compile job live, read the verification report and the config preview.

Real parts: Chromium, the Django app, a Celery worker process, Redis, onnxruntime, and the
EfficientNet-Lite0 model shipped in demo/ (demo/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.users import PASSWORD, make_user
from webapp.registry.catalogue.models import Model

pytestmark = pytest.mark.integration
DEMO_MODEL = Path(__file__).resolve().parents[2] / "demo" / "efficientnet-lite0" / "model.onnx"


def sign_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{base}/models/")


def test_a_real_model_uploads_compiles_verifies_and_is_packaged(
    page: Page, live_server, celery_worker, settings, screenshot_dir: Path
) -> None:
    if not DEMO_MODEL.exists():
        pytest.fail(f"the demo model is missing: {DEMO_MODEL}")
    settings.UPLOAD_CHUNK_BYTES = 4 << 20  # several chunks, so progress moves in steps
    operator = make_user("otto", "operator")
    Model.objects.create(name="efficientnet-lite0", target="onnxruntime", created_by=operator)
    sign_in(page, live_server.url, "otto")
    page.goto(f"{live_server.url}/models/efficientnet-lite0/")

    page.locator("#upload-form input[type=file]").set_input_files(str(DEMO_MODEL))
    expect(page.locator("[data-chosen]")).to_contain_text("model.onnx")
    # Every text the progress line shows is recorded in sessionStorage (it survives the hand-over
    # to the job page): on a fast machine the whole upload can finish between two polls.
    page.evaluate(
        """() => {
          const line = document.querySelector("[data-stats]");
          new MutationObserver(() => {
            const seen = JSON.parse(sessionStorage.getItem("upload-stats") || "[]");
            seen.push(line.textContent);
            sessionStorage.setItem("upload-stats", JSON.stringify(seen));
          }).observe(line, {childList: true, characterData: true, subtree: true});
        }"""
    )
    page.get_by_role("button", name="Upload and compile").click()
    # The progress line may come and go between two polls (the record above keeps what it
    # said). No picture of it: a full-page screenshot while the page streams the file can take
    # longer than the upload itself on a loaded machine, and timed out in CI.

    # The form hands over to the job page, which follows the worker live.
    page.wait_for_url("**/jobs/**", timeout=60_000)
    seen = page.evaluate("() => JSON.parse(sessionStorage.getItem('upload-stats') || '[]')")
    assert any(" MB of " in text for text in seen), seen  # bytes sent of the total, per chunk
    status = page.locator("#job-status")
    expect(status.get_by_text("SUCCEEDED")).to_be_visible(timeout=180_000)
    expect(status).to_contain_text("Packaged as efficientnet-lite0/1/model.onnx")
    expect(status.get_by_text("PASSED").first).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "compile-job.png"), full_page=True)

    page.get_by_role("button", name="Open version 1").click()
    expect(page.locator("pre.config")).to_contain_text('name: "efficientnet-lite0"')
    expect(page.locator("pre.config")).to_contain_text('backend: "onnxruntime"')
    expect(page.get_by_text("logits").first).to_be_visible()
    page.screenshot(path=str(screenshot_dir / "version.png"), full_page=True)


def test_a_non_model_file_is_refused_in_the_page(
    page: Page, live_server, transactional_db, settings, tmp_path: Path
) -> None:
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    operator = make_user("otto", "operator")
    Model.objects.create(name="m", target="onnxruntime", created_by=operator)
    sign_in(page, live_server.url, "otto")
    page.goto(f"{live_server.url}/models/m/")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a model")
    page.locator("#upload-form input[type=file]").set_input_files(str(notes))
    expect(page.locator("[data-error]")).to_contain_text("not an .onnx file")

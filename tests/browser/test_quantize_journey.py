"""Quantise to INT8 in Chromium: an operator opens the demo's version page, goes to "Quantise to
INT8", sees how many captured requests fit, starts it, follows the job, and reads the INT8
version beside the FP32 one (agreement, size, and both versions' sweeps level by level). A
calibration file that does not fit is refused on the page, after its chunked upload.

Budget (docs/testing.md, suite ``quantise``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from playwright.sync_api import Page, expect

from tests.fixtures.browser import sign_in
from tests.fixtures.demo import augmented_crops
from tests.fixtures.pipeline import wait_for_job
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.quantise

NAME = "efficientnet-lite0"


def _sweep(api, worker) -> None:  # type: ignore[no-untyped-def]
    from webapp.registry.jobs.models import Job

    run = api("post", f"/api/v1/models/{NAME}/sweeps", {"max_concurrency": 2, "step_seconds": 1})
    assert run.status_code == 202, run.json()
    assert wait_for_job(run.json()["job"], worker, timeout=120).state == Job.State.SUCCEEDED


def test_an_operator_quantises_from_captures_and_compares_the_pair(
    page: Page, live_server, celery_worker, triton, api, screenshot_dir: Path, tmp_path: Path
) -> None:
    from webapp.registry.capture.recorder import RECORDER
    from webapp.registry.catalogue.models import Model, Version
    from webapp.registry.jobs.models import Job

    added = api("post", "/api/v1/demo", {})
    assert (
        wait_for_job(added.json()["job"], celery_worker, timeout=240).state == Job.State.SUCCEEDED
    )
    wait_until(lambda: Model.objects.get(name=NAME).serving_version == 1, 120, interval=0.3)
    assert api("put", f"/api/v1/models/{NAME}/capture", {"sample_rate": 100}).status_code == 200
    client = httpclient.InferenceServerClient(live_server.url.removeprefix("http://"))
    for x in augmented_crops(40, seed=11):
        given = httpclient.InferInput("input", list(x.shape), "FP32")
        given.set_data_from_numpy(x, binary_data=True)
        client.infer(NAME, [given], headers={"Authorization": f"Bearer {api.key}"})
    RECORDER.drain()
    _sweep(api, celery_worker)

    base = live_server.url
    sign_in(page, base)
    page.goto(f"{base}/models/{NAME}/versions/1/")
    page.get_by_role("button", name="Quantise to INT8").click()
    expect(page.locator("h1")).to_contain_text("Quantise v1 to INT8")
    form = page.locator("#upload-form")
    expect(form).to_contain_text("40 fit this version")
    expect(page.locator(".dropzone")).to_be_hidden()  # no file unless a file is the source

    # A file that does not fit goes up in chunks, then is refused with the reason.
    wrong = tmp_path / "wrong.npz"
    with wrong.open("wb") as fh:
        np.savez(fh, input=np.zeros((40, 3, 32, 32), np.float32))
    form.get_by_label("An .npz file of inputs").check()
    expect(page.locator(".dropzone")).to_be_visible()
    form.locator("input[type=file]").set_input_files(str(wrong))
    form.get_by_role("button", name="Quantise and check").click()
    expect(form.locator("[data-error]")).to_contain_text("do not fit input input", timeout=30_000)
    expect(form.locator(".upload-progress")).to_be_hidden()  # refused, not half-way
    page.screenshot(path=str(screenshot_dir / "quantize-refused-file.png"), full_page=True)

    form.get_by_label("Captured requests").check()
    page.screenshot(path=str(screenshot_dir / "quantize-page.png"), full_page=True)
    form.get_by_role("button", name="Quantise and check").click()
    page.wait_for_url("**/jobs/**")
    version = Version.objects.get(model__name=NAME, number=2)
    job = wait_for_job(str(version.jobs.get().uuid), celery_worker, timeout=300)
    assert job.state == Job.State.SUCCEEDED, job.error

    served = api("post", f"/api/v1/models/{NAME}/serve?wait=true", {"version": 2})
    assert served.status_code == 200, served.json()
    _sweep(api, celery_worker)
    page.goto(f"{base}/models/{NAME}/versions/2/")
    pair = page.locator("#int8-pair")
    expect(pair).to_contain_text("INT8 beside FP32 v1")
    expect(pair).to_contain_text("calibrated on 30 captures; checked on 10 others")
    expect(pair.locator("table.pair-agreement")).to_contain_text("PASS")
    expect(pair).to_contain_text("smaller")
    expect(pair.locator("table.pair-sweeps tbody tr")).to_have_count(2)  # concurrency 1 and 2
    pair.screenshot(path=str(screenshot_dir / "quantize-pair.png"))
    page.goto(f"{base}/models/{NAME}/versions/1/")
    expect(page.locator("main")).to_contain_text("Quantised to INT8 as v2")

"""Edit a served version's serving config in the browser: the diff follows the edits, saving
makes a revision that reuses the built model, and the revision is packaged and offered for
serving from its own page, which says which version it revises.

Real parts: Chromium, the Django app, a Celery worker process, Redis, onnxruntime and Triton."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.browser import serve_mlp, sign_in
from webapp.registry.catalogue.models import Version
from webapp.registry.jobs.models import Job

pytestmark = pytest.mark.integration


def test_a_config_revision_from_the_browser_is_packaged_and_served(
    page: Page, live_server, celery_worker, triton, api, screenshot_dir: Path
) -> None:
    serve_mlp(api, celery_worker)
    base = live_server.url
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, base)

    page.goto(f"{base}/models/mlp/versions/1/")
    page.get_by_role("button", name="Edit serving config").click()
    expect(page).to_have_url(f"{base}/models/mlp/versions/1/revise/")
    page.wait_for_load_state()  # htmx sets the live preview up once the page is parsed
    preview = page.locator("#revision-preview")
    expect(preview).to_contain_text("No change yet")
    instances = page.get_by_label("Instances")
    expect(instances).to_have_value("1")

    # Typing is enough: the preview follows (debounced) without a click.
    instances.fill("2")
    expect(preview.locator(".diff-add")).to_contain_text(["count: 2"])
    expect(preview.locator(".diff-del")).to_contain_text(["count: 1"])
    expect(preview).to_contain_text("Reuses the built model and its verification")
    page.get_by_label("Max queue delay (µs)").fill("500")
    expect(preview.locator(".diff-add")).to_contain_text(["max_queue_delay_microseconds: 500"])
    page.screenshot(path=str(screenshot_dir / "revise-form.png"), full_page=True)

    # A build option says it rebuilds; putting it back says "reuse" again.
    page.get_by_text("Options that rebuild the model").click()
    level = page.get_by_label("ONNX Runtime optimisation")
    level.select_option("extended")
    expect(preview).to_contain_text("Rebuilds: ort_optimization_level changes the built model")
    page.screenshot(path=str(screenshot_dir / "revise-rebuild.png"), full_page=True)
    level.select_option("basic")
    expect(preview).to_contain_text("Reuses the built model and its verification")
    assert Version.objects.filter(model__name="mlp").count() == 1  # previews write nothing

    # A value the model refuses shows in the preview, and a save with it comes back to the
    # form with the message beside the field and what was typed kept.
    preferred = page.get_by_label("Preferred batch sizes")
    preferred.fill("4,16")
    expect(preview).to_contain_text("each preferred size must be at most max_batch_size")
    page.get_by_role("button", name="Save as v2").click()
    field_error = page.locator("#revise-form small.error")
    expect(field_error).to_contain_text("each preferred size must be at most max_batch_size")
    page.screenshot(path=str(screenshot_dir / "revise-error.png"), full_page=True)
    expect(page.get_by_label("Instances")).to_have_value("2")
    assert Version.objects.filter(model__name="mlp").count() == 1
    page.get_by_label("Preferred batch sizes").fill("")
    expect(preview).to_contain_text("Reuses the built model and its verification")

    page.get_by_role("button", name="Save as v2").click()
    page.wait_for_url("**/jobs/**")
    expect(page.locator("#job-status").get_by_text("SUCCEEDED")).to_be_visible(timeout=90_000)
    job = Job.objects.get(version__model__name="mlp", version__number=2)
    assert [s["name"] for s in job.steps] == ["reuse", "package"]  # no compile, no verify
    assert job.params["changed"] == {"instance_count": [1, 2], "max_queue_delay_us": [100, 500]}

    page.goto(f"{base}/models/mlp/versions/2/")
    heading = page.get_by_role("heading", level=1)
    expect(heading).to_contain_text("Revision of v1")
    expect(heading.get_by_role("link", name="v1")).to_have_attribute(
        "href", "/models/mlp/versions/1/"
    )
    expect(page.locator("pre.config")).to_contain_text("count: 2")
    page.screenshot(path=str(screenshot_dir / "revise-version-page.png"), full_page=True)

    # The revision is offered for serving as usual, from its own page.
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Serve v2").click()
    page.wait_for_url("**/jobs/**")
    expect(page.locator("#job-status").get_by_text("SUCCEEDED")).to_be_visible(timeout=90_000)
    page.goto(f"{base}/models/mlp/")
    expect(page.get_by_role("heading", name="mlp")).to_contain_text("v2 READY")
    expect(page.locator("#version-rows")).to_contain_text("revision of v1")
    page.screenshot(path=str(screenshot_dir / "revise-model-page.png"), full_page=True)

    # Typed before htmx is ready (a slow connection): the preview still follows what was typed.
    def late_htmx(route) -> None:  # type: ignore[no-untyped-def]
        time.sleep(1.5)
        route.continue_()

    page.route("**/htmx-2.min.js", late_htmx)
    page.goto(f"{base}/models/mlp/versions/2/revise/", wait_until="commit")
    page.get_by_label("Instances").fill("3")
    expect(page.locator("#revision-preview .diff-add")).to_contain_text(["count: 3"])
    page.unroute("**/htmx-2.min.js")

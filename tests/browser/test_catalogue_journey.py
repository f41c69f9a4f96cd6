"""Keeping the catalogue tidy in a real browser: tag a model, filter the list by the tag,
retire a model through its confirmation, and find it again among the retired models.

Real parts: Chromium, the Django app, htmx, a Celery worker process and Redis. The retired
model is not served, so Triton has nothing to unload (tests/unit/test_catalogue.py says why).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.users import PASSWORD, make_user
from webapp.registry.catalogue.models import Model, ModelTag
from webapp.registry.jobs.models import Job

pytestmark = pytest.mark.integration
#: Where the screenshots for review go (the artifacts folder keeps a copy).
SHOTS = Path(os.environ.get("HUB_SCREENSHOTS", "/tmp"))


def _sign_in(page: Page, base: str) -> None:
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill("otto")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{base}/models/")


def _shot(page: Page, name: str, screenshot_dir: Path) -> None:
    for folder in (SHOTS, screenshot_dir):
        page.screenshot(path=str(folder / f"h6-{name}.png"), full_page=True)


def test_tag_filter_and_retire_a_model(
    page: Page, live_server, celery_worker, screenshot_dir: Path
) -> None:
    otto = make_user("otto", "operator")
    vera = make_user("vera", "operator")
    resnet = Model.objects.create(
        name="resnet50", created_by=otto, owner=otto, description="ImageNet classifier"
    )
    bert = Model.objects.create(
        name="bert-base", created_by=vera, owner=vera, serving_version=2,
        description="Sentence embeddings for search",
    )  # fmt: skip
    Model.objects.create(name="yolo-try3", created_by=otto, owner=otto, target="npu_ge",
                         description="An experiment nobody dares to remove")  # fmt: skip
    ModelTag.objects.create(model=resnet, label="team:vision")
    ModelTag.objects.create(model=bert, label="team:search")
    ModelTag.objects.create(model=bert, label="stage:prod")
    _sign_in(page, live_server.url)

    # Edit the tags from the model page.
    page.goto(f"{live_server.url}/models/resnet50/")
    page.get_by_role("button", name="Edit").click()
    page.get_by_label("Tags").fill("team:vision, stage:prod")
    page.get_by_role("button", name="Save").click()
    expect(page).to_have_url(f"{live_server.url}/models/resnet50/")
    expect(page.locator(".model-tags")).to_contain_text("stage:prod")

    # Filter the list by the tag (htmx swaps the rows in place and keeps the URL shareable).
    page.goto(f"{live_server.url}/models/")
    rows = page.locator("#model-rows")
    expect(rows).to_contain_text("yolo-try3")
    page.get_by_label("Tag").fill("stage:prod")
    expect(rows).not_to_contain_text("yolo-try3")
    expect(rows).to_contain_text("resnet50")
    expect(rows).to_contain_text("bert-base")
    page.get_by_label("Owner").select_option("otto")
    expect(rows).not_to_contain_text("bert-base")
    expect(page).to_have_url(re.compile(r"/models/\?.*tag=stage%3Aprod&owner=otto"))
    page.get_by_label("Owner").select_option("")
    expect(rows).to_contain_text("bert-base")
    _shot(page, "models-filtered", screenshot_dir)

    # A serving model's confirmation warns that clients will fail (not submitted here).
    page.goto(f"{live_server.url}/models/bert-base/retire/")
    expect(page.get_by_role("alert")).to_contain_text("every client request")
    _shot(page, "retire-serving", screenshot_dir)

    # Retire the experiment through its confirmation.
    page.goto(f"{live_server.url}/models/yolo-try3/")
    page.get_by_role("button", name="Retire…").click()
    expect(page.locator("h1")).to_have_text("Retire yolo-try3?")
    expect(page.locator(".retire-effects")).to_contain_text("remove its directory")
    page.get_by_label("Why (kept in the history)").fill("superseded by resnet50")
    _shot(page, "retire-confirm", screenshot_dir)
    page.get_by_role("button", name="Retire yolo-try3").click()
    page.wait_for_url("**/jobs/**")
    expect(page.locator("#job-status").get_by_text("SUCCEEDED")).to_be_visible(timeout=60_000)
    assert Job.objects.get(kind=Job.Kind.RETIRE).state == Job.State.SUCCEEDED

    # Gone from the list; there among the retired models, with its history.
    page.goto(f"{live_server.url}/models/")
    expect(rows).not_to_contain_text("yolo-try3")
    page.get_by_label("Retired").check()
    expect(rows).to_contain_text("yolo-try3")
    _shot(page, "models-retired", screenshot_dir)
    rows.get_by_role("link", name="yolo-try3").click()
    expect(page.locator(".note")).to_contain_text("Retired on")
    expect(page.locator(".note")).to_contain_text("by otto")
    expect(page.locator("table.events")).to_contain_text("superseded by resnet50")
    _shot(page, "retired-page", screenshot_dir)

"""Stored XSS through tensor names (security finding 1): names an uploader chooses are data.

An operator uploads a model whose input and output names carry quotes, ``<script>``,
``onfocus=`` and ``javascript:``; an admin then walks the version page, Try it (run, compare,
a saved example, the snippets), Metrics and Performance. Every attempt sets ``window.__pwned``
if it runs; it must stay unset, the browser must report no Content-Security-Policy violation
(a violation would mean data became markup and only the policy stopped it), and the names must
be shown literally.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.pipeline import create_model, upload, wait_for_job
from tests.fixtures.triton import mlp_onnx_bytes
from tests.fixtures.users import PASSWORD
from webapp.registry.jobs.models import Job

pytestmark = pytest.mark.integration

INPUT = (
    "x\" autofocus onfocus=\"window.__pwned='input attribute'\" data-x='"
    "<script>window.__pwned='input script'</script>javascript:window.__pwned='input url'"
)
OUTPUT = (
    'y" tabindex="0" autofocus onfocus="window.__pwned=\'output attribute\'" '
    "<img src=x onerror=\"window.__pwned='output img'\">"
)
EXAMPLE = '<img src=x onerror="window.__pwned=\'example\'"> it\'s "mine"'

WATCH = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__violations.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + e.sample);
});
"""


def _sign_in(page: Page, base: str) -> None:
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base}/models/")


def _nothing_ran(page: Page, where: str) -> None:
    assert page.evaluate("window.__pwned") is None, f"a script ran on {where}"
    assert page.evaluate("window.__violations") == [], f"data became markup on {where}"


def test_tensor_names_that_look_like_markup_stay_text_everywhere(
    page: Page,
    live_server,
    celery_worker,
    triton,
    api,
    admin_user,
    screenshot_dir: Path,
) -> None:
    create_model(api, "hostile")
    for seed in (1, 2):
        response = upload(
            api, "hostile", mlp_onnx_bytes(seed=seed, input_name=INPUT, output_name=OUTPUT)
        )
        assert response.status_code == 201, response.content
        job = wait_for_job(response.json()["job"], celery_worker)
        assert job.state == Job.State.SUCCEEDED, job.error
    served = api("post", "/api/v1/models/hostile/serve?wait=true", {"version": 1})
    assert served.status_code == 200, served.content

    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.add_init_script(WATCH)
    base = live_server.url
    _sign_in(page, base)

    page.goto(f"{base}/models/hostile/versions/1/")
    expect(page.locator("code", has_text=INPUT).first).to_be_visible()
    expect(page.locator("code", has_text=OUTPUT).first).to_be_visible()
    _nothing_ran(page, "the version page")

    page.goto(f"{base}/models/hostile/try/")
    section = page.locator("section.try-input").first
    assert section.get_attribute("data-input") == INPUT
    section.get_by_role("button", name="Random").click()
    page.get_by_role("button", name="Run").click()
    output = page.locator("[data-output]").first
    expect(output).to_be_visible(timeout=30_000)
    assert output.get_attribute("data-output") == OUTPUT
    expect(output.locator("code")).to_have_text(OUTPUT)
    expect(page.locator("[data-snippet=python]")).to_contain_text("tritonclient")
    _nothing_ran(page, "Try it after a run")

    page.get_by_text("Saved examples").click()
    page.locator("[data-example-name]").fill(EXAMPLE)
    page.get_by_role("button", name="Save current input").click()
    saved = page.locator("[data-examples] li").first
    expect(saved).to_contain_text(EXAMPLE)
    saved.get_by_role("button", name="Run").click()
    expect(page.locator("[data-output] code").first).to_have_text(OUTPUT, timeout=30_000)
    _nothing_ran(page, "Try it after rerunning a saved example")

    page.reload()  # the saved example, rendered by the server this time
    expect(page.locator("[data-examples] li").first).to_contain_text(EXAMPLE)
    page.locator("input[name=compare]").check()
    page.get_by_role("button", name="Run").click()
    load = page.get_by_role("button", name="Load v2 beside v1")
    expect(load).to_be_visible(timeout=30_000)
    load.click()
    expect(page.locator(".compare-grid [data-output]")).to_have_count(2, timeout=60_000)
    for code in page.locator(".compare-grid [data-output] code").all():
        expect(code).to_have_text(OUTPUT)
    page.screenshot(path=str(screenshot_dir / "hostile-names-try.png"), full_page=True)
    _nothing_ran(page, "Try it comparing two versions")

    for tab in ("metrics", "perf", ""):
        page.goto(f"{base}/models/hostile/{tab}")
        page.wait_for_load_state("networkidle")
        _nothing_ran(page, f"the model's {tab or 'overview'} tab")
    assert dialogs == []

"""The main journey in Simplified Chinese, as a browser set to Chinese sees it.

Chromium asks for ``zh-CN`` (what a Chinese system sends); Django's fallback gives zh-Hans. The
journey: sign in, add the demo model with one click and follow its job, drop a photo on Try it,
switch a model to another version, then Metrics, Diagnostics, Nodes, tokens, a version and its
config editor, the model forms, Jobs, the audit trail and Adopt. On each page:
``<html lang="zh-hans">``, Chinese text, and no English left outside what stays English on
purpose: code, names people chose (models, tensors, users), data such as ImageNet's class names,
and the terms the glossary keeps in English (docs/glossary.md). Screenshots go to
test-artifacts/zh-hans-*.png to be looked at.

Heavy (marker ``language``): it compiles the real demo model, so CI runs it once.
"""

from __future__ import annotations

import gettext
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.pipeline import add_version, create_model, mlp_traffic
from tests.fixtures.users import PASSWORD
from webapp.registry.jobs.models import Job

pytestmark = [pytest.mark.integration, pytest.mark.language]

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "locale/zh_Hans/LC_MESSAGES/django.mo"
PHOTO = ROOT / "demo/images/coffee.png"
DEMO = "efficientnet-lite0"

#: Words that stay English in the Chinese pages, each for a reason: product and format names
#: and units as the glossary keeps them, and names this journey's data brings (the user otto,
#: the models and their tensors). Compared case-insensitively, word by word.
KEPT_ENGLISH = {
    # The glossary's terms kept in English (docs/glossary.md).
    "triton", "onnx", "onnxruntime", "atc", "cann", "api", "npu", "npus", "hbm", "om", "aipp",
    "pyacl", "acl", "ge", "runtime", "npu-smi", "json", "grpc", "http", "prometheus", "fp16",
    "fp32", "int8", "cpu", "gpu", "soc", "ascend", "imagenet", "url", "id", "sha-256",
    "tritonclient", "docker", "redis", "celery", "django", "python", "curl", "utc",
    "nvidia", "efficientnet-lite0", "efficientnet-lite", "efficientnet", "lite0", "apache-2.0",
    "huawei", "openid", "connect", "ldap", "qdq", "amct", "msmodelslim", "vnni", "avx-512",
    "avx-vnni", "npz",
    # Units and statistics as engineers write them in either language.
    "ms", "s", "kb", "mb", "gb", "kib", "mib", "gib", "req", "p50", "p90", "p95", "p99",
    "qps", "nchw", "nhwc", "rgb", "bgr", "png", "jpeg", "tar", "min", "max",
    # Names of processes, keys and terms that read the same in Chinese engineering text:
    # the stack's processes (make run, compose), Triton's model states, keyboard keys,
    # the classifier's top-k and softmax.
    "web", "worker", "beat", "loading", "atol", "rtol", "zip", "ctrl", "enter", "top-1",
    "top-k", "top-5", "softmax", "h", "d",
    # The quantiser's own choices, shown as ONNX Runtime names them (a select's options).
    "minmax", "percentile", "entropy", "uint8",
    # Pico CSS styles `nav[aria-label=breadcrumb]`: the label is a hook, kept as Pico names it.
    "breadcrumb",
    # ONNX's and Triton's own words (opset, IR version, config.pbtxt's dims), an HTTP header,
    # and the device files' family name (/dev/davinci0, davinci1, ...: davinciN).
    "opset", "ir", "dims", "x-content-sha256", "davincin",
    # This journey's names: the user, models, tensors and their dimensions, the host, the
    # example tag of the filter's placeholder.
    "otto", "mlp", "input", "logits", "batch", "x", "y", "local", "vm", "float32", "team",
    "vision", "hub", "model",
    # Example values the forms' placeholders show (a token, a model, tags).
    "ci-pipeline", "resnet50-int8", "prod", "stage",
}  # fmt: skip

#: Data shown as it is, not UI text: code, terms marked translate="no", the classes a model
#: answers with (ImageNet's English names), the language switcher (names each language in its
#: own tongue), and the charts' raw numbers.
SKIPPED = "code, pre, kbd, samp, script, style, [translate=no], [data-topk], .language-switch"

VISIBLE_TEXT = """(skipped) => {
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const parent = node.parentElement;
    if (!parent || parent.closest(skipped)) continue;
    if (!parent.checkVisibility || !parent.checkVisibility()) continue;
    out.push(node.textContent);
  }
  for (const el of document.querySelectorAll("[title], [placeholder], [aria-label]")) {
    if (el.closest(skipped)) continue;
    for (const name of ["title", "placeholder", "aria-label"]) {
      const value = el.getAttribute(name);
      if (value) out.push(value);
    }
  }
  return out.join("\\n");
}"""

#: Versions, digests, numbers with units or exponents, and file names: data, not UI text.
DATA_WORD = re.compile(r"v\d+|[a-f0-9]{7,}|\d+\w*|e-\d+|[\w-]+\.(png|jpe?g|pbtxt|onnx|om)")
WORD = re.compile(r"/?[A-Za-z][A-Za-z0-9_.'\u2019/-]*[A-Za-z0-9]|[A-Za-z]")


@pytest.fixture
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_context_args, "locale": "zh-CN"}


def chinese() -> gettext.GNUTranslations:
    with CATALOGUE.open("rb") as mo:
        return gettext.GNUTranslations(mo)


def english_left(text: str, names: set[str]) -> list[str]:
    """The English words of ``text`` that are neither kept on purpose nor names of the data."""
    kept = KEPT_ENGLISH | {n.lower() for n in names}
    left = []
    for word in WORD.findall(text):
        bare = word.strip(".'\u2019/-").lower()
        if bare in kept or DATA_WORD.fullmatch(bare):
            continue
        if "_" in bare or "/" in word:
            continue  # an identifier or a path: a setting, a check's id, a tensor, a file
        if all(part in kept or part.isdigit() for part in re.split(r"[/_.-]", bare) if part):
            continue
        left.append(word)
    return left


def check_page(
    page: Page, name: str, screenshot_dir: Path, names: set[str], problems: list[str]
) -> None:
    """Look at one page; what is wrong goes to ``problems`` (the test reports every page's)."""
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    page.wait_for_load_state("networkidle")
    text = page.evaluate(VISIBLE_TEXT, SKIPPED)
    page.screenshot(path=str(screenshot_dir / f"zh-hans-{name}.png"), full_page=True)
    if not re.search(r"[\u4e00-\u9fff]", text):
        problems.append(f"{name}: no Chinese at all")
    left = english_left(text, names)
    if left:
        problems.append(f"{name} shows English: {sorted(set(left))}")


def test_the_main_journey_speaks_chinese(
    page: Page, live_server, celery_worker, triton, api, screenshot_dir: Path
) -> None:
    zh = chinese().gettext
    base = live_server.url
    names = {"mlp", DEMO, "otto"}
    problems: list[str] = []

    # Sign in: the page is Chinese before anyone says so.
    page.goto(f"{base}/login/")
    check_page(page, "sign-in", screenshot_dir, names, problems)
    page.locator("input[name=username]").fill("otto")
    page.locator("input[name=password]").fill(PASSWORD)
    page.get_by_role("button", name=zh("Sign in")).click()
    expect(page).to_have_url(re.compile(r"/models/"))
    check_page(page, "models-empty", screenshot_dir, names, problems)

    # Add the demo with one click and follow its job in Chinese.
    page.locator("[data-add-demo]").first.click()
    page.wait_for_url("**/jobs/**")
    expect(page.locator("#job-status li.step-done")).to_have_count(4, timeout=180_000)
    check_page(page, "job", screenshot_dir, names, problems)

    # Try it: the photo is classified; the labels are ImageNet's English names (data).
    page.goto(f"{base}/models/{DEMO}/try/")
    photo = page.locator("[data-image-file]")
    expect(photo).to_be_attached(timeout=90_000)
    photo.set_input_files(str(PHOTO))
    expect(page.locator("[data-topk] li").first).to_contain_text("espresso", timeout=30_000)
    check_page(page, "try", screenshot_dir, names, problems)

    # Switch: mlp serves v1, then the operator switches it to v2 on the model page.
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    add_version(api, celery_worker, 2)
    served = api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1})
    assert served.status_code == 200, served.content
    with mlp_traffic(triton.urls["http"], threads=1) as traffic:
        page.goto(f"{base}/models/mlp/")
        page.once("dialog", lambda dialog: dialog.accept())
        row = page.locator("#version-rows tr", has_text="v2")
        row.get_by_role("button", name=zh("Serve")).click()
        page.wait_for_url("**/jobs/**")
        expect(page.locator("#job-status li.step-done").first).to_be_visible(timeout=90_000)
        job = Job.objects.filter(model__name="mlp", kind=Job.Kind.SERVE).latest("created")
        for _ in range(300):
            job.refresh_from_db()
            if job.is_finished:
                break
            page.wait_for_timeout(300)
        assert job.state == Job.State.SUCCEEDED, job.error
    assert traffic.failures() == []
    page.goto(f"{base}/models/mlp/")
    check_page(page, "model", screenshot_dir, names, problems)
    events = page.locator("table.events")
    expect(events).to_contain_text("otto")
    expect(events).not_to_contain_text("switched mlp")

    for name, path in {
        "metrics": f"/models/{DEMO}/metrics/",
        "perf": f"/models/{DEMO}/perf/",
        "diagnostics": "/diagnostics/",
        "nodes": "/nodes/",
        "tokens": "/account/tokens/",
        "models": "/models/",
        "version": "/models/mlp/versions/2/",
        "revise": "/models/mlp/versions/2/revise/",
        "quantise": "/models/mlp/versions/2/quantize/",
        "model-new": "/models/new/",
        "model-edit": "/models/mlp/edit/",
        "jobs": "/jobs/",
        "audit": "/audit/",
        "adopt": "/server/adopt/",
    }.items():
        page.goto(f"{base}{path}")
        check_page(page, name, screenshot_dir, names, problems)
    assert not problems, "\n".join(problems)

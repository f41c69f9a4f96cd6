"""The main pages in Simplified Chinese, as a browser set to Chinese sees them.

Chromium asks for ``zh-CN`` (what a Chinese system sends); Django's fallback gives zh-Hans. On
each page: the page says it is Chinese, the header is translated, and no text of our templates
that has a translation shows in English (every translated msgid of two words or more is looked
for in the page's visible text). Text that comes from Python (form labels, job steps, findings)
is not yet translated and is not checked here (docs/i18n.md says what is left). Screenshots go
to test-artifacts/ to be looked at.
"""

from __future__ import annotations

import gettext
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.browser import serve_mlp
from tests.fixtures.users import PASSWORD

pytestmark = pytest.mark.integration

CATALOGUE = Path(__file__).resolve().parents[2] / "locale/zh_Hans/LC_MESSAGES/django.mo"
PAGES = {
    "models": "/models/",
    "model": "/models/mlp/",
    "try": "/models/mlp/try/",
    "perf": "/models/mlp/perf/",
    "metrics": "/models/mlp/metrics/",
    "nodes": "/nodes/",
    "diagnostics": "/diagnostics/",
    "tokens": "/account/tokens/",
}


@pytest.fixture
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_context_args, "locale": "zh-CN"}


def translated_english() -> list[str]:
    """English sentences of our templates that have a Chinese translation."""
    with CATALOGUE.open("rb") as mo:
        catalog: dict[Any, str] = gettext.GNUTranslations(mo)._catalog  # type: ignore[attr-defined]
    sentences = []
    for msgid, msgstr in catalog.items():
        english = msgid[0] if isinstance(msgid, tuple) else msgid
        if not english or not msgstr or "%" in english or "<" in english:
            continue  # the header, placeholders and markup render differently
        if len(english.split()) >= 2 and english != msgstr:
            sentences.append(english)
    return sentences


def test_the_main_pages_speak_chinese(
    page: Page, live_server, celery_worker, triton, api, screenshot_dir: Path
) -> None:
    serve_mlp(api, celery_worker)
    base = live_server.url
    page.goto(f"{base}/login/")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    page.locator("input[name=username]").fill("otto")
    page.locator("input[name=password]").fill(PASSWORD)
    page.locator("input[name=password]").press("Enter")
    expect(page).to_have_url(re.compile(r"/models/"))

    english = translated_english()
    assert len(english) > 300, "the catalogue lost its translations"
    for name, path in PAGES.items():
        page.goto(f"{base}{path}")
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
        page.wait_for_load_state("networkidle")
        text = " ".join(page.locator("body").inner_text().split())
        assert re.search(r"[\u4e00-\u9fff]", text), f"{name}: no Chinese at all"
        left = [sentence for sentence in english if sentence in text]
        assert not left, f"{name} shows template text in English: {left[:10]}"
        page.screenshot(path=str(screenshot_dir / f"zh-hans-{name}.png"), full_page=True)

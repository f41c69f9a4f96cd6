"""No markup from strings of data, no inline code: the page layer's rules, checked on the tree.

Together with the Content-Security-Policy header these make an injected name or label inert:
the scripts never build HTML from strings, and the browser would not run inline code anyway.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from webapp.csp import POLICY

ROOT = Path(__file__).resolve().parents[2]
OUR_SCRIPTS = sorted((ROOT / "static" / "hub").glob("*.js"))
TEMPLATES = sorted((ROOT / "templates").rglob("*.html"))

MARKUP_SINKS = re.compile(r"\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write")
INLINE_HANDLER = re.compile(r"\son[a-z]+\s*=", re.IGNORECASE)
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.IGNORECASE)


@pytest.mark.parametrize("script", OUR_SCRIPTS, ids=lambda p: p.name)
def test_our_scripts_never_turn_strings_into_markup(script: Path) -> None:
    found = MARKUP_SINKS.findall(script.read_text())
    assert not found, f"{script.name} builds markup from a string"


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: str(p.relative_to(ROOT)))
def test_templates_hold_no_inline_code_or_style(template: Path) -> None:
    text = template.read_text()
    assert not INLINE_HANDLER.findall(text), "an inline event handler"
    assert not INLINE_SCRIPT.findall(text), "an inline <script>"
    assert "style=" not in text and "<style" not in text, "an inline style"


def test_every_page_carries_the_policy(operator_client: Client) -> None:
    response = operator_client.get("/models/")
    assert response.status_code == 200
    policy = response.headers["Content-Security-Policy"]
    assert policy == POLICY
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy
    assert "style-src 'self'" in policy and "'unsafe-eval'" not in policy


def test_even_the_sign_in_page_and_errors_carry_it(client: Client) -> None:
    assert "script-src 'self'" in client.get("/login/").headers["Content-Security-Policy"]
    assert "Content-Security-Policy" in client.get("/no-such-page/").headers

"""The whole embedded stack as `make run` starts it, seen from Chromium: a state pushed by the
Celery beat/worker travels through Redis and the web server's websocket to the open page.

The stack runs as a second one beside another would (every HUB_* port and HUB_VAR_DIR its own,
HUB_ADMIN_PASSWORD set) with the sign-in settings too: OpenID Connect and LDAP against real
providers, local sign-in for admins only. All of them hold together."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import Page

from model_store import spawn
from tests.fixtures.ldap_directory import GROUPS, Directory
from tests.fixtures.sso import Provider
from tests.fixtures.stack import ROOT, fresh_machine_env, wait_for_line
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def stack(tmp_path: Path, oidc_provider: Provider, ldap_directory: Directory):
    env = fresh_machine_env(tmp_path / "var")
    # A generous bound: this test shares two cores with the whole parallel suite.
    directory = ldap_directory.settings(LDAP_TIMEOUT_SECONDS=15)
    env |= {name: str(value) for name, value in directory.items()}
    env |= {
        "OIDC_ISSUER": oidc_provider.issuer,
        "OIDC_CLIENT_ID": "triton-hub",
        "OIDC_CLIENT_SECRET": "hub-secret",
        "OIDC_PROVIDER_NAME": "Example ID",
        "SSO_ROLE_MAP": f"ml-ops=operator;cn=ml-admins,{GROUPS}=admin",
        "LOCAL_SIGN_IN": "admins",
    }
    log = tmp_path / "stack.log"
    with log.open("wb") as out:
        proc = spawn.start(
            [sys.executable, "-m", "webapp.stack"], cwd=ROOT, env=env, stdout=out,
            stderr=subprocess.STDOUT, new_session=True,
        )  # fmt: skip
    try:
        wait_for_line(log, "Triton Model Hub is ready", proc, timeout=240)
        yield f"http://127.0.0.1:{env['HUB_PORT']}", env["HUB_ADMIN_PASSWORD"], log
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(90)


def test_server_state_is_pushed_live_over_the_websocket(
    page: Page, stack, oidc_provider: Provider
) -> None:
    base, password, log = stack
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill("admin")
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_url(f"{base}/models/")
    page.goto(f"{base}/server/")
    page.evaluate(
        "window.__pushed = [];"
        "document.body.addEventListener('live:server', e => window.__pushed.push(e.detail))"
    )
    # Beat pushes Triton's state every SERVER_STATE_PUSH_SECONDS (5 s by default).
    # Polled from here: wait_for_function evaluates a string in the page, which the
    # Content-Security-Policy (no 'unsafe-eval') forbids.
    wait_until(
        lambda: page.evaluate("window.__pushed.length"), 30, interval=0.1,
        message="no server state was pushed",
    )  # fmt: skip
    assert page.evaluate("window.__pushed[0]") == {"live": True, "ready": True}

    # The same stack signs people in through LDAP and through the OpenID Connect provider.
    # Away from the server page first: its next live refresh, sent without cookies, would be
    # sent to the sign-in page and could set a CSRF cookie other than the form's.
    page.goto("about:blank")
    page.context.clear_cookies()
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill("ana")
    page.get_by_label("Password").fill("ana-pass-1")
    page.get_by_role("button", name="Sign in", exact=True).click()
    _landed(page, f"{base}/models/", log)
    assert page.evaluate("fetch('/api/v1/me').then(r => r.json())") == {
        "username": "ana", "role": "admin", "source": "ldap",
    }  # fmt: skip
    page.context.clear_cookies()
    oidc_provider.person("bo-sub", preferred_username="bo", groups=["ml-ops"])
    page.goto(f"{base}/login/")
    page.get_by_role("button", name="Sign in with Example ID").click()
    page.get_by_placeholder("sub").fill("bo-sub")
    page.get_by_role("button", name="Authorize").click()
    _landed(page, f"{base}/models/", log)
    assert page.evaluate("fetch('/api/v1/me').then(r => r.json())") == {
        "username": "bo", "role": "operator", "source": "oidc",
    }  # fmt: skip


def _landed(page: Page, url: str, log: Path) -> None:
    """On ``url``; else fail with the page's words and the end of the stack's log."""
    try:
        page.wait_for_url(url, timeout=30_000)
    except Exception:
        text = page.locator("main").inner_text() if page.locator("main").count() else ""
        tail = log.read_text(errors="replace")[-4000:]
        pytest.fail(f"not at {url} but {page.url}: {text[:600]}\n--- stack log ---\n{tail}")

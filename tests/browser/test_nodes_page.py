"""A person sees every node on the Nodes page: the stack's own (``local``) and a joined one."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fakes.toolkit import make_fake_toolkit
from tests.fixtures.hosts import worker_probes_host
from tests.fixtures.users import PASSWORD, make_user
from tests.unit.test_nodes_api import Node_, report


def test_the_nodes_page_shows_two_nodes(
    page: Page, live_server, settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    screenshot_dir: Path,
) -> None:  # fmt: skip
    settings.TRITON_URL = "127.0.0.1:9"  # no Triton here: the page says so
    for key, value in make_fake_toolkit(tmp_path / "Ascend", layout="cann").items():
        monkeypatch.setenv(key, value)
    worker_probes_host()  # the stack's worker: the node `local`, with the fake 310P3 NPUs
    b = Node_("b")
    body = report("b")
    body["devices"]["npus"] = [
        {**body["devices"]["npus"][0], "npu_id": i, "name": "910B3", "memory_total_mb": 65536}
        for i in range(2)
    ]
    assert b.report(body).status_code == 200
    make_user("ada", "admin")

    page.goto(f"{live_server.url}/nodes/")
    page.get_by_label("User name").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("heading", name="Nodes", exact=True)).to_be_visible()
    expect(page.locator("#node-local")).to_have_attribute("data-state", "up")
    expect(page.locator("#node-b")).to_contain_text("Ascend910B3")
    expect(page.locator("#node-detail-b")).to_contain_text("Revoke its tokens")
    page.screenshot(path=str(screenshot_dir / "nodes.png"), full_page=True)

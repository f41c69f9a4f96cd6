"""A person sees the NPU host through its worker's report: NPUs, CANN and the host checks.

A real worker with a fake CANN 8.5 install and the fake ``npu-smi`` (tests/fakes/toolkit.py)
reports its host when it starts; the web (this test process) has neither and shows the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.fakes.toolkit import make_fake_toolkit
from tests.fixtures.users import PASSWORD, make_user
from tests.fixtures.waiting import wait_until
from webapp.nodes.models import HostReport


@pytest.fixture
def worker_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_fake_toolkit(tmp_path_factory.mktemp("host") / "Ascend", layout="cann")


def test_server_and_diagnostics_show_the_workers_report(
    page: Page, live_server, celery_worker, settings, screenshot_dir: Path
) -> None:
    settings.TRITON_URL = "127.0.0.1:9"  # no Triton: the hub's checks say so
    wait_until(
        lambda: HostReport.objects.filter(node="local").exists(),
        timeout=90,
        message="the worker's first host report",
    )
    make_user("vera", "viewer")
    page.goto(f"{live_server.url}/server/")
    page.get_by_label("User name").fill("vera")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()

    status = page.locator("#server-status")
    expect(status).to_contain_text("310P")
    expect(page.locator("#host-cann")).to_contain_text("cann layout (8.5+)")
    expect(status).to_contain_text("Reported by a worker on")
    page.screenshot(path=str(screenshot_dir / "server-host-report.png"), full_page=True)

    page.goto(f"{live_server.url}/diagnostics/")
    host = page.locator("#host-checks")
    expect(host).to_contain_text("Reported by a worker on")
    expect(host.locator("#check-npu_smi")).to_contain_text("OK")
    expect(host.locator("#check-atc")).to_contain_text("OK")
    expect(page.locator("#hub-checks #check-triton_reachable")).to_contain_text("FAILING")
    page.screenshot(path=str(screenshot_dir / "diagnostics-host-report.png"), full_page=True)

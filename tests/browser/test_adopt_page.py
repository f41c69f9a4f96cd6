"""An admin scans a team's Triton repository, renames a clash and adopts (real Chromium)."""

from __future__ import annotations

import shutil
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.fixtures.team_repository import build_team_repository
from tests.fixtures.users import PASSWORD, make_user
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.models import Job


def test_admin_scans_renames_a_clash_and_adopts(  # type: ignore[no-untyped-def]
    page: Page, live_server, transactional_db, settings, tmp_path: Path, screenshot_dir: Path
) -> None:
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    repo = build_team_repository(tmp_path / "team")
    make_user("ada", "admin")
    Model.objects.create(name="classifier", target="onnxruntime")
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{live_server.url}/login/?next=/server/")
    page.get_by_label("User name").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Adopt a Triton repository").click()

    page.get_by_label("Repository path on the hub's hosts").fill(str(repo))
    page.get_by_role("button", name="Scan").click()
    table = page.locator("#adopt-scan")
    expect(table.locator('tr[data-model="classifier"]')).to_contain_text("NAME TAKEN")
    expect(table.locator('tr[data-model="broken"]')).to_contain_text("CANNOT ADOPT")
    expect(table.locator('tr[data-model="doubler"]')).to_contain_text("Triton's environment")
    expect(table.locator('tr[data-model="ge_one_file"]')).to_contain_text("arbitrary one")
    shot = screenshot_dir / "adopt-scan.png"
    page.screenshot(path=str(shot), full_page=True)
    shutil.copyfile(shot, "/tmp/h7-adopt-scan.png")

    page.get_by_label("Adopt classifier").check()
    page.get_by_label("Hub name for classifier").fill("team_classifier")
    page.get_by_role("button", name="Show the plan for these choices").click()
    expect(table.locator('tr[data-model="classifier"]')).to_contain_text("as team_classifier")
    page.get_by_role("button", name="Adopt").last.click()
    expect(page).to_have_url(f"{live_server.url}/jobs/")
    assert Model.objects.filter(name="team_classifier").exists()
    # Every adoptable version but the ensemble's: it calls "classifier", which now is not this.
    assert Job.objects.filter(kind="adopt").count() == 5
    assert not Model.objects.filter(name="pipeline").exists()

"""The self-test's serving_side stage checks the host's NPU driver against the serving CANN."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from model_store.ascend.selftest import DemoAssets, SelftestContext
from model_store.ascend.selftest.serving_side import check_serving_side, host_driver
from model_store.store import ModelStore

ROOT = Path(__file__).resolve().parents[3]


def _context(tmp_path: Path, *, driver: str | None, serving_cann: str | None) -> SelftestContext:
    scratch = tmp_path / "scratch"
    scratch.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "ascend"
    if driver:
        (root / "driver").mkdir(parents=True)
        (root / "driver" / "version.info").write_text(f"Version={driver}\nascendhal_version=7\n")
    ctx = SelftestContext(
        env={"PATH": str(tmp_path / "empty-bin"), "HOME": str(tmp_path)},
        store=ModelStore(tmp_path / "store"),
        runtime=SimpleNamespace(http_url="http://triton:8000"),  # type: ignore[arg-type]
        demo=DemoAssets.from_checkout(ROOT / "demo"),
        scratch=scratch,
        ascend_root=root,
    )
    serving: dict[str, Any] = {"available": True, "backends": {}, "pyacl": {}, "python": "3.12"}
    serving["cann"] = {"available": bool(serving_cann), "version": serving_cann}
    ctx.facts.serving = serving  # asked already: the stage reads it
    return ctx


def test_a_driver_too_old_for_the_serving_cann_fails_the_stage(tmp_path: Path) -> None:
    outcome = check_serving_side(_context(tmp_path, driver="24.1.rc1", serving_cann="9.1.0"))
    assert outcome.verdict == "failed"
    summary = str(outcome.summary)
    assert "Ascend HDK 24.1.rc1" in summary and "CANN 9.1.0" in summary
    assert "25.2.X or newer" in summary and "Upgrade the driver" in summary
    assert outcome.evidence["driver"]["state"] == "too_old"
    assert isinstance(outcome.evidence["driver"]["message"], str)  # JSON-ready


def test_a_driver_new_enough_passes(tmp_path: Path) -> None:
    outcome = check_serving_side(_context(tmp_path, driver="25.2.rc1", serving_cann="9.1.0"))
    assert outcome.verdict == "passed" and outcome.evidence["driver"]["state"] == "ok"


def test_an_unknown_driver_or_cann_is_a_note_in_the_evidence_not_a_failure(tmp_path: Path) -> None:
    no_driver = check_serving_side(_context(tmp_path / "a", driver=None, serving_cann="9.1.0"))
    assert no_driver.verdict == "passed" and no_driver.evidence["driver"]["state"] == "unknown"
    assert "NPU driver's version (not reported)" in no_driver.evidence["driver"]["message"]
    not_in_table = check_serving_side(
        _context(tmp_path / "b", driver="24.1.rc1", serving_cann="8.3.RC2")
    )
    assert not_in_table.verdict == "passed"
    assert not_in_table.evidence["driver"]["state"] == "unknown"


def test_without_a_version_file_the_driver_is_npu_smis(tmp_path: Path) -> None:
    ctx = _context(tmp_path, driver=None, serving_cann="9.1.0")
    assert host_driver(ctx) is None
    ctx.facts.serving = {**(ctx.facts.serving or {}), "devices": {"version": "25.0.rc1"}}
    assert host_driver(ctx) == "25.0.rc1"  # the one Triton's npu-smi gave
    ctx.facts.devices = {"version": "24.1.rc2", "npus": []}
    assert host_driver(ctx) == "24.1.rc2"  # this worker's npu-smi first

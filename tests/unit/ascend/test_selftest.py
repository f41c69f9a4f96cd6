"""The Ascend self-test's runner, console lines, JSON report and exit statuses (no Triton).

The stages here are plain functions handed to the real runner; the last tests run the real
stages on a host with no CANN at all (a temporary folder as the Ascend root, an empty PATH),
which is what a fresh machine without the toolkit looks like.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from model_store.ascend.selftest import (
    STAGES,
    DemoAssets,
    InvalidDevice,
    SelftestContext,
    Stage,
    StageSpec,
    build_report,
    exit_status,
    result_line,
    run_selftest,
    stage_lines,
)
from model_store.ascend.selftest.report import driver_version
from model_store.ascend.selftest.runner import BUG_HINT
from model_store.ascend.selftest.stage import Outcome, failed, not_applicable, passed
from model_store.store import ModelStore
from tests.fakes.toolkit import make_fake_toolkit

ROOT = Path(__file__).resolve().parents[3]


def _context(tmp_path: Path, **overrides: object) -> SelftestContext:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    values: dict[str, object] = {
        "env": {"PATH": str(tmp_path / "empty-bin"), "HOME": str(tmp_path)},
        "store": ModelStore(tmp_path / "store"),
        "runtime": None,
        "demo": DemoAssets.from_checkout(ROOT / "demo"),
        "scratch": scratch,
        "ascend_root": tmp_path / "no-ascend",
    }
    values.update(overrides)
    return SelftestContext(**values)  # type: ignore[arg-type]


def _spec(sid: str, outcome: Outcome | Exception, needs: tuple[str, ...] = ()) -> StageSpec:
    def run(_ctx: SelftestContext) -> Outcome:
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return StageSpec(sid, f"stage {sid}", needs, run)


def _ticks() -> Callable[[], float]:
    times = iter(range(1000))
    return lambda: float(next(times))


def test_a_stage_runs_only_when_what_it_needs_passed(tmp_path: Path) -> None:
    specs = [
        _spec("a", passed("fine", value=1)),
        _spec("b", failed("broken", "fix b")),
        _spec("c", passed("never runs"), needs=("b",)),
        _spec("d", not_applicable("no such backend here")),
        _spec("e", passed("never runs either"), needs=("d",)),
        _spec("f", passed("runs"), needs=("a",)),
    ]
    seen: list[str] = []
    stages = run_selftest(
        _context(tmp_path), stages=specs, on_stage=lambda s: seen.append(s.id), clock=_ticks()
    )
    assert seen == ["a", "b", "c", "d", "e", "f"]
    by_id = {s.id: s for s in stages}
    assert by_id["a"].verdict == "passed" and by_id["a"].evidence == {"value": 1}
    assert by_id["a"].seconds == 1.0
    assert (by_id["c"].verdict, by_id["c"].blocked_by) == ("skipped", "b")
    assert by_id["c"].summary == "skipped: needs stage b"
    # Not applicable is a skip of its own: fine by itself, but nothing that needs it ran.
    assert (by_id["d"].verdict, by_id["d"].blocked_by) == ("skipped", None)
    assert by_id["d"].acceptable and not by_id["e"].acceptable
    assert by_id["f"].verdict == "passed"


def test_a_stage_that_raises_fails_with_the_exception_and_the_rest_still_run(
    tmp_path: Path,
) -> None:
    specs = [_spec("a", RuntimeError("boom")), _spec("b", passed("still here"))]
    stages = run_selftest(_context(tmp_path), stages=specs)
    assert stages[0].verdict == "failed"
    assert stages[0].summary == "the stage itself failed: RuntimeError: boom"
    assert stages[0].next_step == BUG_HINT
    assert stages[1].verdict == "passed"


def test_a_device_that_does_not_exist_stops_the_run(tmp_path: Path) -> None:
    specs = [
        _spec("a", InvalidDevice("--device 7 names no NPU")),
        _spec("b", RuntimeError("must not run")),
    ]
    seen: list[str] = []
    with pytest.raises(InvalidDevice, match="--device 7"):
        run_selftest(_context(tmp_path), stages=specs, on_stage=lambda s: seen.append(s.id))
    assert seen == []


def test_the_exit_status_is_zero_only_when_every_applicable_stage_passed() -> None:
    ok = Stage("a", "A", "passed", "fine")
    not_here = Stage("b", "B", "skipped", "Not applicable: no npu_ge")
    blocked = Stage("c", "C", "skipped", "skipped: needs A", blocked_by="a")
    broken = Stage("d", "D", "failed", "broken", "fix it")
    assert exit_status([ok, not_here]) == 0
    assert exit_status([ok, blocked]) == 1
    assert exit_status([ok, broken]) == 1
    assert exit_status([]) == 1


def test_console_lines_say_the_verdict_and_the_next_step_only_on_failure() -> None:
    ok = Stage("a", "CANN", "passed", "CANN 8.0.RC3 found.", seconds=0.42)
    broken = Stage("b", "ATC", "failed", "ATC failed with E40002.", "Set ATC_PYTHON.", seconds=1)
    assert stage_lines(ok) == ["PASSED    CANN: CANN 8.0.RC3 found. (0.4 s)"]
    lines = stage_lines(broken)
    assert lines[0].startswith("FAILED    ATC: ATC failed with E40002.")
    assert lines[1].strip() == "Next step: Set ATC_PYTHON."
    not_here = Stage("c", "npu_ge", "skipped", "Not applicable: no library.")
    blocked = Stage("d", "Same", "skipped", "skipped: needs ATC", blocked_by="b")
    line = result_line([ok, broken, not_here, blocked], "/tmp/r.json")
    assert line == (
        "Ascend self-test FAILED: 1 passed, 1 failed, 1 skipped (a stage they need did not "
        "pass), 1 not applicable here. Report: /tmp/r.json."
    )
    assert result_line([ok, not_here], None).startswith("Ascend self-test PASSED: 1 passed")


def test_long_summaries_wrap_under_the_title() -> None:
    stage = Stage("a", "T", "failed", "word " * 60, "next " * 40)
    lines = stage_lines(stage)
    assert all(len(line) <= 100 for line in lines)
    assert all(line.startswith(" " * 10) for line in lines[1:])


def test_the_driver_version_comes_from_its_version_file(tmp_path: Path) -> None:
    assert driver_version(tmp_path) is None
    (tmp_path / "driver").mkdir()
    (tmp_path / "driver" / "version.info").write_text("Version=24.1.rc2\nascendhal_version=7\n")
    assert driver_version(tmp_path) == "24.1.rc2"


def test_without_cann_or_npus_the_cann_stages_are_skipped_and_npu_smi_still_answers(
    tmp_path: Path,
) -> None:
    ctx = _context(tmp_path)
    stages = run_selftest(ctx)
    assert [s.id for s in stages] == [spec.id for spec in STAGES]
    by_id = {s.id: s for s in stages}
    first = stages[0]
    assert first.verdict == "failed" and "No CANN toolkit found" in first.summary
    assert "ASCEND_TOOLKIT_HOME" in first.next_step and "set_env.sh" in first.next_step
    # npu-smi needs only the driver: it runs without CANN and says what it found (nothing).
    assert by_id["npus"].verdict == "failed" and "npu-smi not found" in by_id["npus"].summary
    assert by_id["serving_side"].verdict == "skipped" and by_id["serving_side"].blocked_by is None
    others = [s for s in stages if s.id not in ("cann", "npus", "serving_side")]
    assert all(s.verdict == "skipped" and s.blocked_by for s in others)
    assert exit_status(stages) == 1

    report = build_report(
        ctx,
        stages,
        hub_version="0.1.0",
        started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        seconds=1.23456,
    )
    report = json.loads(json.dumps(report))  # JSON-ready as it is
    assert report["verdict"] == "failed" and report["exit_status"] == 1
    assert report["started_at"] == "2026-01-02T03:04:05+00:00"
    assert set(report["versions"]) == {
        "hub", "python", "cann", "cann_ops", "driver", "npu_smi", "atc_python", "triton",
    }  # fmt: skip
    assert report["versions"]["hub"] == "0.1.0" and report["versions"]["cann"] is None
    assert report["host"]["name"] and report["soc"] == {"value": None, "source": None}
    assert [s["verdict"] for s in report["stages"]][:2] == ["failed", "skipped"]
    assert report["stages"][1]["blocked_by"] == "cann"
    assert any("ASCEND_DRIVER_GID" in step for step in report["by_hand"])


def test_missing_demo_files_fail_the_compile_stage_clearly(tmp_path: Path) -> None:
    from model_store.ascend.selftest.build import compile_demo

    ctx = _context(tmp_path, demo=DemoAssets.from_checkout(tmp_path / "no-demo"))
    outcome = compile_demo(ctx)
    assert outcome.verdict == "failed" and "demo files are missing" in outcome.summary
    assert "Reinstall" in outcome.next_step


def test_the_photo_becomes_the_demo_models_input() -> None:
    from model_store.ascend.selftest.demo import photo_tensor
    from model_store.onnx_info import inspect_onnx
    from tests.fixtures.demo import preprocess

    demo = DemoAssets.from_checkout(ROOT / "demo")
    name, tensor = photo_tensor(demo, inspect_onnx(demo.model))
    spec = json.loads((ROOT / "demo" / "efficientnet-lite0" / "preprocess.json").read_text())
    assert name == "input" and tensor.shape == (1, 3, 224, 224)
    assert (tensor == preprocess(demo.photo, spec)).all()
    assert demo.label_list()[967] == "espresso"


def test_a_device_that_is_not_a_number_is_a_usage_error() -> None:
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="not a device id") as caught:
        call_command("ascend_selftest", "--device", "one")
    assert caught.value.returncode == 2


def test_from_compose_exec_the_command_takes_the_environment_the_worker_gets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`docker compose exec worker python manage.py ascend_selftest` skips the image's
    entrypoint, which sources CANN's set_env.sh under ASCEND_ROOT: the command runs that same
    entrypoint (deploy/entrypoint.sh, for real) for the worker's environment."""
    from model_store.ascend.selftest.session import REEXEC_MARK
    from webapp.ops.management.commands.ascend_selftest import worker_environment

    make_fake_toolkit(tmp_path / "Ascend")
    for name in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_SET_ENV", REEXEC_MARK):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ASCEND_ROOT", str(tmp_path / "Ascend"))
    monkeypatch.setenv("HUB_DEV_DIR", str(tmp_path / "no-devices"))
    env = worker_environment()
    home = tmp_path / "Ascend" / "ascend-toolkit" / "latest"
    assert env["ASCEND_TOOLKIT_HOME"] == str(home)
    assert str(home / "python" / "site-packages") in env["PYTHONPATH"].split(":")
    # Already there (the worker itself, or the command started again): nothing to do.
    monkeypatch.setenv(REEXEC_MARK, "1")
    assert worker_environment() == dict(os.environ)

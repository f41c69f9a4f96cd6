"""One npu-smi at a time on a host (review point C5): the flock every npu-smi run takes.

Huawei's npu-smi reference forbids concurrent npu-smi calls (npusmi_003, npusmi_006), so
``read_devices`` (the host probe, the diagnostics, the self-test) and the serving-facts probe
inside Triton take one lock file, ``NPU_SMI_LOCK_FILE``. A second process waits for the first,
and one that waits too long says npu-smi is busy instead of running it beside the other.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from model_store import spawn
from model_store.devices import npu_smi_lock as lock_module
from model_store.devices.npu_smi_lock import (
    DEFAULT_NPU_SMI_LOCK_FILE,
    NPU_SMI_BUSY,
    NpuSmiBusy,
    npu_smi_lock,
    npu_smi_lock_file,
)
from model_store.devices.reading import _run_npu_smi, read_devices
from model_store.diagnostics.context import DiagnosticsContext
from model_store.diagnostics.device_checks import check_npu_smi

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = (ROOT / "tests" / "unit" / "npu_smi" / "310p3.txt").read_text()
PROBE = ROOT / "model_store" / "serving" / "facts_probe" / "model.py"
#: A second process that holds the lock for argv[1] seconds, saying "held" once it has it.
HOLDER = """
import sys, time
from model_store.devices.npu_smi_lock import npu_smi_lock
with npu_smi_lock(10) as note:
    assert note is None, note
    print("held", flush=True)
    time.sleep(float(sys.argv[1]))
"""


@pytest.fixture
def lock_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "npu-smi.lock"
    monkeypatch.setenv("NPU_SMI_LOCK_FILE", str(path))
    return path


@pytest.fixture
def hold(lock_file: Path) -> Iterator[Callable[[float], subprocess.Popen[bytes]]]:
    """``hold(seconds)``: another process of this host holds the lock (returns once it does)."""
    started: list[subprocess.Popen[bytes]] = []

    def start(seconds: float) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "NPU_SMI_LOCK_FILE": str(lock_file)}
        proc = spawn.start(
            [sys.executable, "-c", HOLDER, str(seconds)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
        )
        started.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"held"
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _table_runner(calls: list[float]) -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(time.monotonic())
        return subprocess.CompletedProcess(argv, 0, stdout=SAMPLE, stderr="")

    return run


def _which(_: str) -> str:
    return "/usr/local/bin/npu-smi"


def test_the_path_setting_is_honoured_and_the_default_is_in_tmp() -> None:
    assert npu_smi_lock_file({"NPU_SMI_LOCK_FILE": "/srv/hub/npu-smi.lock"}) == (
        "/srv/hub/npu-smi.lock"
    )
    assert npu_smi_lock_file({"NPU_SMI_LOCK_FILE": " "}) == DEFAULT_NPU_SMI_LOCK_FILE
    assert npu_smi_lock_file({}) == "/tmp/triton-model-hub-npu-smi.lock"


def test_read_devices_takes_the_lock_file_the_setting_names_created_0666(
    lock_file: Path,
) -> None:
    old = os.umask(0o077)
    try:
        report = read_devices(runner=_table_runner([]), which=_which, usages=False)
    finally:
        os.umask(old)
    assert report["available"] and report["npus"]
    assert lock_file.is_file()
    assert lock_file.stat().st_mode & 0o777 == 0o666  # root and uid 10001 can both open it


def test_a_second_process_waits_for_the_first(hold: Callable[[float], Any]) -> None:
    calls: list[float] = []
    before = time.monotonic()
    holder = hold(1.0)
    report = read_devices(runner=_table_runner(calls), which=_which, timeout=10, usages=False)
    assert report["available"], report
    assert calls and calls[0] - before >= 0.9  # npu-smi ran only once the other let go
    assert holder.wait(timeout=10) == 0


def test_a_lock_held_past_the_wait_gives_the_busy_message(hold: Callable[[float], Any]) -> None:
    hold(30)
    calls: list[float] = []
    started = time.monotonic()
    report = read_devices(runner=_table_runner(calls), which=_which, timeout=0.4)
    assert time.monotonic() - started >= 0.4
    assert report == {"available": False, "reason": NPU_SMI_BUSY, "npus": []}
    assert report["reason"] == "npu-smi is busy (another process of this host is using it)"
    assert calls == []  # npu-smi never ran beside the other one
    with pytest.raises(NpuSmiBusy), npu_smi_lock(0.1):
        pass


def test_diagnostics_say_busy_as_a_warning_not_a_broken_install(
    hold: Callable[[float], Any], tmp_path: Path
) -> None:
    hold(30)
    ctx = DiagnosticsContext(
        env={}, which=_which, run=_table_runner([]), dev_dir=tmp_path, timeout=0.3
    )
    check = check_npu_smi(ctx)
    assert check.state == "warning"
    assert check.found == "npu-smi is busy (another process of this host is using it)."
    assert "NPU_SMI_LOCK_FILE" in check.advice


def test_an_extra_call_that_finds_npu_smi_busy_is_a_warning() -> None:
    def busy(argv: list[str], **kwargs: Any) -> Any:
        raise NpuSmiBusy()

    stdout, problem = _run_npu_smi(busy, ["npu-smi", "info", "-m"], 1.0)
    assert stdout == ""
    assert problem == "was not run: npu-smi is busy (another process of this host is using it)"


def test_threads_of_one_process_take_turns_too(lock_file: Path) -> None:
    with npu_smi_lock(1.0) as note:
        assert note is None
        with pytest.raises(NpuSmiBusy), npu_smi_lock(0.05):
            pass  # another descriptor of the same file: flock keeps them apart
    with npu_smi_lock(0.05) as again:
        assert again is None


def test_a_symlink_at_the_lock_path_is_not_followed(lock_file: Path, tmp_path: Path) -> None:
    target = tmp_path / "victim"
    lock_file.symlink_to(target)
    report = read_devices(runner=_table_runner([]), which=_which, usages=False)
    assert report["available"]
    assert not target.exists()  # nothing was created through the link
    [note] = [w for w in report["warnings"] if "lock file" in w]
    assert str(lock_file) in note and "npu-smi ran without it" in note


def test_a_folder_at_the_lock_path_does_not_stop_npu_smi(lock_file: Path) -> None:
    lock_file.mkdir()
    with npu_smi_lock(0.1) as note:
        assert note is not None and "cannot be used" in note


def test_a_lock_file_made_by_someone_else_is_opened_read_only(lock_file: Path) -> None:
    lock_file.write_text("")
    lock_file.chmod(0o444)  # flock needs no write access (another owner's 0644 file)
    with npu_smi_lock(0.1) as note:
        assert note is None
    assert lock_module.npu_smi_lock_file() == str(lock_file)


# --------------------------------------------------------------- the probe inside Triton


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    """The serving-facts probe as Triton's stub loads it (its Triton module faked)."""
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", ModuleType("pb_utils"))
    spec = importlib.util.spec_from_file_location("_facts_probe_under_test", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    program = tmp_path / "bin" / "npu-smi"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\necho 'npu-smi 25.5.1  Version: 25.5.1'\n")
    program.chmod(0o755)
    monkeypatch.setattr(module.shutil, "which", lambda name: str(program))
    return module


def test_the_probe_in_triton_takes_the_same_lock(probe: ModuleType, lock_file: Path) -> None:
    found = probe._npu_smi()
    assert found["returncode"] == 0 and "25.5.1" in found["stdout"]
    assert "lock_error" not in found
    assert lock_file.stat().st_mode & 0o777 == 0o666


def test_the_probe_says_busy_when_the_lock_stays_held(
    probe: ModuleType, hold: Callable[[float], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(probe, "NPU_SMI_SECONDS", 0.3)
    hold(30)
    found = probe._npu_smi()
    assert found["error"] == "npu-smi is busy (another process of this host is using it)"
    assert "returncode" not in found


def test_the_probe_runs_without_a_lock_it_cannot_use(
    probe: ModuleType, lock_file: Path, tmp_path: Path
) -> None:
    lock_file.symlink_to(tmp_path / "victim")
    found = probe._npu_smi()
    assert found["returncode"] == 0
    assert str(lock_file) in str(found["lock_error"])
    assert not (tmp_path / "victim").exists()

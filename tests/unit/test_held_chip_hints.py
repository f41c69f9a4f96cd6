"""An NPU held by another container is named first (review point C3).

On stock Ascend drivers a chip one container opened cannot be opened from another: pyACL's
``set_device`` answers 507008 and npu-smi prints ``dcmi module initialize failed. ret is -8005``
(vllm-project/vllm-ascend #2542, #632, #248, #2698). The hub says so before the rarer
driver/CANN mismatch, with the command that turns container sharing on
(``npu-smi set -t device-share -i <card> -c <chip> -d 1``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from model_store.backends.acl import model as backend
from model_store.backends.acl.model import ACL_ERROR_REPEAT_INITIALIZE, AclError, OmSession
from model_store.devices.held_elsewhere import (
    device_share_command,
    held_elsewhere_hint,
    is_npu_smi_held_reason,
    npu_smi_says_held,
)
from model_store.devices.reading import read_devices
from model_store.diagnostics.context import DiagnosticsContext
from model_store.diagnostics.device_checks import check_npu_smi

COMMAND = "npu-smi set -t device-share -i <card> -c <chip> -d 1"
HELD = "the NPU is held by another container"
DCMI_8005 = "dcmi module initialize failed. ret is -8005"


@pytest.fixture(autouse=True)
def _own_lock_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPU_SMI_LOCK_FILE", str(tmp_path / "npu-smi.lock"))


def _acl_refusing_set_device(ret: int) -> Any:
    """A pyACL whose ``rt.set_device`` answers ``ret`` (acl.init: already initialised)."""
    return SimpleNamespace(
        init=lambda: ACL_ERROR_REPEAT_INITIALIZE,
        finalize=lambda: 0,
        rt=SimpleNamespace(set_device=lambda device_id: ret, reset_device=lambda device_id: 0),
    )


def _meaning(error: AclError) -> str:
    """What the message says the code means: the part in brackets after the code."""
    head, _, meaning = str(error).partition(" (")
    assert head.endswith(f"failed with ACL error {error.ret}")
    return meaning


@pytest.mark.parametrize("code", [507008, 500004])
def test_set_device_held_elsewhere_names_that_cause_first(tmp_path: Path, code: int) -> None:
    om = tmp_path / "model.om"
    om.write_bytes(b"om")
    with pytest.raises(AclError) as raised:
        OmSession(om, 0, acl_module=_acl_refusing_set_device(code))
    assert str(raised.value).startswith(f"acl.rt.set_device(0) failed with ACL error {code} (")
    meaning = _meaning(raised.value)
    assert meaning.startswith(HELD)
    assert COMMAND in meaning and "as root on the host, after every reboot" in meaning
    assert meaning.index(HELD) < meaning.index("the driver and the CANN release may not match")


def test_the_backends_copy_matches_the_hubs_wording() -> None:
    # The backend cannot import model_store inside Triton's stub; its copy must not drift.
    assert str(held_elsewhere_hint()) == backend._HELD_ELSEWHERE
    assert str(held_elsewhere_hint()) == (
        "the NPU is held by another container (a chip can be opened from one container at a "
        f"time unless container sharing is on: `{COMMAND}`, as root on the host, after every "
        "reboot)"
    )
    assert device_share_command(3, 1) == "npu-smi set -t device-share -i 3 -c 1 -d 1"
    assert COMMAND in str(held_elsewhere_hint(None, None))
    assert "-i 3 -c 1 -d 1" in str(held_elsewhere_hint(3, 1))


def test_other_acl_codes_are_unchanged() -> None:
    assert str(AclError("acl.rt.set_device(9)", 107001)) == (
        "acl.rt.set_device(9) failed with ACL error 107001 "
        "(no such device in this process (a container numbers its NPUs from 0))"
    )
    assert HELD not in str(AclError("acl.mdl.load_from_file", 207001))


def _failing(stderr: str, code: int = 255, stdout: str = "") -> Any:
    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, code, stdout=stdout, stderr=stderr)

    return run


def _npu_smi_check(tmp_path: Path, runner: Any) -> Any:
    ctx = DiagnosticsContext(
        env={}, which=lambda _: "/usr/local/bin/npu-smi", run=runner, dev_dir=tmp_path
    )
    return check_npu_smi(ctx)


def test_npu_smi_8005_says_the_npu_is_held_by_another_container(tmp_path: Path) -> None:
    report = read_devices(runner=_failing(DCMI_8005), which=lambda _: "/usr/local/bin/npu-smi")
    assert not report["available"] and is_npu_smi_held_reason(report["reason"])
    check = _npu_smi_check(tmp_path, _failing(DCMI_8005))
    assert check.state == "failing"
    assert str(check.found).startswith(
        "npu-smi could not open the NPU: it is held by another container ("
    )
    assert COMMAND in check.found
    assert "exit code 255" in check.found and "ret is -8005" in check.found  # npu-smi's words
    assert COMMAND in check.advice
    assert "only the Triton container should have the NPU" in check.advice
    assert "/usr/local/dcmi" in check.advice  # the rarer causes follow


def test_8005_on_stdout_counts_too(tmp_path: Path) -> None:
    check = _npu_smi_check(tmp_path, _failing("", code=1, stdout=f"\n{DCMI_8005}\n"))
    assert "held by another container" in check.found


def test_a_plain_other_npu_smi_failure_is_unchanged(tmp_path: Path) -> None:
    check = _npu_smi_check(tmp_path, _failing("libdrvdsmi_host.so: cannot open shared object"))
    assert check.state == "failing"
    assert check.found == (
        "npu-smi is installed but gave no table: npu-smi info failed with exit code 255: "
        "libdrvdsmi_host.so: cannot open shared object."
    )
    assert "held by another container" not in check.found
    assert "held by another container" not in check.advice
    assert "/usr/local/dcmi" in check.advice


@pytest.mark.parametrize(
    ("text", "held"),
    [
        (DCMI_8005, True),
        ("ret:-8005", True),
        ("error code -80050", False),
        ("ret is 18005", False),
        ("", False),
        (None, False),
        (DCMI_8005.encode(), True),
    ],
)
def test_which_output_means_held(text: str | bytes | None, held: bool) -> None:
    assert npu_smi_says_held(text) is held

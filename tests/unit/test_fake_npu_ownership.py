"""Who holds a fake NPU chip across containers (tests/fakes/npu_owners.py, FAKE_NPU_OWNERS_DIR).

A "container" is a PID namespace: the test's own, and a second one made with
``unshare --pid --fork``. Process A (this namespace) opens chip 0 with ``acl.rt.set_device``
and stays alive; a process of the other namespace then gets what a second container gets on a
stock driver (tests/fakes/README.md, "Who holds the chip"). Needs root for ``unshare``; skips
elsewhere (CI runs as root).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from model_store import spawn
from tests.fakes.devices import HUB_UID, run_as

FAKES = Path(__file__).resolve().parents[1] / "fakes"
NPU_SMI = FAKES / "npu-smi"
OCCUPIED = "dcmi module initialize failed. ret is -8005"

#: Opens a device (argv[1]), optionally resets it (argv[2] == "reset"), says so, then holds it
#: until its stdin closes.
HOLD = """
import sys
import acl
acl.init()
ret = acl.rt.set_device(int(sys.argv[1]))
if sys.argv[2:] == ["reset"]:
    acl.rt.reset_device(int(sys.argv[1]))
print(ret, flush=True)
sys.stdin.read()
"""
#: What a process sees: count, SoC and set_device(argv[1]), as JSON.
PROBE = """
import json, sys
import acl
acl.init()
count = acl.rt.get_device_count()
soc = acl.get_soc_name()
ret = acl.rt.set_device(int(sys.argv[1]))
print(json.dumps({"count": list(count), "soc": soc, "set_device": ret}))
"""


def _env(owners: Path | None, **extra: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(FAKES), **extra}
    if owners is not None:
        env["FAKE_NPU_OWNERS_DIR"] = str(owners)
    return env


def _other_container(argv: list[str]) -> list[str]:
    return ["unshare", "--pid", "--fork", "--kill-child", *argv]


@pytest.fixture
def owners(tmp_path: Path) -> Path:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare (util-linux) for a second PID namespace")
    tried = spawn.run(_other_container(["true"]), timeout=10, capture_output=True, check=False)
    if tried.returncode != 0:
        pytest.skip(f"unshare --pid fails here: {tried.stderr.decode(errors='replace')}")
    folder = tmp_path / "owners"
    folder.mkdir()
    return folder


def probe(owners: Path | None, *, container: bool, device: int = 0, **env: str) -> dict:
    argv = [sys.executable, "-c", PROBE, str(device)]
    done = spawn.run(
        _other_container(argv) if container else argv, env=_env(owners, **env),
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout), stderr=done.stderr)


def npu_smi(
    owners: Path | None, *args: str, container: bool = False
) -> subprocess.CompletedProcess[str]:
    argv = [str(NPU_SMI), *args]
    return spawn.run(
        _other_container(argv) if container else argv, env=_env(owners),
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


class Holder:
    """Process A: opens a device and keeps it until :meth:`end`."""

    def __init__(self, owners: Path, device: int = 0, *extra: str, **env: str) -> None:
        self.proc = spawn.start(
            [sys.executable, "-c", HOLD, str(device), *extra], env=_env(owners, **env),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        self.ret = int(self.proc.stdout.readline() or "-1")

    def end(self) -> None:
        """Ends A: its stdin closes, it exits, and with it its hold on the chip."""
        proc = self.proc
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        proc.wait(timeout=10)


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for each in started:
        each.end()


def test_a_chip_held_in_one_container_fails_in_another_until_its_process_ends(
    owners: Path, holders: list[Holder]
) -> None:
    a = Holder(owners, 0)
    holders.append(a)
    assert a.ret == 0
    b = probe(owners, container=True)
    assert b["set_device"] == 507008
    assert b["count"] == [0, 507008] and b["soc"] is None
    assert "halGetDeviceInfo" in b["stderr"] and "ret:87" in b["stderr"]
    assert b["stderr"].count("halGetDeviceInfo") == 1  # logged once per process
    smi = npu_smi(owners, "info", container=True)
    assert (smi.returncode, smi.stdout.strip()) == (255, OCCUPIED)
    # Another process of A's container shares the chip, npu-smi included.
    same = probe(owners, container=False)
    assert same["set_device"] == 0 and same["count"] == [2, 0] and same["soc"] == "Ascend310P3"
    assert npu_smi(owners, "info", "-m", container=False).returncode == 0
    a.end()
    after = probe(owners, container=True)
    assert after["set_device"] == 0 and after["count"] == [2, 0], after["stderr"]
    assert npu_smi(owners, "info", container=True).returncode == 0


def test_reset_device_does_not_let_go_of_the_chip(owners: Path, holders: list[Holder]) -> None:
    holders.append(Holder(owners, 0, "reset"))
    assert probe(owners, container=True)["set_device"] == 507008


def test_chips_are_keyed_by_logical_id_through_visible_devices(
    owners: Path, holders: list[Holder]
) -> None:
    a = Holder(owners, 0, ASCEND_RT_VISIBLE_DEVICES="1")  # device 0 is chip 1
    holders.append(a)
    assert a.ret == 0
    other_chip = probe(owners, container=True, ASCEND_RT_VISIBLE_DEVICES="0")
    assert other_chip["set_device"] == 0 and other_chip["count"] == [1, 0]
    assert other_chip["stderr"] == ""
    everything = probe(owners, container=True, device=1)
    assert everything["set_device"] == 507008 and everything["count"] == [0, 507008]


def test_container_sharing_mode_lets_another_container_in(
    owners: Path, holders: list[Holder]
) -> None:
    holders.append(Holder(owners, 0))
    query = ("info", "-t", "device-share", "-i", "4", "-c", "0")  # NPU 4 chip 0: logical 0
    assert npu_smi(owners, *query).stdout == "\tDevice-share Status            : False\n"
    done = npu_smi(owners, "set", "-t", "device-share", "-i", "4", "-c", "0", "-d", "1")
    assert done.returncode == 0, done.stderr
    assert (owners / "chip0.share").read_text().strip() == "1"
    assert npu_smi(owners, *query).stdout == "\tDevice-share Status            : True\n"
    b = probe(owners, container=True)
    assert b["set_device"] == 0 and b["count"] == [2, 0] and b["stderr"] == ""
    assert npu_smi(owners, "info", container=True).returncode == 0
    npu_smi(owners, "set", "-t", "device-share", "-i", "4", "-c", "0", "-d", "0")
    assert npu_smi(owners, *query).stdout == "\tDevice-share Status            : False\n"
    assert probe(owners, container=True)["set_device"] == 507008


def test_setting_sharing_mode_needs_root_and_names_a_chip(owners: Path) -> None:
    owners.chmod(0o777)
    argv = [str(NPU_SMI), "set", "-t", "device-share", "-i", "4", "-c", "0", "-d", "1"]
    if shutil.which("setpriv"):
        refused = spawn.run(
            [*run_as(HUB_UID), *argv], env=_env(owners),
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert refused.returncode == 1 and "Permission denied" in refused.stderr
        assert not (owners / "chip0.share").exists()
    wrong = npu_smi(owners, "set", "-t", "device-share", "-i", "9", "-c", "0", "-d", "1")
    assert wrong.returncode == 2 and "no such NPU or chip" in wrong.stderr
    bad = npu_smi(owners, "set", "-t", "device-share", "-i", "4", "-c", "0", "-d", "2")
    assert bad.returncode == 2


def test_without_the_directory_nothing_is_held(owners: Path, holders: list[Holder]) -> None:
    holders.append(Holder(owners, 0))
    free = probe(None, container=True)
    assert free["set_device"] == 0 and free["count"] == [2, 0] and free["stderr"] == ""
    assert npu_smi(None, "info", container=True).returncode == 0
    done = npu_smi(None, "set", "-t", "device-share", "-i", "4", "-c", "0", "-d", "1")
    assert done.returncode == 0  # says it did; records nothing anywhere
    share = npu_smi(None, "info", "-t", "device-share", "-i", "4", "-c", "0")
    assert share.stdout == "\tDevice-share Status            : False\n"

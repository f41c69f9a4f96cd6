"""The NPU device nodes as a stock driver makes them (crw-rw----, the driver's group), opened by
the hub image's user, uid 10001 (docs/cann.md#device-permissions).

Real character devices made with ``mknod`` (tests/fakes/devices.py), so the kernel decides who
may open them exactly as on an Atlas host; the code under test runs as uid 10001 through
``setpriv``, with and without the group. Needs root (CI runs as root); skips elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from model_store import spawn
from tests.fakes.devices import DRIVER_GID, HUB_UID, make_device_nodes, require_root, run_as

ROOT = Path(__file__).resolve().parents[3]
HUB_ENTRYPOINT = ROOT / "deploy" / "entrypoint.sh"
HOST_ENV = ROOT / "deploy" / "ascend-host-env.sh"

CHECK = """
import json, sys
from pathlib import Path
from model_store.diagnostics.context import DiagnosticsContext
from model_store.diagnostics.device_checks import check_davinci_devices
ctx = DiagnosticsContext(env={}, which=lambda _: None, dev_dir=Path(sys.argv[1]),
                         ascend_root=Path(sys.argv[1]) / "none",
                         devices={"available": False, "reason": "npu-smi not found"})
check = check_davinci_devices(ctx)
print(json.dumps({"state": check.state, "found": str(check.found), "advice": str(check.advice)}))
"""


@pytest.fixture
def dev(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_root()
    return tmp_path_factory.mktemp("dev")


def _as_hub(
    argv: list[str], groups: tuple[int, ...] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/tmp",
        "PYTHONPATH": str(ROOT),
    }
    return spawn.run(
        [*run_as(HUB_UID, groups), *argv], env=base | env, cwd=ROOT,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _check_as_hub(dev: Path, groups: tuple[int, ...] = ()) -> dict[str, str]:
    done = _as_hub([sys.executable, "-c", CHECK, str(dev)], groups)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_a_user_without_the_drivers_group_cannot_open_any_node(dev: Path) -> None:
    nodes = make_device_nodes(dev, chips=2)
    # What the kernel says, before any code of ours: EACCES for every kind of node.
    for node in nodes:
        done = _as_hub(["sh", "-c", f"exec 3<>{node}"])
        assert done.returncode != 0 and "Permission denied" in done.stderr, node
        assert _as_hub(["sh", "-c", f"exec 3<>{node}"], (DRIVER_GID,)).returncode == 0


def test_the_diagnostics_check_fails_with_every_nodes_mode_and_how_to_find_the_group(
    dev: Path,
) -> None:
    make_device_nodes(dev, chips=2)
    check = _check_as_hub(dev)
    assert check["state"] == "failing", check
    for name in ("davinci_manager", "devmm_svm", "hisi_hdc", "davinci0", "davinci1"):
        assert f"{dev / name} crw-rw---- 0:{DRIVER_GID}" in check["found"], check
    assert f"uid {HUB_UID}" in check["found"]
    assert f"stat -c %g {dev / 'davinci_manager'}" in check["advice"]
    assert "ASCEND_DRIVER_GID" in check["advice"]
    assert _check_as_hub(dev, (DRIVER_GID,))["state"] == "ok"


def test_a_control_node_alone_out_of_reach_is_found(dev: Path) -> None:
    make_device_nodes(dev, chips=1)
    (dev / "hisi_hdc").chmod(0o600)  # the davinci nodes open, hisi_hdc does not
    check = _check_as_hub(dev, (DRIVER_GID,))
    assert check["state"] == "failing" and "hisi_hdc" in check["found"]
    assert "davinci0 crw" not in check["found"]


def test_the_entrypoint_stops_a_worker_without_the_group_and_says_how_to_find_it(
    dev: Path,
) -> None:
    make_device_nodes(dev, chips=1)
    refused = _as_hub(["bash", str(HUB_ENTRYPOINT), "echo", "started"], HUB_DEV_DIR=str(dev))
    assert refused.returncode == 78 and "started" not in refused.stdout
    assert "cannot open the NPU device nodes" in refused.stderr
    assert f"{dev / 'davinci_manager'} crw-rw---- owner 0:{DRIVER_GID}" in refused.stderr
    assert "ASCEND_DRIVER_GID" in refused.stderr
    assert "stat -c %g /dev/davinci_manager" in refused.stderr
    started = _as_hub(
        ["bash", str(HUB_ENTRYPOINT), "echo", "started"], (DRIVER_GID,), HUB_DEV_DIR=str(dev)
    )
    assert started.returncode == 0 and started.stdout.strip() == "started", started.stderr


def test_the_entrypoint_needs_nothing_where_no_node_is_mapped(tmp_path: Path) -> None:
    require_root("run the entrypoint as another user")
    empty = tmp_path / "dev"
    empty.mkdir()
    tmp_path.chmod(0o755)
    done = _as_hub(["bash", str(HUB_ENTRYPOINT), "echo", "started"], HUB_DEV_DIR=str(empty))
    assert done.returncode == 0 and done.stdout.strip() == "started", done.stderr


def _host_env(path: str, dev: Path, root: Path) -> spawn.subprocess.CompletedProcess[str]:
    """deploy/ascend-host-env.sh with ``path`` as PATH, ``dev`` as /dev, ``root`` as the
    Ascend root."""
    return spawn.run(
        ["bash", str(HOST_ENV)],
        env={"PATH": path, "HUB_DEV_DIR": str(dev), "ASCEND_ROOT": str(root)},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_the_host_helper_prints_the_group_and_npu_smi_where_the_driver_put_it(
    dev: Path, tmp_path: Path
) -> None:
    make_device_nodes(dev, chips=1)
    sbin = tmp_path / "usr-local-sbin"
    sbin.mkdir()
    (sbin / "npu-smi").write_text("#!/bin/sh\n")
    (sbin / "npu-smi").chmod(0o755)
    (tmp_path / "Ascend" / "driver").mkdir(parents=True)
    done = _host_env(f"{sbin}:/usr/bin:/bin", dev, tmp_path / "Ascend")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"ASCEND_DRIVER_GID={DRIVER_GID}",
        f"NPU_SMI_PATH={sbin / 'npu-smi'}",
        f"ASCEND_ROOT={tmp_path / 'Ascend'}",
        # The first chip's node, and the folder of the shared ones when it is not /dev.
        f"ASCEND_DEVICE={dev / 'davinci0'}",
        f"ASCEND_DEV_DIR={dev}",
    ]


def test_a_virtual_first_npu_gets_the_name_cann_opens_in_the_container(tmp_path: Path) -> None:
    """/dev/vdavinciN on the host is /dev/davinciN for CANN (Ascend Docker Runtime renames it);
    the helper prints both settings and names the override that maps it so."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("davinci_manager", "vdavinci100", "vdavinci101"):
        (dev / name).touch()
    (tmp_path / "Ascend" / "driver").mkdir(parents=True)
    lines = _host_env("/usr/bin:/bin", dev, tmp_path / "Ascend").stdout.splitlines()
    assert f"ASCEND_DEVICE={dev / 'vdavinci100'}" in lines
    assert "ASCEND_DEVICE_IN_CONTAINER=/dev/davinci100" in lines
    assert any("deploy/hub-ascend-vnpu.yml" in line for line in lines if line.startswith("#"))


def test_the_host_helper_says_what_a_host_without_the_driver_lacks(tmp_path: Path) -> None:
    done = _host_env("/usr/bin:/bin", tmp_path, tmp_path / "none")
    assert done.returncode == 1 and done.stdout == ""
    assert "no " + str(tmp_path / "davinci_manager") in done.stderr
    assert "npu-smi not found" in done.stderr

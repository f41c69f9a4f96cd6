"""deploy/ascend-host-env.sh: a comment per chip on the driver's container sharing mode.

Run against the fake npu-smi (tests/fakes/npu-smi, linked into a folder on ``PATH``), which
answers ``npu-smi info -t device-share -i N -c C`` from ``FAKE_NPU_OWNERS_DIR``
(tests/fakes/README.md, "Who holds the chip"), and against a stub whose ``-m`` fails.
"""

from __future__ import annotations

import os
from pathlib import Path

from model_store import spawn
from tests.fakes import npu_owners

ROOT = Path(__file__).resolve().parents[2]
HOST_ENV = ROOT / "deploy" / "ascend-host-env.sh"
FAKE_NPU_SMI = ROOT / "tests" / "fakes" / "npu-smi"
SAMPLES = ROOT / "tests" / "fakes" / "npu_smi_samples"


def _off(card: int, chip: int) -> list[str]:
    return [
        f"# NPU {card} chip {chip}: container sharing is off (npu-smi info -t device-share "
        f"-i {card} -c {chip}). Needed only if the worker is also given this NPU (by default "
        "the hub gives it to the Triton container alone); to turn it on, as root on this "
        "host, after every reboot:",
        f"#   npu-smi set -t device-share -i {card} -c {chip} -d 1",
    ]


def _on(card: int, chip: int) -> list[str]:
    return [
        f"# NPU {card} chip {chip}: container sharing is on "
        f"(npu-smi info -t device-share -i {card} -c {chip})"
    ]


def _host(tmp_path: Path, npu_smi: Path | None = None) -> dict[str, str]:
    """A host for the script: a driver folder, a davinci_manager (a plain file is enough for
    ``stat``) and ``npu-smi`` in a folder on ``PATH``."""
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "davinci_manager").touch()
    (tmp_path / "Ascend" / "driver").mkdir(parents=True)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "npu-smi").symlink_to(npu_smi or FAKE_NPU_SMI)
    return {
        "PATH": f"{tools}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HUB_DEV_DIR": str(dev),
        "ASCEND_ROOT": str(tmp_path / "Ascend"),
    }


def _run(env: dict[str, str]) -> list[str]:
    done = spawn.run(
        ["bash", str(HOST_ENV)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split("=")[0] for line in lines[:3]] == [
        "ASCEND_DRIVER_GID", "NPU_SMI_PATH", "ASCEND_ROOT",
    ]  # fmt: skip
    return lines[3:]


def test_every_chip_is_off_by_default_with_the_command_that_turns_it_on(tmp_path: Path) -> None:
    assert _run(_host(tmp_path)) == _off(4, 0) + _off(5, 0)


def test_a_chip_with_sharing_on_says_so(tmp_path: Path) -> None:
    owners = tmp_path / "owners"
    owners.mkdir()
    npu_owners.set_shared(0, True, owners)  # NPU 4 chip 0 is logical id 0
    env = _host(tmp_path) | {"FAKE_NPU_OWNERS_DIR": str(owners)}
    assert _run(env) == _on(4, 0) + _off(5, 0)


def test_the_chips_of_an_hbm_host_come_from_the_mapping(tmp_path: Path) -> None:
    env = _host(tmp_path) | {"FAKE_NPU_SMI_SAMPLE": "910b4-1_x8_npu-smi-25.2.0.txt"}
    lines = _run(env)
    assert lines == [line for card in range(8) for line in _off(card, 0)]


def test_without_a_mapping_the_table_gives_the_chips_and_a_failed_query_is_unknown(
    tmp_path: Path,
) -> None:
    stub = tmp_path / "npu-smi-stub"
    stub.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        '  "info -m") echo "not supported" >&2; exit 1 ;;\n'
        f'  "info") cat {SAMPLES / "310p3_duo_npu-smi-25.2.0.txt"} ;;\n'
        '  *) echo "dcmi module initialize failed. ret is -8005"; exit 255 ;;\n'
        "esac\n"
    )
    stub.chmod(0o755)
    assert _run(_host(tmp_path, stub)) == [
        f"# NPU 2 chip {chip}: container sharing unknown: npu-smi info -t device-share -i 2 "
        f"-c {chip} exited 255 and said: dcmi module initialize failed. ret is -8005"
        for chip in (0, 1)
    ]

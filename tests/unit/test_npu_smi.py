"""Tests for model_store.devices: npu-smi table/usages parsing and read_devices()."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from model_store.devices import (
    NpuChip,
    NpuProcess,
    parse_npu_smi_info,
    parse_npu_smi_usages,
    read_devices,
)

DATA = Path(__file__).parent / "npu_smi"


def _text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# --- parse_npu_smi_info: documented layouts -------------------------------------------


def test_310p3_two_rows_per_chip() -> None:
    report = parse_npu_smi_info(_text("310p3.txt"))
    assert report.version == "22.0.2"
    assert report.warnings == []
    assert report.processes == []
    assert report.chips == [
        NpuChip(
            npu_id=0,
            chip_id=0,
            device_id=0,
            name="310P3",
            health="OK",
            power_w=16.0,
            temp_c=50.0,
            hugepages_used=1236,
            hugepages_total=1236,
            bus_id="0000:86:00.0",
            aicore_pct=0.0,
            memory_used_mb=4066,
            memory_total_mb=21534,
            hbm_used_mb=None,
            hbm_total_mb=None,
        )
    ]


def test_910b_hbm_and_no_running_processes() -> None:
    report = parse_npu_smi_info(_text("910b.txt"))
    assert report.warnings == []
    assert report.version is None
    assert report.processes == []
    (chip,) = report.chips
    assert (chip.npu_id, chip.chip_id, chip.device_id) == (0, 0, None)
    assert chip.name == "910B3"
    assert chip.health == "OK"
    assert chip.power_w == pytest.approx(101.8)
    assert chip.temp_c == 43.0
    assert (chip.hugepages_used, chip.hugepages_total) == (0, 0)
    assert chip.bus_id == "0000:C1:00.0"
    assert (chip.memory_used_mb, chip.memory_total_mb) == (0, 0)
    assert (chip.hbm_used_mb, chip.hbm_total_mb) == (3318, 65536)


def test_910b_two_chips_chip_id_differs_from_npu_id() -> None:
    report = parse_npu_smi_info(_text("910b_two_chips.txt"))
    assert report.warnings == []
    assert report.version == "24.1.rc2"
    first, second = report.chips
    assert (first.npu_id, first.chip_id, first.name) == (6, 0, "910B1")
    assert (second.npu_id, second.chip_id) == (7, 1)
    assert second.health == "Warning"
    assert second.power_w is None  # printed as NA
    assert second.temp_c == 45.0
    assert second.bus_id is None  # printed as NA
    assert (second.hbm_used_mb, second.hbm_total_mb) == (3318, 65536)


def test_usage_pair_without_space_before_slash() -> None:
    chip = parse_npu_smi_info(_text("910b_two_chips.txt")).chips[0]
    assert chip.aicore_pct == 37.0
    assert (chip.hbm_used_mb, chip.hbm_total_mb) == (59356, 65536)


def test_process_row() -> None:
    report = parse_npu_smi_info(_text("910b_two_chips.txt"))
    assert report.processes == [
        NpuProcess(
            npu_id=6, chip_id=0, pid=123456, name="python3", memory_mb=56030, pid_in_container=87
        )
    ]


def test_process_row_without_container_column() -> None:
    text = _text("910b.txt").replace(
        "| No running processes found in NPU 0",
        "| 0       0          | 4242          | mindie_llm         | 1024                  |",
    )
    report = parse_npu_smi_info(text)
    assert report.processes == [
        NpuProcess(
            npu_id=0, chip_id=0, pid=4242, name="mindie_llm", memory_mb=1024, pid_in_container=None
        )
    ]
    assert report.warnings == []


def test_metrics_attach_to_preceding_npu_row_for_second_chip() -> None:
    text = "\n".join(
        [
            "| 1   310P3 | OK      | 20.5   48   900 / 1000 |",
            "| 0   0     | 0000:01:00.0 | 3   100 / 44280   |",
            "| 1   1     | 0000:02:00.0 | 4   200 / 44280   |",
        ]
    )
    report = parse_npu_smi_info(text)
    assert report.warnings == []
    assert [(c.npu_id, c.chip_id, c.device_id) for c in report.chips] == [(1, 0, 0), (1, 1, 1)]
    assert all(c.temp_c == 48.0 and c.hugepages_used == 900 for c in report.chips)
    assert [c.memory_used_mb for c in report.chips] == [100, 200]


# --- parse_npu_smi_info: odd input ------------------------------------------------------


def test_empty_input_gives_empty_report_with_warning() -> None:
    for text in ("", "   \n\n"):
        report = parse_npu_smi_info(text)
        assert report.chips == []
        assert report.processes == []
        assert report.version is None
        assert len(report.warnings) == 1


def test_truncated_table_keeps_npu_row_and_warns() -> None:
    lines = _text("910b.txt").splitlines()
    cut = next(i for i, line in enumerate(lines) if "910B3" in line)
    report = parse_npu_smi_info("\n".join(lines[: cut + 1]))
    (chip,) = report.chips
    assert (chip.npu_id, chip.chip_id, chip.name, chip.temp_c) == (0, None, "910B3", 43.0)
    assert chip.hbm_total_mb is None
    assert any("no chip row" in w for w in report.warnings)


@pytest.mark.parametrize(
    "line",
    [
        "| garbage without columns |x",
        "| 0 910B3 | OK |",
        "| a | b | c | d | e |",
        "| 0  | 0000:C1:00.0 | 0 0 / 0 |",  # chip row with no NPU row before it
        "| 0 910B3 |  | 1 2 0 / 0 |",  # empty health
        "this is not a table line",
    ],
)
def test_malformed_lines_are_skipped_with_warning(line: str) -> None:
    text = line + "\n" + _text("310p3.txt")  # before any NPU row
    report = parse_npu_smi_info(line)
    assert report.warnings  # never raises, always says why
    full = parse_npu_smi_info(text)
    assert len(full.chips) == 1
    assert full.chips[0].memory_total_mb == 21534
    assert len(full.warnings) >= 1


def test_unknown_health_value_is_kept_and_warned() -> None:
    text = "| 0 910B3 | Melting | 1.0 2 0 / 0 |\n| 0 | NA | 0 0 / 0 1 / 2 |\n"
    report = parse_npu_smi_info(text)
    assert report.chips[0].health == "Melting"
    assert any("health" in w for w in report.warnings)


@pytest.mark.parametrize("text", ["|", "||||", "| | | |", "|\x00|\x00|", "+---+\n|+|"])
def test_junk_never_raises(text: str) -> None:
    report = parse_npu_smi_info(text)
    assert report.chips == []


def test_health_values_accepted_without_warning() -> None:
    for health in ("OK", "Warning", "Alarm", "Critical", "UNKNOWN"):
        text = f"| 0 310P3 | {health} | 1 2 0 / 0 |\n| 0 0 | NA | 0 0 / 0 |\n"
        report = parse_npu_smi_info(text)
        assert report.chips[0].health == health
        assert report.warnings == []


# --- parse_npu_smi_usages ---------------------------------------------------------------

USAGES = """\
        Memory Capacity(MB)            : 15079
        Memory Usage Rate(%)           : 6
        Hugepages Total(page)          : 0
        Hugepages Usage Rate(%)        : 0
        HBM Capacity(MB)               : 65536
        HBM Usage Rate(%)              : 5
        Aicore Usage Rate(%)           : 12.5
        Aivector Usage Rate(%)         : NA
        Chip ID                        : 0
"""


def test_usages_parsing() -> None:
    usages = parse_npu_smi_usages(USAGES)
    assert usages["Memory Capacity(MB)"] == 15079.0
    assert usages["HBM Capacity(MB)"] == 65536.0
    assert usages["HBM Usage Rate(%)"] == 5.0
    assert usages["Aicore Usage Rate(%)"] == 12.5
    assert usages["Aivector Usage Rate(%)"] == "NA"
    assert usages["Chip ID"] == 0.0
    assert len(usages) == 9


def test_usages_percent_sign_and_junk() -> None:
    assert parse_npu_smi_usages("NPU Utilization(%) : 42%\nno colon here\n : orphan\n") == {
        "NPU Utilization(%)": 42.0
    }
    assert parse_npu_smi_usages("") == {}


# --- read_devices -----------------------------------------------------------------------


class FakeRunner:
    """Stands in for subprocess.run and records its calls."""

    def __init__(self, *, stdout: str = "", stderr: str = "", code: int = 0, exc: Any = None):
        self.stdout, self.stderr, self.code, self.exc = stdout, stderr, code, exc
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append((args, kwargs))
        if self.exc is not None:
            raise self.exc
        return subprocess.CompletedProcess(args, self.code, self.stdout, self.stderr)


def _which_found(name: str) -> str | None:
    return f"/usr/local/bin/{name}"


def test_read_devices_without_npu_smi() -> None:
    runner = FakeRunner()
    result = read_devices(runner=runner, which=lambda name: None)
    assert result == {
        "available": False,
        "reason": "no Ascend NPU on this host (npu-smi not found)",
        "npus": [],
    }
    assert runner.calls == []


def test_read_devices_non_zero_exit() -> None:
    runner = FakeRunner(
        code=255, stderr="\ndcmi model initialized failed, because the device is used\n"
    )
    result = read_devices(runner=runner, which=_which_found)
    assert result["available"] is False
    assert result["npus"] == []
    assert "exit code 255" in result["reason"]
    assert "dcmi model initialized failed" in result["reason"]


def test_read_devices_timeout() -> None:
    runner = FakeRunner(exc=subprocess.TimeoutExpired(["npu-smi", "info"], 3))
    result = read_devices(runner=runner, which=_which_found, timeout=3)
    assert result == {
        "available": False,
        "reason": "npu-smi info did not answer within 3 s",
        "npus": [],
    }
    assert runner.calls[0][1]["timeout"] == 3


def test_read_devices_cannot_start() -> None:
    runner = FakeRunner(exc=PermissionError(13, "Permission denied"))
    result = read_devices(runner=runner, which=_which_found)
    assert result["available"] is False
    assert "could not be started" in result["reason"]


def test_read_devices_success() -> None:
    runner = FakeRunner(stdout=_text("910b_two_chips.txt"))
    result = read_devices(runner=runner, which=_which_found, usages=False, mapping=False)
    assert len(runner.calls) == 1
    args, kwargs = runner.calls[0]
    assert args == ["/usr/local/bin/npu-smi", "info"]
    assert kwargs["timeout"] == 15  # HOST_PROBE_TIMEOUT_SECONDS, unset here
    assert kwargs["check"] is False
    assert result["available"] is True
    assert result["version"] == "24.1.rc2"
    assert result["warnings"] == []
    assert [(n["npu_id"], n["chip_id"]) for n in result["npus"]] == [(6, 0), (7, 1)]
    assert result["npus"][0]["hbm_used_mb"] == 59356
    assert result["processes"] == [
        {
            "npu_id": 6,
            "chip_id": 0,
            "pid": 123456,
            "name": "python3",
            "memory_mb": 56030,
            "pid_in_container": 87,
        }
    ]


def test_the_probe_timeout_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from model_store.devices.reading import probe_timeout

    assert probe_timeout({}) == 15.0
    assert probe_timeout({"HOST_PROBE_TIMEOUT_SECONDS": "40"}) == 40.0
    assert probe_timeout({"HOST_PROBE_TIMEOUT_SECONDS": "x"}) == 15.0


def test_the_further_npu_smi_calls_run_one_after_another() -> None:
    """Huawei's npu-smi reference: npu-smi must not run several times at once."""
    import threading

    running, most = 0, 0
    lock = threading.Lock()
    samples = Path(__file__).resolve().parents[1] / "fakes" / "npu_smi_samples"
    table = (samples / "310p3_duo_npu-smi-25.2.0.txt").read_text()

    def runner(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return subprocess.CompletedProcess(argv, 0, stdout=table if argv[1:] == ["info"] else "")

    read_devices(runner=runner, which=lambda _: "/usr/local/sbin/npu-smi")
    assert most == 1

"""``npu-smi info -t usages`` per chip: parsing, merging into read_devices, the devices panel.

The usages samples follow the field sets docs/npu-smi.md#per-chip-usages lists for 310P and
910B (values are illustrative); the tables are the existing samples. No Ascend NPU on these
machines.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from model_store.devices import (
    device_memory,
    merge_usages,
    parse_npu_smi_usages,
    read_devices,
    usage_figures,
)
from tests.fixtures.hosts import worker_probes_host

SAMPLES = Path(__file__).parent / "npu_smi"
MALFORMED = "Memory Capacity(MB) 15039\n|| : ::\nHBM Usage Rate(%) : lots\nerror: -8005\n"


def _text(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


def test_910b_usages_figures() -> None:
    figures = usage_figures(parse_npu_smi_usages(_text("usages_910b.txt")))
    assert figures == {
        "memory_capacity_mb": 15039.0,
        "memory_pct": 6.0,
        "hbm_capacity_mb": 65536.0,
        "hbm_pct": 91.0,
        "aicore_pct": 37.0,
        "aivector_pct": 12.0,
        "aicpu_pct": 0.0,
        "ctrlcpu_pct": 2.0,
        "memory_bw_pct": 0.0,  # printed as "DDR Bandwidth Usage Rate(%)"
        "hbm_bw_pct": 14.0,
    }


def test_310p_usages_figures_have_no_hbm() -> None:
    figures = usage_figures(parse_npu_smi_usages(_text("usages_310p3.txt")))
    assert figures["memory_capacity_mb"] == 21534.0
    assert figures["memory_pct"] == 19.0
    assert figures["memory_bw_pct"] == 1.0
    assert "hbm_pct" not in figures and "aivector_pct" not in figures


def test_merge_fills_what_the_table_left_out_and_keeps_the_rest() -> None:
    # 910B tables print Memory-Usage as 0 / 0; usages give capacity and rate
    npu: dict[str, Any] = {
        "aicore_pct": None,
        "memory_used_mb": 0,
        "memory_total_mb": 0,
        "hbm_used_mb": 59356,
        "hbm_total_mb": 65536,
    }
    assert merge_usages(npu, parse_npu_smi_usages(_text("usages_910b.txt")))
    assert npu["aicore_pct"] == 37.0
    assert (npu["memory_used_mb"], npu["memory_total_mb"]) == (902, 15039)
    assert (npu["hbm_used_mb"], npu["hbm_total_mb"]) == (59356, 65536)  # table wins
    assert npu["usage"]["hbm_bw_pct"] == 14.0
    assert npu["usages"]["Chip ID"] == 0.0
    assert device_memory(npu) == {
        "kind": "HBM",
        "total_mb": 65536,
        "used_mb": 59356,
        "free_mb": 6180,
    }


def test_malformed_usages_merge_nothing_and_say_so() -> None:
    npu: dict[str, Any] = {"aicore_pct": 5.0, "memory_used_mb": 10, "memory_total_mb": 100}
    assert merge_usages(npu, parse_npu_smi_usages(MALFORMED)) is False
    assert npu["usage"] == {}
    assert "|| " not in "".join(npu["usages"])  # table debris is not kept as a key
    assert device_memory(npu) == {"kind": "memory", "total_mb": 100, "used_mb": 10, "free_mb": 90}
    assert device_memory({"memory_total_mb": 0, "hbm_total_mb": None}) is None


class Runner:
    """subprocess.run stand-in: the table for ``info``, per-chip text for ``-t usages``."""

    def __init__(self, table: str, usages: dict[str, Any]) -> None:
        self.table, self.usages = table, usages
        self.calls: list[list[str]] = []

    def __call__(self, args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        if "-t" not in args:
            return subprocess.CompletedProcess(args, 0, self.table, "")
        answer = self.usages[args[args.index("-i") + 1]]
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, tuple):
            return subprocess.CompletedProcess(args, answer[0], "", answer[1])
        return subprocess.CompletedProcess(args, 0, answer, "")


def _which(name: str) -> str:
    return f"/usr/bin/{name}"


def test_read_devices_asks_each_chip_for_its_usages() -> None:
    runner = Runner(
        _text("910b_two_chips.txt"),
        {"6": _text("usages_910b.txt"), "7": _text("usages_910b.txt").replace(": 91", ": 5")},
    )
    result = read_devices(runner=runner, which=_which, mapping=False)
    assert runner.calls[0] == ["/usr/bin/npu-smi", "info"]
    assert sorted(runner.calls[1:]) == [
        ["/usr/bin/npu-smi", "info", "-t", "usages", "-i", "6", "-c", "0"],
        ["/usr/bin/npu-smi", "info", "-t", "usages", "-i", "7", "-c", "1"],
    ]
    first, second = result["npus"]
    assert first["usage"]["hbm_pct"] == 91.0 and second["usage"]["hbm_pct"] == 5.0
    assert first["aicore_pct"] == 37.0  # the table's figure
    assert first["device_memory"]["free_mb"] == 65536 - 59356
    assert result["warnings"] == []


def test_310p_usages_through_read_devices() -> None:
    runner = Runner(_text("310p3.txt"), {"0": _text("usages_310p3.txt")})
    (chip,) = read_devices(runner=runner, which=_which)["npus"]
    assert chip["usage"]["memory_pct"] == 19.0
    assert chip["device_memory"] == {
        "kind": "memory",
        "total_mb": 21534,
        "used_mb": 4066,
        "free_mb": 17468,
    }


def test_usages_failures_are_warnings_not_errors() -> None:
    runner = Runner(
        _text("910b_two_chips.txt"),
        {"6": (255, "dcmi module initialize failed"), "7": subprocess.TimeoutExpired("x", 5)},
    )
    result = read_devices(runner=runner, which=_which)
    assert result["available"] is True
    assert [n["usage"] for n in result["npus"]] == [{}, {}]
    assert any("-i 6 -c 0 failed with exit code 255" in w for w in result["warnings"])
    assert any("-i 7 -c 1 did not answer" in w for w in result["warnings"])
    # the table's figures stand
    assert result["npus"][0]["hbm_used_mb"] == 59356


def test_malformed_usages_output_is_a_warning() -> None:
    runner = Runner(_text("310p3.txt"), {"0": MALFORMED})
    result = read_devices(runner=runner, which=_which)
    assert result["npus"][0]["memory_total_mb"] == 21534
    assert result["warnings"] == [
        "npu-smi info -t usages -i 0 -c 0 printed no usage figures that the hub knows."
    ]


def test_usages_can_be_skipped() -> None:
    runner = Runner(_text("310p3.txt"), {})
    result = read_devices(runner=runner, which=_which, usages=False)
    assert len(runner.calls) == 1
    assert "usage" not in result["npus"][0]
    assert result["npus"][0]["device_memory"]["free_mb"] == 17468


# --- the devices panel on the server page -------------------------------------------------


def _fake(tmp_path: Path, table: str, usages: str | None) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "npu-smi"
    usages_cmd = f"cat '{SAMPLES / usages}'" if usages else "echo 'garbage : :'"
    script.write_text(
        f'#!/bin/sh\nif [ "$2" = "-t" ]; then {usages_cmd}; else cat \'{SAMPLES / table}\'; fi\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


@pytest.fixture
def quiet(settings) -> None:
    settings.TRITON_URL = "127.0.0.1:9"


def test_panel_shows_usages_and_free_memory_910b(
    viewer_client: Client, quiet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _fake(tmp_path, "910b_two_chips.txt", "usages_910b.txt")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    worker_probes_host()
    page = viewer_client.get("/server/").content.decode()
    assert "npu-smi info -t usages" in page
    assert "Free for models" in page
    assert "6180 MB" in page  # 65536 - 59356 HBM on NPU 6
    assert "HBM BW 14.0 %" in page and "vector 12.0 %" in page
    assert "(91.0 %)" in page


def test_panel_310p_and_the_htmx_partial_refreshes(
    viewer_client: Client, quiet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _fake(tmp_path, "310p3.txt", "usages_310p3.txt")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    worker_probes_host()
    full = viewer_client.get("/server/").content.decode()
    assert 'hx-trigger="every 15s, live:server from:body"' in full
    partial = viewer_client.get("/server/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial
    assert "17468 MB" in partial and "mem BW 1.0 %" in partial


def test_panel_with_malformed_usages_shows_the_table_and_a_note(
    viewer_client: Client, quiet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _fake(tmp_path, "310p3.txt", None)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    worker_probes_host()
    page = viewer_client.get("/server/").content.decode()
    assert "310P3" in page and "4066 / 21534 MB" in page
    assert "printed no usage figures" in page


def test_panel_without_npu_smi(
    viewer_client: Client, quiet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    worker_probes_host()
    page = viewer_client.get("/server/").content.decode()
    assert "no Ascend NPU on this host" in page

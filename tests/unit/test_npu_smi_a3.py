"""Atlas A3 (910_93): the ``Chip  Phy-ID`` table, its family name ``Ascend910``, and the SoC.

The table is a real, public output (tests/fakes/npu_smi_samples/910_93_a3_x16_npu-smi-25.3.rc1.txt,
source in that folder's README.md): sixteen dies on eight NPUs, the second die of each NPU with
its power printed as ``-``. On this layout the exact SoC (``Ascend910_9391`` ...) is not in the
table, so the hub takes pyACL's ``acl.get_soc_name()`` (docs/npu-smi.md#the-info-table).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from model_store import spawn
from model_store.ascend.selftest.context import SelftestContext
from model_store.ascend.selftest.demo import DemoAssets
from model_store.ascend.selftest.hardware import detect_soc
from model_store.devices import (
    parse_npu_smi_info,
    parse_npu_smi_mapping,
    read_devices,
    soc_of_chip,
)
from model_store.store import ModelStore
from tests.unit.test_npu_smi_samples import A3_ROWS

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "fakes"
SAMPLES = FAKES / "npu_smi_samples"
FAKE_NPU_SMI = FAKES / "npu-smi"
A3 = "910_93_a3_x16_npu-smi-25.3.rc1.txt"

#: (npu id, chip id, device id, phy id, name, health, bus id, hbm used, hbm total)
A3_CHIPS = [
    (phy // 2, phy % 2, None, phy, "Ascend910", "OK", bus, hbm, 65536)
    for phy, (bus, hbm) in enumerate(A3_ROWS)
]
FIELDS = ("npu_id", "chip_id", "device_id", "phy_id", "name", "health", "bus_id",
          "hbm_used_mb", "hbm_total_mb")  # fmt: skip


def _fields(chip: Any) -> tuple[Any, ...]:
    get = chip.get if isinstance(chip, dict) else lambda key: getattr(chip, key)
    return tuple(get(key) for key in FIELDS)


def _a3_text() -> str:
    return (SAMPLES / A3).read_text(encoding="utf-8")


# --- the table ---------------------------------------------------------------------------


def test_a3_sample_gives_sixteen_dies_with_phy_ids_and_hbm() -> None:
    report = parse_npu_smi_info(_a3_text())
    assert report.warnings == []
    assert report.version == "25.3.rc1"
    assert [_fields(c) for c in report.chips] == A3_CHIPS
    # The memory pair is printed 0 / 0 on A3; the second die's power is "-".
    assert {(c.memory_used_mb, c.memory_total_mb) for c in report.chips} == {(0, 0)}
    assert [c.power_w for c in report.chips[:2]] == [166.9, None]
    assert [c.temp_c for c in report.chips[:2]] == [38.0, 37.0]


def test_a3_process_rows_with_an_empty_name_are_read() -> None:
    report = parse_npu_smi_info(_a3_text())
    rows = [(p.npu_id, p.chip_id, p.pid, p.name, p.memory_mb) for p in report.processes]
    assert rows == [
        (0, 0, 2173027, "", 43266),
        (0, 1, 2173030, "", 43266),
        (1, 0, 2173031, "", 43266),
        (1, 1, 2173032, "", 43266),
    ]


def test_other_layouts_have_no_phy_id() -> None:
    for name in ("310p3_atlas300ipro_npu-smi-25.5.1.txt", "910b4-1_x8_npu-smi-25.2.0.txt"):
        report = parse_npu_smi_info((SAMPLES / name).read_text(encoding="utf-8"))
        assert report.chips and all(c.phy_id is None for c in report.chips)


# --- the SoC the table names --------------------------------------------------------------


@pytest.mark.parametrize(
    ("chip", "soc"),
    [
        ({"name": "310P3"}, "Ascend310P3"),
        ({"name": "910B4-1"}, "Ascend910B4-1"),
        ({"name": "310"}, "Ascend310"),
        ({"name": "Ascend950"}, "Ascend950"),  # already prefixed: kept, never AscendAscend950
        ({"name": "Ascend910", "phy_id": 3}, None),  # A3: the family, not the SoC
        ({"name": "Ascend910"}, None),  # the same name from a report made before phy_id
        ({"name": "910B3", "phy_id": 0}, None),  # a Phy-ID table never names the SoC
        ({"name": ""}, None),
        ({}, None),
    ],
)
def test_soc_of_chip(chip: dict[str, Any], soc: str | None) -> None:
    assert soc_of_chip(chip) == soc


# --- the fake npu-smi with the A3 table ------------------------------------------------------


def _fake_run(sample: str):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FAKE_NPU_SMI_", "FAKE_NPU_OWNERS"))
    }
    env["FAKE_NPU_SMI_SAMPLE"] = sample

    def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        kwargs.setdefault("timeout", 30)
        return spawn.run([str(FAKE_NPU_SMI), *args[1:]], env=env, **kwargs)

    return run


def test_fake_npu_smi_prints_the_a3_sample_byte_for_byte() -> None:
    done = _fake_run(A3)(["npu-smi", "info"], capture_output=True, check=True)
    assert done.stdout == (SAMPLES / A3).read_bytes()


def test_fake_npu_smi_maps_the_a3_table_in_the_910_93_form() -> None:
    done = _fake_run(A3)(["npu-smi", "info", "-m"], capture_output=True, text=True, check=True)
    lines = done.stdout.splitlines()
    # print_mapping_info_910_93: five titles, the chip name as the table prints it.
    assert lines[0].split() == ["NPU", "ID", "Chip", "ID", "Chip", "Logic", "ID", "Chip",
                                "Phy-ID", "Chip", "Name"]  # fmt: skip
    assert lines[2].split() == ["0", "1", "1", "1", "Ascend910"]
    assert all(line.startswith("\t") for line in lines)
    mapping = parse_npu_smi_mapping(done.stdout)
    assert mapping == {(phy // 2, phy % 2): phy for phy in range(16)}


def test_read_devices_on_the_fake_a3_host() -> None:
    result = read_devices(runner=_fake_run(A3), which=lambda _: "npu-smi")
    assert result["available"] is True
    assert result["warnings"] == []
    # No Device column: the ids come from the fake's -m (made up: the place in the table).
    expected = [(*chip[:2], chip[3], *chip[3:]) for chip in A3_CHIPS]
    assert [_fields(n) for n in result["npus"]] == expected
    for npu in result["npus"]:
        assert npu["usage"]["hbm_capacity_mb"] == 65536.0


def test_fake_acl_names_an_a3_soc_not_the_family(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.acl import _host

    monkeypatch.delenv("FAKE_ACL_SOC", raising=False)
    monkeypatch.setenv("FAKE_NPU_SMI_SAMPLE", A3)
    assert _host.soc_name() == _host.A3_SOC == "Ascend910_9391"
    assert _host.logical_ids() == list(range(16))
    monkeypatch.setenv("FAKE_ACL_SOC", "Ascend910_9392")
    assert _host.soc_name() == "Ascend910_9392"
    monkeypatch.delenv("FAKE_ACL_SOC")
    monkeypatch.setenv("FAKE_NPU_SMI_SAMPLE", "910b4-1_x8_npu-smi-25.2.0.txt")
    assert _host.soc_name() == "Ascend910B4-1"


# --- the Nodes page: soc_of, with the serving side's pyACL as the fallback ------------------


def _report(soc: object) -> dict[str, Any]:
    return {"serving": {"available": True, "pyacl": {"working": True, "soc": soc}}}


def test_soc_of_a_named_chip_is_npu_smis() -> None:
    from webapp.nodes.summaries import soc_of

    assert soc_of([{"name": "310P3"}]) == "Ascend310P3"
    assert soc_of([{"name": "Ascend950"}]) == "Ascend950"
    # npu-smi's full name wins over what pyACL says (the self-test judges disagreements).
    assert soc_of([{"name": "310P3"}], _report("Ascend310P1")) == "Ascend310P3"


def test_soc_of_an_a3_node_is_the_serving_sides_pyacl_soc() -> None:
    from webapp.nodes.summaries import soc_of

    npus = [{"name": "Ascend910", "phy_id": 0}, {"name": "Ascend910", "phy_id": 1}]
    assert soc_of(npus) is None
    assert soc_of(npus, {}) is None
    assert soc_of(npus, _report(None)) is None
    assert soc_of(npus, {"serving": {"available": False, "reason": "down"}}) is None
    assert soc_of(npus, _report("Ascend910_9391")) == "Ascend910_9391"
    assert soc_of([{"name": "Ascend910"}], _report("Ascend910_9392")) == "Ascend910_9392"
    assert soc_of([], _report("Ascend310P3")) == "Ascend310P3"
    assert soc_of(npus, {"serving": "odd"}) is None
    assert soc_of(npus, _report(7)) is None


# --- the self-test's soc stage ------------------------------------------------------------


def _context(tmp_path: Path, npus: list[dict[str, Any]], pyacl: dict[str, Any]) -> SelftestContext:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    ctx = SelftestContext(
        env={"PATH": str(tmp_path / "empty-bin"), "HOME": str(tmp_path), "WORKER_NPU": "off"},
        store=ModelStore(tmp_path / "store"),
        runtime=None,
        demo=DemoAssets.from_checkout(ROOT / "demo"),
        scratch=scratch,
        ascend_root=tmp_path / "no-ascend",
    )
    ctx.facts.devices = {"available": True, "npus": npus}
    ctx.facts.serving = {"available": True, "pyacl": pyacl}  # the serving side's pyACL
    return ctx


def _a3_npus() -> list[dict[str, Any]]:
    from dataclasses import asdict

    return [asdict(c) for c in parse_npu_smi_info(_a3_text()).chips]


def test_selftest_soc_on_a3_is_pyacls(tmp_path: Path) -> None:
    pyacl = {"working": True, "soc": "Ascend910_9391", "device_count": 16}
    outcome = detect_soc(_context(tmp_path, _a3_npus(), pyacl))
    assert outcome.verdict == "passed", outcome.summary
    assert "Ascend910_9391" in outcome.summary
    assert outcome.evidence["from_npu_smi"] is None
    assert outcome.evidence["npu_smi_names_the_family_only"] is True
    assert outcome.evidence["from_pyacl"] == "Ascend910_9391"


def test_selftest_soc_on_a3_without_pyacl_says_the_table_names_the_family(
    tmp_path: Path,
) -> None:
    pyacl = {"working": False, "soc": None, "error": "acl.init returned 507008"}
    outcome = detect_soc(_context(tmp_path, _a3_npus(), pyacl))
    assert outcome.verdict == "failed"
    assert "Ascend910" in outcome.summary and "family" in outcome.summary
    assert "npu-smi info -t board" in outcome.next_step


def test_selftest_soc_still_compares_npu_smi_and_pyacl_elsewhere(tmp_path: Path) -> None:
    npus = [{"npu_id": 4, "chip_id": 0, "device_id": 0, "name": "310P3", "health": "OK"}]
    agree = detect_soc(_context(tmp_path, npus, {"working": True, "soc": "Ascend310P3"}))
    assert agree.verdict == "passed" and agree.evidence["from_npu_smi"] == "Ascend310P3"
    differ = detect_soc(_context(tmp_path, npus, {"working": True, "soc": "Ascend910B4"}))
    assert differ.verdict == "failed" and "disagree" in differ.summary

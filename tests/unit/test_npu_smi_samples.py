"""model_store.devices against real, public npu-smi outputs (tests/fakes/npu_smi_samples/).

Each expected chip is read off the sample by eye; the folder's README.md gives the source
of every file, and docs/npu-smi.md the layouts. The fake ``npu-smi`` that prints these
samples (tests/fakes/npu-smi) is exercised at the end, through ``read_devices``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from model_store import spawn
from model_store.devices import (
    device_memory,
    parse_npu_smi_info,
    parse_npu_smi_mapping,
    parse_npu_smi_usages,
    read_devices,
    usage_figures,
)

FAKES = Path(__file__).resolve().parents[1] / "fakes"
SAMPLES = FAKES / "npu_smi_samples"
FAKE_NPU_SMI = FAKES / "npu-smi"

#: The 910B4-1 host's bus ids and HBM in use, NPU by NPU.
B4_1_ROWS = [
    ("0000:C1:00.0", 12566), ("0000:C2:00.0", 59719), ("0000:81:00.0", 3448),
    ("0000:82:00.0", 3447), ("0000:01:00.0", 3444), ("0000:02:00.0", 3445),
    ("0000:41:00.0", 7952), ("0000:42:00.0", 17937),
]  # fmt: skip
#: The A3 host's bus ids and HBM in use, die by die (phy ids 0..15 in order).
A3_ROWS = [
    ("0000:9D:00.0", 46536), ("0000:9F:00.0", 46084), ("0000:99:00.0", 46528),
    ("0000:9B:00.0", 46096), ("0000:95:00.0", 3140), ("0000:97:00.0", 2885),
    ("0000:91:00.0", 3150), ("0000:93:00.0", 2874), ("0000:8D:00.0", 3157),
    ("0000:8F:00.0", 2874), ("0000:89:00.0", 3144), ("0000:8B:00.0", 2885),
    ("0000:85:00.0", 3156), ("0000:87:00.0", 2877), ("0000:81:00.0", 3157),
    ("0000:83:00.0", 2877),
]  # fmt: skip
#: (npu id, chip id, device id, name, health, bus id, memory used, total, hbm used, total)
EXPECTED: dict[str, tuple[str, list[tuple[Any, ...]]]] = {
    "310_atlas300i_npu-smi-21.0.4.txt": (
        "21.0.4.B030",
        [
            (6, 0, 3, "310", "OK", "0000:89:00.0", 2703, 8192, None, None),
            (6, 1, 4, "310", "OK", "0000:8A:00.0", 2867, 8192, None, None),
            (6, 2, 5, "310", "OK", "0000:8B:00.0", 2867, 8192, None, None),
            (6, 3, 6, "310", "OK", "0000:8C:00.0", 2867, 8192, None, None),
        ],
    ),
    "310p3_atlas300ipro_npu-smi-25.5.1.txt": (
        "25.5.1",
        [
            (4, 0, 0, "310P3", "OK", "0000:81:00.0", 1848, 21525, None, None),
            (5, 0, 1, "310P3", "OK", "0000:85:00.0", 1849, 21525, None, None),
        ],
    ),
    "310p3_duo_npu-smi-25.2.0.txt": (
        "25.2.0",
        [
            (2, 0, 0, "310P3", "OK", "0000:01:00.0", 1529, 44280, None, None),
            (2, 1, 1, "310P3", "OK", "0000:01:00.0", 1412, 43693, None, None),
        ],
    ),
    "910b4_npu-smi-24.1.rc1.txt": (
        "24.1.rc1",
        # HBM layout: no Device column, memory pair printed as 0 / 0
        [(0, 0, None, "910B4", "OK", "0000:82:00.0", 0, 0, 2773, 32768)],
    ),
    "910b4-1_x8_npu-smi-25.2.0.txt": (
        "25.2.0",
        # Eight single-die 910B4-1 of 64 GB: a SoC name with a suffix (Ascend910B4-1).
        [
            (npu, 0, None, "910B4-1", "OK", bus, 0, 0, hbm, 65536)
            for npu, (bus, hbm) in enumerate(B4_1_ROWS)
        ],
    ),
    "910_93_a3_x16_npu-smi-25.3.rc1.txt": (
        "25.3.rc1",
        # Atlas A3: two dies per NPU, row B's second number the Phy-ID (not a device id),
        # the name the family only ("Ascend910"); tests/unit/test_npu_smi_a3.py has the rest.
        [
            (phy // 2, phy % 2, None, "Ascend910", "OK", bus, 0, 0, hbm, 65536)
            for phy, (bus, hbm) in enumerate(A3_ROWS)
        ],
    ),
}
#: (npu id, chip id, pid, name, memory) of the samples that list processes.
EXPECTED_PROCESSES: dict[str, list[tuple[int, int, int, str, int]]] = {
    "910b4-1_x8_npu-smi-25.2.0.txt": [
        (0, 0, 2340, "llama-box-rpc-s", 111),
        (1, 0, 2357, "llama-box-rpc-s", 111),
        (1, 0, 2394858, "VLLMEngineCor", 56313),
        (2, 0, 2339, "llama-box-rpc-s", 111),
        (3, 0, 2337, "llama-box-rpc-s", 111),
        (4, 0, 2362, "llama-box-rpc-s", 111),
        (5, 0, 2367, "llama-box-rpc-s", 112),
        (6, 0, 2343, "llama-box-rpc-s", 111),
        (7, 0, 5284, "llama-box-rpc-s", 111),
        (7, 0, 2395206, "python", 13162),
        (7, 0, 2395167, "python", 1429),
    ],
    "910_93_a3_x16_npu-smi-25.3.rc1.txt": [
        (0, 0, 2173027, "", 43266),
        (0, 1, 2173030, "", 43266),
        (1, 0, 2173031, "", 43266),
        (1, 1, 2173032, "", 43266),
    ],
}


def _fields(chip: Any) -> tuple[Any, ...]:
    get = chip.get if isinstance(chip, dict) else lambda key: getattr(chip, key)
    return tuple(
        get(key)
        for key in (
            "npu_id",
            "chip_id",
            "device_id",
            "name",
            "health",
            "bus_id",
            "memory_used_mb",
            "memory_total_mb",
            "hbm_used_mb",
            "hbm_total_mb",
        )
    )


def test_every_table_sample_has_expectations() -> None:
    tables = {p.name for p in SAMPLES.glob("*.txt") if not p.name.startswith("usages_")}
    assert tables == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_sample_gives_exactly_its_chips(name: str) -> None:
    version, chips = EXPECTED[name]
    report = parse_npu_smi_info((SAMPLES / name).read_text(encoding="utf-8"))
    assert report.warnings == []
    assert report.version == version
    assert [_fields(c) for c in report.chips] == chips
    processes = [(p.npu_id, p.chip_id, p.pid, p.name, p.memory_mb) for p in report.processes]
    assert processes == EXPECTED_PROCESSES.get(name, [])


def test_310_row_a_with_a_numeric_name_is_not_a_chip_row() -> None:
    """``6       310`` is NPU 6 named 310 (row A), found by its health cell, not its digits."""
    report = parse_npu_smi_info((SAMPLES / "310_atlas300i_npu-smi-21.0.4.txt").read_text())
    assert {c.npu_id for c in report.chips} == {6}
    assert [c.temp_c for c in report.chips] == [73.0, 74.0, 70.0, 65.0]
    assert all((c.power_w, c.hugepages_total) == (12.8, 970) for c in report.chips)


def test_device_id_is_not_the_npu_id() -> None:
    report = parse_npu_smi_info((SAMPLES / "310p3_atlas300ipro_npu-smi-25.5.1.txt").read_text())
    assert [(c.npu_id, c.device_id) for c in report.chips] == [(4, 0), (5, 1)]


def test_crlf_sample_reads_like_lf() -> None:
    raw = (SAMPLES / "910b4_npu-smi-24.1.rc1.txt").read_bytes()
    assert b"\r\n" in raw
    report = parse_npu_smi_info(raw.decode())
    assert report.warnings == [] and len(report.chips) == 1


# --- the split layout (NPU id in its own cell) and layouts the hub does not know ----------

SPLIT_950 = """\
+--------+------------------+---------------+-----------------------------------------------------+
| NPU ID | Name             | Health        | Power(W)    Temp(C)           Hugepages-Usage(page) |
|        |                  | Bus-Id        | NPU Util(%) Memory-Usage(MB)  HBM-Usage(MB)         |
+========+==================+===============+=====================================================+
| 0      | Ascend950        | OK            | 300.5       40                0     / 0             |
|        |                  | 0000:01:00.0  | 3           0    / 0          1024  / 131072        |
+========+==================+===============+=====================================================+
+---------------------------+---------------+-----------------------------------------------------+
| NPU ID                    | Process id    | Process name             | Process memory(MB)       |
+===========================+===============+=====================================================+
| 0                          | 4242          | python3                  | 900                     |
+===========================+===============+=====================================================+
"""


def test_split_layout_rows_are_read_not_taken_for_processes() -> None:
    """Laid out as ``print_total_info_header_950`` and the NPU_SMI_V2 printf formats."""
    report = parse_npu_smi_info(SPLIT_950)
    assert report.warnings == []
    (chip,) = report.chips
    assert _fields(chip) == (0, None, None, "Ascend950", "OK", "0000:01:00.0", 0, 0, 1024, 131072)
    assert (chip.power_w, chip.temp_c, chip.aicore_pct) == (300.5, 40.0, 3.0)
    (process,) = report.processes
    assert (process.npu_id, process.chip_id, process.pid, process.memory_mb) == (0, None, 4242, 900)


def test_a3_phy_id_is_not_taken_for_the_device_id() -> None:
    text = (
        "| NPU   Name          | Health   | Power(W)  Temp(C)   Hugepages-Usage(page) |\n"
        "| Chip  Phy-ID        | Bus-Id   | AICore(%) Memory-Usage(MB) HBM-Usage(MB) |\n"
        "| 0     Ascend910     | OK       | -         35        0    / 0              |\n"
        "| 1     1             | 0000:9E:00.0 | 0     0    / 0  3159 / 65536          |\n"
    )
    (chip,) = parse_npu_smi_info(text).chips
    assert (chip.npu_id, chip.chip_id, chip.device_id, chip.power_w) == (0, 1, None, None)


@pytest.mark.parametrize(
    "text",
    [
        "| 6 | 310 | 0 | 7 | 8 |\n| 0 3 | 0000:89:00.0 | 0 2703 / 8192 | x | y | z |\n",
        "| NPU Name | Health |\n| 6 310 | 0000:89:00.0 | 0 |\n| 0 3 4 | 0000:89:00.0 | 0 |\n",
    ],
)
def test_an_unknown_layout_is_a_warning_not_wrong_chips(text: str) -> None:
    report = parse_npu_smi_info(text)
    assert report.chips == []
    assert any("layout the hub does not know" in w for w in report.warnings)


# --- npu-smi info -t usages ------------------------------------------------------------


def _usage_blocks(text: str) -> dict[int, str]:
    """The per-chip blocks of a card-wide ``-t usages`` report, by the Chip ID that ends each."""
    blocks = {}
    for block in re.split(r"\n\s*\n", text):
        chip = parse_npu_smi_usages(block).get("Chip ID")
        if isinstance(chip, float):
            blocks[int(chip)] = block
    return blocks


@pytest.mark.parametrize("tab", ["", "\t"], ids=["as-copied", "with-npu-smi-tab"])
def test_310p_ddr_usages_give_memory_figures(tab: str) -> None:
    text = (SAMPLES / "usages_310p3_duo_npu1.txt").read_text(encoding="utf-8")
    text = "\n".join(tab + line if line else line for line in text.splitlines())
    blocks = _usage_blocks(text)
    assert sorted(blocks) == [0, 1]
    first, second = (usage_figures(parse_npu_smi_usages(blocks[i])) for i in (0, 1))
    assert (first["memory_capacity_mb"], first["memory_pct"]) == (44280.0, 3.0)
    assert (second["memory_capacity_mb"], second["memory_pct"]) == (43693.0, 3.0)
    assert first["memory_bw_pct"] == 51.0 and first["ctrlcpu_pct"] == 2.0
    assert "hbm_pct" not in first


# --- the fake npu-smi printing these samples -------------------------------------------


def _fake_run(sample: str | None, usages: str | None = None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NPU_SMI_")}
    if sample:
        env["FAKE_NPU_SMI_SAMPLE"] = sample
    if usages:
        env["FAKE_NPU_SMI_USAGES"] = usages

    def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        kwargs.setdefault("timeout", 30)
        return spawn.run([str(FAKE_NPU_SMI), *args[1:]], env=env, **kwargs)

    return run


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fake_npu_smi_prints_the_sample_and_usages_that_fit_it(name: str) -> None:
    result = read_devices(runner=_fake_run(name), which=lambda _: "npu-smi")
    assert result["available"] is True
    assert result["warnings"] == []
    expected = EXPECTED[name][1]
    if name.startswith(("910b4", "910_93")):  # no Device column: the ids come from -m
        expected = [(*chip[:2], logical, *chip[3:]) for logical, chip in enumerate(expected)]
    assert [_fields(n) for n in result["npus"]] == expected
    for npu in result["npus"]:
        assert npu["usage"]  # the made-up report has the chip kind's keys
        memory = device_memory(npu)
        assert memory is not None and memory["total_mb"] > 0


def test_fake_npu_smi_prints_the_sample_byte_for_byte() -> None:
    for name in EXPECTED:
        done = spawn.run(
            [str(FAKE_NPU_SMI), "info"],
            env={**os.environ, "FAKE_NPU_SMI_SAMPLE": name},
            capture_output=True,
            check=True,
            timeout=30,
        )
        assert done.stdout == (SAMPLES / name).read_bytes()


def test_fake_npu_smi_default_is_the_310p3_pair() -> None:
    result = read_devices(runner=_fake_run(None), which=lambda _: "npu-smi")
    assert [(n["npu_id"], n["device_id"]) for n in result["npus"]] == [(4, 0), (5, 1)]


def test_fake_npu_smi_with_a_saved_usages_report_gives_each_chip_its_block() -> None:
    result = read_devices(
        runner=_fake_run("310p3_duo_npu-smi-25.2.0.txt", "usages_310p3_duo_npu1.txt"),
        which=lambda _: "npu-smi",
    )
    assert result["warnings"] == []
    assert [n["usage"]["memory_capacity_mb"] for n in result["npus"]] == [44280.0, 43693.0]
    assert [n["usage"]["ctrlcpu_pct"] for n in result["npus"]] == [2.0, 3.0]


def test_fake_npu_smi_maps_the_310_table_to_its_device_column() -> None:
    done = _fake_run("310_atlas300i_npu-smi-21.0.4.txt")(
        ["npu-smi", "info", "-m"], capture_output=True, text=True, check=True
    )
    assert parse_npu_smi_mapping(done.stdout) == {(6, 0): 3, (6, 1): 4, (6, 2): 5, (6, 3): 6}


def test_fake_npu_smi_refuses_what_it_does_not_fake() -> None:
    run = _fake_run(None)
    assert run(["npu-smi", "info", "-l"], capture_output=True).returncode != 0
    done = run(["npu-smi", "info", "-t", "usages", "-i", "9", "-c", "0"], capture_output=True)
    assert done.returncode != 0


# --- npu-smi info -m: device ids where the table prints none --------------------------------

#: ``print_mapping_info``'s layout (a title line, then one tab-led line per chip; the MCU
#: has ``-`` for its logical id); the ids are those of tests/unit/npu_smi/910b_two_chips.txt.
MAPPING = (
    "\tNPU ID                         Chip ID                        Chip Logic ID"
    "                  Chip Name                     \n"
    "\t6                              0                              0"
    "                              Ascend 910B1\n"
    "\t6                              1                              -"
    "                              Mcu                           \n"
    "\t7                              1                              1"
    "                              Ascend 910B1\n"
)


def test_mapping_parsing_skips_the_mcu_and_the_title() -> None:
    assert parse_npu_smi_mapping(MAPPING) == {(6, 0): 0, (7, 1): 1}
    assert parse_npu_smi_mapping("") == {}
    assert parse_npu_smi_mapping("6 0 0 before any title\n") == {}
    a3 = "\tNPU ID Chip ID Chip Logic ID Chip Phy-ID Chip Name\n\t0 1 1 9 Ascend910\n"
    assert parse_npu_smi_mapping(a3) == {(0, 1): 1}


def _table_and(mapping: str | tuple[int, str]):
    table = (Path(__file__).parent / "npu_smi" / "910b_two_chips.txt").read_text()
    calls: list[list[str]] = []

    def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        if args[1:] == ["info", "-m"]:
            if isinstance(mapping, tuple):
                return subprocess.CompletedProcess(args, mapping[0], "", mapping[1])
            return subprocess.CompletedProcess(args, 0, mapping, "")
        return subprocess.CompletedProcess(args, 0, table, "")

    return run, calls


def test_hbm_layout_device_ids_come_from_the_mapping() -> None:
    run, calls = _table_and(MAPPING)
    result = read_devices(runner=run, which=lambda _: "/x/npu-smi", usages=False)
    assert calls == [["/x/npu-smi", "info"], ["/x/npu-smi", "info", "-m"]]
    assert [(n["npu_id"], n["chip_id"], n["device_id"]) for n in result["npus"]] == [
        (6, 0, 0),
        (7, 1, 1),
    ]
    assert result["warnings"] == []


def test_mapping_failure_or_gap_is_a_warning() -> None:
    run, _ = _table_and((255, "dcmi module initialize failed"))
    result = read_devices(runner=run, which=lambda _: "npu-smi", usages=False)
    assert [n["device_id"] for n in result["npus"]] == [None, None]
    assert result["warnings"] == [
        "npu-smi info -m failed with exit code 255: dcmi module initialize failed; "
        "the device ids are not known."
    ]
    run, _ = _table_and(MAPPING.replace("\t7  ", "\t8  "))
    result = read_devices(runner=run, which=lambda _: "npu-smi", usages=False)
    assert [n["device_id"] for n in result["npus"]] == [0, None]
    assert result["warnings"] == [
        "npu-smi info -m gave no Chip Logic ID for NPU 7 chip 1; its device id is not known."
    ]


def test_310_layout_needs_no_mapping_call() -> None:
    text = (SAMPLES / "310_atlas300i_npu-smi-21.0.4.txt").read_text()
    calls: list[list[str]] = []

    def run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        return subprocess.CompletedProcess(args, 0, text, "")

    read_devices(runner=run, which=lambda _: "npu-smi", usages=False)
    assert calls == [["npu-smi", "info"]]


def test_memory_estimate_places_chips_by_device_id_not_npu_id() -> None:
    from webapp.registry.serving.memory import _device_id

    report = parse_npu_smi_info((SAMPLES / "310p3_atlas300ipro_npu-smi-25.5.1.txt").read_text())
    assert [_device_id({"npu_id": c.npu_id, "device_id": c.device_id}) for c in report.chips] == [
        0,
        1,
    ]
    assert _device_id({"npu_id": 6, "device_id": None}) == 6  # unknown: the NPU id stands in

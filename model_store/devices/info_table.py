"""Read the ``npu-smi info`` table: its row kinds and layouts (Django-free).

``npu-smi info`` prints a box-drawn table. Each chip takes two rows:

* row A: ``NPU Name | Health | Power(W) Temp(C) Hugepages used / total``
* row B: ``Chip [Device|Phy-ID] | Bus-Id (or NA) | AICore(%) Memory used / total [HBM ...]``

Rows are told apart by what their cells hold, not by whether the first cell is numeric:
an Ascend 310 row A reads ``6       310`` (NPU id, then the name ``310``). ``Device`` is the
chip's logical id, the number ``aclrtSetDevice`` takes; the HBM layout (910, 910B) prints
none, and Atlas A3 (``Chip  Phy-ID``) prints the physical id there instead, with the family
name ``Ascend910`` for the chip (:func:`soc_of_chip`). The metrics of row B attach to the
preceding row A (the chip id may differ from the NPU id). A process table may follow, with rows
``| <npu> <chip> | <pid> | <name> | <MB> | <pid in container> |`` or the line
``No running processes found in NPU N``. Newer builds split the first cell
(``| <npu id> | <name> | <health> | ...``); that form is read too. The layouts and their
source are in docs/npu-smi.md.

The parser never raises on odd input: lines it cannot read are skipped and reported
in :attr:`NpuSmiReport.warnings`.

Example:
    >>> report = parse_npu_smi_info("")
    >>> report.chips, [str(w) for w in report.warnings]
    ([], ['npu-smi printed nothing; no NPU table to read.'])
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from model_store.text import Said, say

__all__ = [
    "HEALTH_VALUES",
    "NpuChip",
    "NpuProcess",
    "NpuSmiReport",
    "parse_npu_smi_info",
    "soc_of_chip",
]

#: Health values documented for npu-smi.
HEALTH_VALUES = frozenset({"OK", "Warning", "Alarm", "Critical", "UNKNOWN"})

_PAIR_RE = re.compile(r"(\d+)\s*/\s*(\d+)")
_VERSION_RE = re.compile(r"Version:\s*(\S+)", re.IGNORECASE)
_SMI_VERSION_RE = re.compile(r"npu-smi\s+(\S+)", re.IGNORECASE)
_NO_PROCESS_RE = re.compile(r"No running processes found in NPU\s+(\d+)", re.IGNORECASE)
#: First words of npu-smi's column-title rows.
_HEADER_WORDS = frozenset({"NPU", "Chip"})
_MISSING = frozenset({"NA", "N/A", "-", "--", ""})
_NO_BUS = frozenset({"NA", "N/A"})
#: A PCIe address as npu-smi prints it (``%04X:%02X:%02X.%X``).
_BUS_ID_RE = re.compile(r"^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]+$")
#: Names that are a chip family, not a SoC: an Atlas A3 (910_93) table prints ``Ascend910``
#: for every die; its SoC (``Ascend910_9391`` ...) is not in the table (docs/npu-smi.md).
_FAMILY_NAMES = frozenset({"Ascend910"})


@dataclass
class NpuChip:
    """One chip as shown by ``npu-smi info`` (row A of its NPU plus its row B).

    Attributes:
        npu_id: NPU id (first column of row A).
        chip_id: Chip id (first column of row B); ``None`` when row B is missing.
        device_id: The chip's logical id: the ``Device`` column that the 310 layout (310, 310P)
            prints next to the chip id. It is the id ``aclrtSetDevice`` takes (and the
            ``device_id``/``device_ids`` of the acl and npu_ge targets), and it need not equal
            the NPU id. ``None`` in the HBM layout (910, 910B), which does not print it.
        name: Chip name such as ``310P3`` or ``910B3``.
        health: ``OK``, ``Warning``, ``Alarm``, ``Critical`` or ``UNKNOWN``.
        power_w: Power draw in watts, ``None`` when shown as NA.
        temp_c: Temperature in degrees Celsius.
        hugepages_used: Hugepages in use (pages).
        hugepages_total: Hugepages available (pages).
        bus_id: PCIe bus id, ``None`` when shown as NA.
        aicore_pct: AI Core usage in percent.
        memory_used_mb: Memory in use (MB).
        memory_total_mb: Memory capacity (MB).
        hbm_used_mb: HBM in use (MB), 910-series only.
        hbm_total_mb: HBM capacity (MB), 910-series only.
        phy_id: The chip's physical id, the second number of row B under an Atlas A3
            ``Chip  Phy-ID`` title; ``None`` in every other layout. Its presence says the
            name is the family (``Ascend910``), not the SoC.
    """

    npu_id: int
    chip_id: int | None
    device_id: int | None
    name: str
    health: str
    power_w: float | None = None
    temp_c: float | None = None
    hugepages_used: int | None = None
    hugepages_total: int | None = None
    bus_id: str | None = None
    aicore_pct: float | None = None
    memory_used_mb: int | None = None
    memory_total_mb: int | None = None
    hbm_used_mb: int | None = None
    hbm_total_mb: int | None = None
    phy_id: int | None = None


@dataclass
class NpuProcess:
    """One row of the npu-smi process table.

    Attributes:
        npu_id: NPU the process runs on.
        chip_id: Chip the process runs on; ``None`` in the split layout, which omits it.
        pid: Process id on the host.
        name: Process name.
        memory_mb: Device memory the process holds (MB).
        pid_in_container: Process id inside its container, ``None`` when not shown.
    """

    npu_id: int
    chip_id: int | None
    pid: int
    name: str
    memory_mb: int | None
    pid_in_container: int | None


@dataclass
class NpuSmiReport:
    """Everything read from one ``npu-smi info`` output.

    Attributes:
        version: Driver version from the title row (``Version: x``), else the npu-smi version.
        chips: Chips in the order printed.
        processes: Rows of the process table.
        warnings: Plain-words notes about lines that could not be read.
    """

    version: str | None = None
    chips: list[NpuChip] = field(default_factory=list)
    processes: list[NpuProcess] = field(default_factory=list)
    warnings: list[Said] = field(default_factory=list)


def _to_int(token: str) -> int | None:
    """Return ``token`` as an int, or ``None`` when it is not a whole number."""
    try:
        return int(token)
    except ValueError:
        return None


def _to_float(token: str) -> float | None:
    """Return ``token`` as a float (``%`` stripped), or ``None`` for NA and non-numbers."""
    token = token.strip().rstrip("%").strip()
    if token in _MISSING:
        return None
    try:
        return float(token)
    except ValueError:
        return None


def _metrics(cell: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Split a metrics cell into the loose tokens before the first pair and the usage pairs."""
    pairs = [(int(a), int(b)) for a, b in _PAIR_RE.findall(cell)]
    first = _PAIR_RE.search(cell)
    head = cell[: first.start()] if first else cell
    return head.split(), pairs


def _ints(cell: str) -> list[int] | None:
    """The whole numbers of ``cell`` (split on spaces), or ``None`` if any token is not one."""
    tokens = cell.split()
    values = [_to_int(t) for t in tokens]
    if not tokens or any(v is None for v in values):
        return None
    return [v for v in values if v is not None]


def _is_bus_cell(cell: str) -> bool:
    """True for a ``Bus-Id`` cell: a PCIe address, or ``NA`` on boards without PCIe."""
    return cell.upper() in _NO_BUS or bool(_BUS_ID_RE.match(cell))


def _is_header(cells: list[str]) -> bool:
    """True for the column-title rows (``NPU Name | Health ...``, ``Chip Device | Bus-Id``)."""
    first = cells[0].split()
    if first and first[0] in _HEADER_WORDS:
        return True
    return not first and any(cell.split()[:1] == ["Bus-Id"] for cell in cells)


def _row_kind(cells: list[str]) -> str:
    """What one table row is, judged by what each cell holds (docs/npu-smi.md#the-info-table).

    ``"a"``: ``<npu id> <name> | <health> | ...`` (row A; the name may be a number, ``310``).
    ``"b"``: ``<chip id> [<second id>] | <bus id or NA> | ...`` (row B).
    ``"split-a"``: ``<npu id> | <name> | <health> | ...`` (the newer split layout).
    ``"split-b"``: ``| | <bus id> | ...`` (the split layout's row B, no ids).
    ``"process"``: ``<npu id> [<chip id>] | <pid> | <name> | <MB> [| <pid in container>]``.
    ``""``: none of these.
    """
    ids = _ints(cells[0])
    if len(cells) == 3:
        if ids is not None and len(ids) <= 2 and _is_bus_cell(cells[1]):
            return "b"
        head = cells[0].split()
        if (
            len(head) >= 2
            and _to_int(head[0]) is not None
            and cells[1]
            and not cells[1][0].isdigit()
        ):
            return "a"
        return ""
    if len(cells) == 4 and not cells[0] and not cells[1] and _is_bus_cell(cells[2]):
        return "split-b"
    if ids is None or len(ids) > 2:
        return ""
    if len(cells) in (4, 5) and _to_int(cells[1]) is not None:
        return "process"
    if len(cells) == 4 and len(ids) == 1 and cells[1] and cells[2] and _PAIR_RE.search(cells[3]):
        return "split-a"
    return ""


def _parse_row_a(npu_id: int, name: str, health: str, metrics: str) -> NpuChip:
    """Row A's figures: ``Power(W) Temp(C) Hugepages used / total``."""
    tokens, pairs = _metrics(metrics)
    chip = NpuChip(npu_id=npu_id, chip_id=None, device_id=None, name=name, health=health)
    if tokens:
        chip.power_w = _to_float(tokens[0])
    if len(tokens) > 1:
        chip.temp_c = _to_float(tokens[1])
    if pairs:
        chip.hugepages_used, chip.hugepages_total = pairs[0]
    return chip


def _apply_row_b(
    chip: NpuChip, chip_id: int | None, device_id: int | None, bus: str, metrics: str
) -> None:
    """Fill ``chip`` from row B: ids, bus id, ``AICore(%) Memory used / total [HBM ...]``."""
    chip.chip_id = chip_id
    chip.device_id = device_id
    chip.bus_id = None if bus.upper() in _NO_BUS else bus
    tokens, pairs = _metrics(metrics)
    chip.aicore_pct = _to_float(tokens[0]) if tokens else None
    if pairs:
        chip.memory_used_mb, chip.memory_total_mb = pairs[0]
    if len(pairs) > 1:
        chip.hbm_used_mb, chip.hbm_total_mb = pairs[1]


def _parse_process(cells: list[str]) -> NpuProcess | None:
    """Read ``<npu> [<chip>] | <pid> | <name> | <MB> [| <pid in container>]``."""
    ids = _ints(cells[0])
    pid = _to_int(cells[1])
    if ids is None or pid is None:
        return None
    memory = _to_float(cells[3]) if len(cells) > 3 else None
    in_ctr = _to_int(cells[4]) if len(cells) > 4 else None
    return NpuProcess(
        npu_id=ids[0],
        chip_id=ids[1] if len(ids) > 1 else None,
        pid=pid,
        name=cells[2],
        memory_mb=None if memory is None else int(memory),
        pid_in_container=in_ctr,
    )


def soc_of_chip(chip: Mapping[str, Any]) -> str | None:
    """ATC's ``--soc_version`` as npu-smi's table names this chip, or None where it does not.

    ``"Ascend"`` + the ``Name`` column (``310P3`` -> ``Ascend310P3``,
    docs/atc.md#soc-versions); a name that already starts with ``Ascend`` is kept as it is.
    None without a name, and on an Atlas A3 table (a ``phy_id``, or the family name
    ``Ascend910``), which names the family and not the SoC (``Ascend910_9391``, ...): there
    pyACL's ``acl.get_soc_name()`` is the one to ask.

    Args:
        chip: One chip of a devices report (the fields of :class:`NpuChip`).

    Example:
        >>> soc_of_chip({"name": "310P3"}), soc_of_chip({"name": "Ascend910", "phy_id": 3})
        ('Ascend310P3', None)
    """
    name = str(chip.get("name") or "").strip()
    if not name or chip.get("phy_id") is not None:
        return None
    soc = name if name.startswith("Ascend") else f"Ascend{name}"
    return None if soc in _FAMILY_NAMES else soc


def _second_id_column(cells: list[str]) -> str | None:
    """From the ``Chip ...`` title row: what row B's second number is (``Device``, ``Phy-ID``)."""
    words = cells[0].split()
    if words[:1] != ["Chip"]:
        return None
    return words[1] if len(words) > 1 else ""


def parse_npu_smi_info(text: str) -> NpuSmiReport:
    """Parse the output of ``npu-smi info`` (310, 310P, 910/910B and the split layout).

    Each row is read by what its cells hold, as npu-smi's printing code lays them out
    (docs/npu-smi.md#the-info-table): row A has the NPU id and the chip name in its first cell
    (the name can be a number: ``6       310``) and a health word in the second; row B has the
    chip id (and, in the 310 layout, the device's logical id) in the first and a bus id or
    ``NA`` in the second; process rows have a process id in the second. In the split layout
    (``| <npu id> | <name> | <health> | ...``) row B has no ids. A row that fits none of
    these is skipped with a warning, never guessed at.

    Args:
        text: The whole standard output of ``npu-smi info``.

    Returns:
        The chips, processes and version found, plus a warning for each line that
        could not be read. Never raises on malformed input.

    Example:
        >>> out = '''
        ... | 6       310       | OK              | 12.8    73    0 / 970  |
        ... | 1       4         | 0000:8A:00.0    | 0       2867 / 8192     |
        ... '''
        >>> chip = parse_npu_smi_info(out).chips[0]
        >>> chip.npu_id, chip.name, chip.chip_id, chip.device_id, chip.memory_total_mb
        (6, '310', 1, 4, 8192)
    """
    report = NpuSmiReport()
    if not text or not text.strip():
        report.warnings.append(say("npu-smi printed nothing; no NPU table to read."))
        return report

    pending: NpuChip | None = None  # row A seen, row B not yet
    last: NpuChip | None = None  # last row A, for a row B that follows another row B
    second_id = "Device"  # what row B's second number is; the title row says
    unread = 0

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            report.chips.append(pending)
            report.warnings.append(
                say("NPU %(npu)s has no chip row (Chip | Bus-Id | AICore); its memory figures "
                    "are unknown.", npu=pending.npu_id)
            )  # fmt: skip
            pending = None

    def skip(number: int, line: Said, why: Said) -> None:
        nonlocal unread
        unread += 1
        report.warnings.append(
            say("line %(number)s %(why)s; skipped: %(line)s", number=number, why=why,
                line=repr(line))
        )  # fmt: skip

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("+"):
            continue
        if not line.startswith("|"):
            if line.startswith("[WARNING]"):  # npu-smi's own note under the table
                report.warnings.append(say("npu-smi says: %(line)s", line=line))
            else:
                report.warnings.append(
                    say("line %(number)s is not part of the table, skipped: %(line)s",
                        number=number, line=repr(line))
                )  # fmt: skip
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]

        if len(cells) == 1:
            cell = cells[0]
            if _NO_PROCESS_RE.search(cell):
                continue
            version = _VERSION_RE.search(cell) or _SMI_VERSION_RE.search(cell)
            if version:
                report.version = version.group(1)
                continue
            skip(number, line, say("could not be read"))
            continue

        if _is_header(cells):
            column = _second_id_column(cells)
            if column is not None:
                second_id = column
            continue

        kind = _row_kind(cells)
        if kind == "process":
            process = _parse_process(cells)
            if process is not None:
                report.processes.append(process)
            continue

        if kind in ("a", "split-a"):
            if kind == "a":
                head = cells[0].split()
                chip = _parse_row_a(int(head[0]), " ".join(head[1:]), cells[1], cells[2])
            else:
                chip = _parse_row_a(int(cells[0]), cells[1], cells[2], cells[3])
            flush()
            if chip.health not in HEALTH_VALUES:
                report.warnings.append(
                    say("NPU %(npu)s reports an unknown health value %(health)s.",
                        npu=chip.npu_id, health=repr(chip.health))
                )  # fmt: skip
            pending = last = chip
            continue

        if kind in ("b", "split-b"):
            if kind == "b":
                ids = _ints(cells[0]) or []
                bus, metrics = cells[1], cells[2]
            else:
                ids, bus, metrics = [], cells[2], cells[3]
            chip_id = ids[0] if ids else None
            device_id = phy_id = None
            if len(ids) > 1:
                if second_id == "Device":
                    device_id = ids[1]
                elif second_id == "Phy-ID":
                    phy_id = ids[1]
                else:
                    report.warnings.append(
                        say("line %(number)s: the chip row has a second id but the title row "
                            "names no Device column (%(columns)s); device id left unknown.",
                            number=number, columns=repr(second_id or "just Chip"))
                    )  # fmt: skip
            if pending is not None:
                target, pending = pending, None
            elif last is not None:
                target = NpuChip(
                    npu_id=last.npu_id,
                    chip_id=None,
                    device_id=None,
                    name=last.name,
                    health=last.health,
                    power_w=last.power_w,
                    temp_c=last.temp_c,
                    hugepages_used=last.hugepages_used,
                    hugepages_total=last.hugepages_total,
                )
            else:
                skip(number, line, say("is a chip row without an NPU row before it"))
                continue
            _apply_row_b(target, chip_id, device_id, bus, metrics)
            target.phy_id = phy_id
            report.chips.append(target)
            continue

        skip(number, line, say("fits no row kind of the npu-smi layouts (%(count)s columns)",
                               count=len(cells)))  # fmt: skip

    flush()
    if not report.chips:
        report.warnings.append(
            say("no NPU rows were found in the npu-smi output (%(count)s table line(s) in a "
                "layout the hub does not know; see docs/npu-smi.md#the-info-table).",
                count=unread)
            if unread
            else say("no NPU rows were found in the npu-smi output.")
        )  # fmt: skip
    return report

"""Read the state of Ascend NPUs from ``npu-smi`` output (Django-free).

``npu-smi info`` prints a box-drawn table. Each chip takes two rows:

* row A: ``NPU Name | Health | Power(W) Temp(C) Hugepages used / total``
* row B: ``Chip [Device] | Bus-Id (or NA) | AICore(%) Memory used / total [HBM used / total]``

The metrics of row B attach to the preceding row A (the chip id may differ from the
NPU id). A process table may follow, with rows
``| <npu> <chip> | <pid> | <name> | <MB> | <pid in container> |`` or the line
``No running processes found in NPU N``.

The parsers never raise on odd input: lines they cannot read are skipped and reported
in :attr:`NpuSmiReport.warnings`.

Example:
    >>> report = parse_npu_smi_info("")
    >>> report.chips, report.warnings
    ([], ['npu-smi printed nothing; no NPU table to read.'])
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "HEALTH_VALUES",
    "NpuChip",
    "NpuProcess",
    "NpuSmiReport",
    "parse_npu_smi_info",
    "parse_npu_smi_usages",
    "read_devices",
]

#: Health values documented for npu-smi.
HEALTH_VALUES = frozenset({"OK", "Warning", "Alarm", "Critical", "UNKNOWN"})

_PAIR_RE = re.compile(r"(\d+)\s*/\s*(\d+)")
_VERSION_RE = re.compile(r"Version:\s*(\S+)", re.IGNORECASE)
_SMI_VERSION_RE = re.compile(r"npu-smi\s+(\S+)", re.IGNORECASE)
_NO_PROCESS_RE = re.compile(r"No running processes found in NPU\s+(\d+)", re.IGNORECASE)
_HEADER_WORDS = frozenset({"NPU", "Chip"})
_MISSING = frozenset({"NA", "N/A", "-", "--", ""})


@dataclass
class NpuChip:
    """One chip as shown by ``npu-smi info`` (row A of its NPU plus its row B).

    Attributes:
        npu_id: NPU id (first column of row A).
        chip_id: Chip id (first column of row B); ``None`` when row B is missing.
        device_id: Device id (310P layouts print it next to the chip id).
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


@dataclass
class NpuProcess:
    """One row of the npu-smi process table.

    Attributes:
        npu_id: NPU the process runs on.
        chip_id: Chip the process runs on.
        pid: Process id on the host.
        name: Process name.
        memory_mb: Device memory the process holds (MB).
        pid_in_container: Process id inside its container, ``None`` when not shown.
    """

    npu_id: int
    chip_id: int
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
    warnings: list[str] = field(default_factory=list)


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


def _parse_row_a(cells: list[str]) -> NpuChip | None:
    """Read row A (``NPU Name | Health | Power Temp Hugepages``); ``None`` if it is not one."""
    head = cells[0].split()
    if len(head) < 2:
        return None
    npu_id = _to_int(head[0])
    if npu_id is None:
        return None
    health = cells[1].strip()
    if not health:
        return None
    tokens, pairs = _metrics(cells[2])
    chip = NpuChip(
        npu_id=npu_id,
        chip_id=None,
        device_id=None,
        name=" ".join(head[1:]),
        health=health,
    )
    if tokens:
        chip.power_w = _to_float(tokens[0])
    if len(tokens) > 1:
        chip.temp_c = _to_float(tokens[1])
    if pairs:
        chip.hugepages_used, chip.hugepages_total = pairs[0]
    return chip


def _apply_row_b(chip: NpuChip, ids: list[int], cells: list[str]) -> None:
    """Fill ``chip`` with the ids and metrics of row B (``Chip [Device] | Bus-Id | ...``)."""
    chip.chip_id = ids[0]
    chip.device_id = ids[1] if len(ids) > 1 else None
    bus = cells[1].strip()
    chip.bus_id = None if bus.upper() in _MISSING else bus
    tokens, pairs = _metrics(cells[2])
    chip.aicore_pct = _to_float(tokens[0]) if tokens else None
    if pairs:
        chip.memory_used_mb, chip.memory_total_mb = pairs[0]
    if len(pairs) > 1:
        chip.hbm_used_mb, chip.hbm_total_mb = pairs[1]


def _parse_process(cells: list[str]) -> NpuProcess | None:
    """Read a process row ``<npu> <chip> | <pid> | <name> | <MB> | <pid in ctr>``."""
    ids = [_to_int(t) for t in cells[0].split()]
    if len(ids) != 2 or ids[0] is None or ids[1] is None:
        return None
    pid = _to_int(cells[1].strip())
    if pid is None:
        return None
    memory = _to_float(cells[3]) if len(cells) > 3 else None
    in_ctr = _to_int(cells[4].strip()) if len(cells) > 4 else None
    return NpuProcess(
        npu_id=ids[0],
        chip_id=ids[1],
        pid=pid,
        name=cells[2].strip(),
        memory_mb=None if memory is None else int(memory),
        pid_in_container=in_ctr,
    )


def parse_npu_smi_info(text: str) -> NpuSmiReport:
    """Parse the output of ``npu-smi info`` (310P and 910 layouts).

    Args:
        text: The whole standard output of ``npu-smi info``.

    Returns:
        The chips, processes and version found, plus a warning for each line that
        could not be read. Never raises on malformed input.

    Example:
        >>> out = '''
        ... | 0       310P3     | OK              | 16.0   50   1236 / 1236  |
        ... | 0       0         | 0000:86:00.0    | 0      4066 / 21534       |
        ... '''
        >>> chip = parse_npu_smi_info(out).chips[0]
        >>> chip.name, chip.health, chip.memory_used_mb, chip.memory_total_mb
        ('310P3', 'OK', 4066, 21534)
    """
    report = NpuSmiReport()
    if not text or not text.strip():
        report.warnings.append("npu-smi printed nothing; no NPU table to read.")
        return report

    pending: NpuChip | None = None  # row A seen, row B not yet
    last: NpuChip | None = None  # last NPU row A, for chips that share it

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            report.chips.append(pending)
            report.warnings.append(
                f"NPU {pending.npu_id} has no chip row (Chip | Bus-Id | AICore); "
                "its memory figures are unknown."
            )
            pending = None

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("+"):
            continue
        if not line.startswith("|"):
            report.warnings.append(f"line {number} is not part of the table, skipped: {line!r}")
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]

        if len(cells) == 1:
            cell = cells[0]
            no_proc = _NO_PROCESS_RE.search(cell)
            if no_proc:
                continue
            version = _VERSION_RE.search(cell) or _SMI_VERSION_RE.search(cell)
            if version:
                report.version = version.group(1)
                continue
            report.warnings.append(f"line {number} could not be read, skipped: {line!r}")
            continue

        first = cells[0].split()
        if not first or first[0] in _HEADER_WORDS:
            continue  # a header row

        if len(cells) >= 4:
            process = _parse_process(cells)
            if process is None:
                report.warnings.append(
                    f"line {number} looks like a process row but could not be read: {line!r}"
                )
            else:
                report.processes.append(process)
            continue

        if len(cells) != 3:
            report.warnings.append(
                f"line {number} has {len(cells)} columns, expected 3; skipped: {line!r}"
            )
            continue

        ids = [_to_int(t) for t in first]
        if all(i is not None for i in ids) and len(ids) <= 2:
            # row B: chip [device]
            whole = [i for i in ids if i is not None]
            if pending is not None:
                _apply_row_b(pending, whole, cells)
                report.chips.append(pending)
                pending = None
            elif last is not None:
                extra = NpuChip(
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
                _apply_row_b(extra, whole, cells)
                report.chips.append(extra)
            else:
                report.warnings.append(
                    f"line {number} is a chip row without an NPU row before it; skipped: {line!r}"
                )
            continue

        chip = _parse_row_a(cells)
        if chip is None:
            report.warnings.append(f"line {number} could not be read, skipped: {line!r}")
            continue
        flush()
        if chip.health not in HEALTH_VALUES:
            report.warnings.append(
                f"NPU {chip.npu_id} reports an unknown health value {chip.health!r}."
            )
        pending = chip
        last = chip

    flush()
    if not report.chips:
        report.warnings.append("no NPU rows were found in the npu-smi output.")
    return report


def parse_npu_smi_usages(text: str) -> dict[str, float | str]:
    """Parse ``npu-smi info -t usages -i N [-c CHIP]`` (``key : value`` lines).

    Args:
        text: The standard output of the command.

    Returns:
        Keys exactly as printed (e.g. ``"HBM Usage Rate(%)"``); numeric and percent
        values as floats, anything else (such as ``NA``) as the stripped string.
        Lines without a colon are ignored.

    Example:
        >>> parse_npu_smi_usages("Aicore Usage Rate(%)   : 12\\nChip ID : 0")
        {'Aicore Usage Rate(%)': 12.0, 'Chip ID': 0.0}
    """
    result: dict[str, float | str] = {}
    for raw in (text or "").splitlines():
        if ":" not in raw:
            continue
        key, _, value = raw.partition(":")
        key = key.strip()
        value = value.strip()
        if not key:
            continue
        number = _to_float(value)
        result[key] = number if number is not None else value
    return result


def _first_line(text: str | bytes | None) -> str:
    """Return the first non-empty line of a command's output, or ``""``."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def read_devices(
    runner: Callable[..., Any] = subprocess.run,
    which: Callable[[str], str | None] = shutil.which,
    timeout: float = 5,
) -> dict[str, Any]:
    """Run ``npu-smi info`` and describe the NPUs of this host as a JSON-ready dict.

    Args:
        runner: Function with the signature of :func:`subprocess.run` (replaced in tests).
        which: Function with the signature of :func:`shutil.which`.
        timeout: Seconds to wait for npu-smi.

    Returns:
        ``{"available": False, "reason": ..., "npus": []}`` when npu-smi is missing,
        fails or times out; otherwise ``{"available": True, "npus": [...],
        "processes": [...], "warnings": [...], "version": ...}`` with one dict per chip.
    """
    path = which("npu-smi")
    if not path:
        return {
            "available": False,
            "reason": "no Ascend NPU on this host (npu-smi not found)",
            "npus": [],
        }
    try:
        done = runner(
            [path, "info"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {
            "available": False,
            "reason": f"npu-smi info did not answer within {timeout:g} s",
            "npus": [],
        }
    except OSError as exc:
        return {
            "available": False,
            "reason": f"npu-smi could not be started: {exc}",
            "npus": [],
        }
    code = getattr(done, "returncode", 1)
    if code != 0:
        detail = _first_line(getattr(done, "stderr", None)) or _first_line(
            getattr(done, "stdout", None)
        )
        reason = f"npu-smi info failed with exit code {code}"
        if detail:
            reason += f": {detail}"
        return {"available": False, "reason": reason, "npus": []}
    stdout = getattr(done, "stdout", "") or ""
    if isinstance(stdout, bytes):
        stdout = stdout.decode("utf-8", "replace")
    report = parse_npu_smi_info(stdout)
    return {
        "available": True,
        "version": report.version,
        "npus": [asdict(chip) for chip in report.chips],
        "processes": [asdict(proc) for proc in report.processes],
        "warnings": list(report.warnings),
    }

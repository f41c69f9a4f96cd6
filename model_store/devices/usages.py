"""Read ``npu-smi info -t usages`` and turn it into the figures the hub shows (Django-free).

``-t usages -i N [-c CHIP]`` prints ``key : value`` lines: usage rates in percent and
memory capacities in MB, named differently per chip and driver (``Memory ...``, ``DDR ...``,
``HBM ...``; docs/npu-smi.md#per-chip-usages). :func:`parse_npu_smi_usages` reads the lines
as printed, :func:`usage_figures` maps the known keys to short names, and
:func:`merge_usages` adds a report to one chip's dict from
:func:`~model_store.devices.reading.read_devices`, filling memory figures the table left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from model_store.devices.info_table import _to_float

__all__ = ["USAGE_KEYS", "merge_usages", "parse_npu_smi_usages", "usage_figures"]


def parse_npu_smi_usages(text: str) -> dict[str, float | str]:
    """Parse ``npu-smi info -t usages -i N [-c CHIP]`` (``key : value`` lines).

    Args:
        text: The standard output of the command.

    Returns:
        Keys exactly as printed (e.g. ``"HBM Usage Rate(%)"``); numeric and percent
        values as floats, anything else (such as ``NA``) as the stripped string.
        Lines without a colon are ignored. npu-smi starts each line with a tab; copies
        that lost it read the same. Without ``-c`` the report has one block per chip and
        a later block's values replace an earlier one's (:func:`read_devices` asks each
        chip with ``-c``).

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


#: ``-t usages`` keys (lower case, single spaces) -> the short names the hub uses. The chip's
#: memory is ``Memory ...`` on 310 and 310B and on older 310P drivers, ``DDR ...`` on current
#: 310P and 910 drivers (910B prints the DDR pair as 0 and adds ``HBM ...``); see
#: docs/npu-smi.md#per-chip-usages.
USAGE_KEYS: dict[str, str] = {
    "aicore usage rate(%)": "aicore_pct",
    "aivector usage rate(%)": "aivector_pct",
    "aicpu usage rate(%)": "aicpu_pct",
    "ctrlcpu usage rate(%)": "ctrlcpu_pct",
    "npu utilization(%)": "npu_util_pct",
    "memory capacity(mb)": "memory_capacity_mb",
    "memory usage rate(%)": "memory_pct",
    "ddr capacity(mb)": "memory_capacity_mb",
    "ddr usage rate(%)": "memory_pct",
    "hbm capacity(mb)": "hbm_capacity_mb",
    "hbm usage rate(%)": "hbm_pct",
    "memory bandwidth usage rate(%)": "memory_bw_pct",
    "ddr bandwidth usage rate(%)": "memory_bw_pct",
    "hbm bandwidth usage rate(%)": "hbm_bw_pct",
}
_USAGE_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9 ()%/._-]*$")


def usage_figures(usages: Mapping[str, float | str]) -> dict[str, float]:
    """The known numeric figures of a ``-t usages`` report, under short names.

    Example:
        >>> usage_figures({"HBM  Usage Rate(%)": 5.0, "Aivector Usage Rate(%)": "NA"})
        {'hbm_pct': 5.0}
    """
    figures: dict[str, float] = {}
    for key, value in usages.items():
        short = USAGE_KEYS.get(" ".join(key.lower().split()))
        if short and isinstance(value, float):
            figures[short] = value
    return figures


def merge_usages(npu: dict[str, Any], usages: Mapping[str, float | str]) -> bool:
    """Add a ``-t usages`` report to one chip's dict (from :func:`read_devices`).

    The raw report goes under ``"usages"`` (readable keys only) and the known figures under
    ``"usage"``. Figures the table left out (910B tables often print Memory-Usage as
    ``0 / 0``) are filled from capacity x rate; table figures are never overwritten.

    Returns:
        True when the report held at least one known figure.
    """
    npu["usages"] = {k: v for k, v in usages.items() if _USAGE_KEY_RE.match(k)}
    figures = usage_figures(usages)
    npu["usage"] = figures
    if npu.get("aicore_pct") is None and "aicore_pct" in figures:
        npu["aicore_pct"] = figures["aicore_pct"]
    for kind in ("memory", "hbm"):
        capacity, rate = figures.get(f"{kind}_capacity_mb"), figures.get(f"{kind}_pct")
        if capacity and rate is not None and not npu.get(f"{kind}_total_mb"):
            npu[f"{kind}_total_mb"] = int(capacity)
            npu[f"{kind}_used_mb"] = round(capacity * rate / 100)
    return bool(figures)

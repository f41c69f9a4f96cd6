"""The device memory a chip loads models into, from its npu-smi figures (Django-free).

910-series chips load models into HBM; the others into the chip's own memory. Which of the
two npu-smi reported (in the ``info`` table or, filled in by
:func:`~model_store.devices.usages.merge_usages`, from ``-t usages``) decides what
:func:`device_memory` returns; the memory estimate and the devices page read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["device_memory"]


def device_memory(npu: Mapping[str, Any]) -> dict[str, Any] | None:
    """The memory models are loaded into: HBM on 910-series chips, else the chip's memory.

    Returns:
        ``{"kind", "total_mb", "used_mb", "free_mb"}``, or None when npu-smi showed neither.
    """
    for kind, label in (("hbm", "HBM"), ("memory", "memory")):
        total, used = npu.get(f"{kind}_total_mb"), npu.get(f"{kind}_used_mb")
        if total:
            used = used or 0
            return {
                "kind": label,
                "total_mb": total,
                "used_mb": used,
                "free_mb": max(0, total - used),
            }
    return None

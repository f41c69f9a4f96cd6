"""Read the state of Ascend NPUs from ``npu-smi`` output (Django-free).

The submodules, from the bottom up (each imports only those above it in this list):

* :mod:`~model_store.devices.info_table`: the ``npu-smi info`` table, its row kinds and
  layouts (docs/npu-smi.md#the-info-table).
* :mod:`~model_store.devices.usages`: ``npu-smi info -t usages`` and the figures the hub
  takes from it (docs/npu-smi.md#per-chip-usages).
* :mod:`~model_store.devices.mapping`: ``npu-smi info -m``, each chip's logical device id.
* :mod:`~model_store.devices.memory`: the device memory a chip loads models into.
* :mod:`~model_store.devices.held_elsewhere`: the wording for an NPU held by another container
  (pyACL 507008, npu-smi's dcmi ``-8005``; docs/npu-smi.md#an-npu-held-by-another-container).
* :mod:`~model_store.devices.npu_smi_lock`: the host-wide lock that keeps npu-smi runs one at
  a time (``NPU_SMI_LOCK_FILE``; docs/npu-smi.md#one-npu-smi-at-a-time).
* :mod:`~model_store.devices.reading`: :func:`read_devices`, which runs npu-smi and puts
  the above together.

This package re-exports their public names, so ``from model_store.devices import
read_devices`` keeps working; code that patches a name must patch it in the submodule that
looks it up. The parsers never raise on odd input.

Example:
    >>> report = parse_npu_smi_info("")
    >>> report.chips, [str(w) for w in report.warnings]
    ([], ['npu-smi printed nothing; no NPU table to read.'])
"""

from __future__ import annotations

from model_store.devices.info_table import (
    HEALTH_VALUES,
    NpuChip,
    NpuProcess,
    NpuSmiReport,
    parse_npu_smi_info,
    soc_of_chip,
)
from model_store.devices.mapping import parse_npu_smi_mapping
from model_store.devices.memory import device_memory
from model_store.devices.reading import read_devices
from model_store.devices.usages import (
    USAGE_KEYS,
    merge_usages,
    parse_npu_smi_usages,
    usage_figures,
)

__all__ = [
    "HEALTH_VALUES",
    "USAGE_KEYS",
    "NpuChip",
    "NpuProcess",
    "NpuSmiReport",
    "device_memory",
    "merge_usages",
    "parse_npu_smi_info",
    "parse_npu_smi_mapping",
    "parse_npu_smi_usages",
    "read_devices",
    "soc_of_chip",
    "usage_figures",
]

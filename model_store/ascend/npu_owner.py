"""Which process may open the NPU: the worker itself, or only the Triton that serves.

On a stock Ascend driver a chip opened by a process of one container cannot be opened from
another container until that process ends (ACL answers 507008, npu-smi ``-8005``); processes
of one container share it, and Huawei's per-chip "container sharing mode" lifts the rule
(docs/ascend.md#one-container-owns-the-npu). Triton must have the chip to serve, so in the
compose layouts the worker does not open it at all: it asks the serving Triton instead (the
facts probe for npu-smi and pyACL, a trial model for verification and the self-test's device
stages). ``WORKER_NPU`` says which way this worker goes:

* ``on`` (unset: the default, and what ``make run`` on an Ascend host wants): processes of one
  host, one PID namespace, so the worker opens the chip beside Triton as before;
* ``off`` (what the Ascend compose files set): the worker never opens a device node; every
  device fact and device run comes from the Triton container;
* ``shared`` (the opt-in compose override, for chips whose container sharing is on): the
  worker runs pyACL on the chip itself, but npu-smi stays with the Triton container, since
  npu-smi in a container is supported for root only and the worker is not root.

Django-free: the worker, the node worker and the self-test read it alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from model_store.text import Said, say

WORKER_NPU_VAR = "WORKER_NPU"

NpuMode = Literal["on", "off", "shared"]

_SPELLINGS: dict[str, NpuMode] = {
    "": "on",
    "on": "on",
    "1": "on",
    "yes": "on",
    "true": "on",
    "off": "off",
    "0": "off",
    "no": "off",
    "false": "off",
    "shared": "shared",
}


def worker_npu_mode(env: Mapping[str, str] | None = None) -> NpuMode:
    """``WORKER_NPU`` read leniently; an unknown value reads as ``off``, the safe side: a
    worker that wrongly opens a chip takes it away from Triton, one that wrongly does not only
    sends its device work to Triton."""
    raw = (env if env is not None else os.environ).get(WORKER_NPU_VAR, "")
    return _SPELLINGS.get(raw.strip().lower(), "off")


def worker_runs_pyacl(env: Mapping[str, str] | None = None) -> bool:
    """Whether this worker may open the NPU through pyACL (verification, the self-test)."""
    return worker_npu_mode(env) != "off"


def worker_runs_npu_smi(env: Mapping[str, str] | None = None) -> bool:
    """Whether this worker runs npu-smi itself, rather than reading the serving side's."""
    return worker_npu_mode(env) == "on"


def why_not_here(env: Mapping[str, str] | None = None) -> Said:
    """Why the worker left the NPU to Triton, in words for a job log or a report."""
    mode = worker_npu_mode(env)
    if mode == "shared":
        return say(
            "This worker runs pyACL on the NPU (WORKER_NPU=shared) but leaves npu-smi to the "
            "Triton container: npu-smi in a container is supported for root only."
        )
    return say(
        "This worker does not open the NPU (WORKER_NPU=off): a chip can be opened by one "
        "container at a time, and the Triton container that serves holds it."
    )

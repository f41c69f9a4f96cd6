"""What one host can do, as seen on that host: its NPUs, its CANN, which targets can build there
and the host-bound diagnostics checks (CANN, ATC and its Python, the npu_ge library, device
nodes, npu-smi).

The report is made by a worker on the host that has the hardware (never by the web process,
which in a compose deployment runs in a container without NPUs or CANN) and stored by the hub
with its time; pages and the API show the stored report and its age. It is plain JSON, made
without Django, so that a node's worker without database access can make it too
(docs/nodes.md#the-probe-report-first-piece).

Example:
    >>> report = build_host_report(dict(os.environ))
    >>> sorted(report)
    ['cann', 'devices', 'diagnostics', 'host', 'made_at', 'protocol', 'quantise', 'targets']
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from model_store.ascend.quantise_tools import (
    AMCT_PYTHON_VAR,
    MSMODELSLIM_PYTHON_VAR,
    detect_quantisers,
)
from model_store.compile.atc.environment import cann_status, default_toolkit_homes
from model_store.devices import read_devices
from model_store.diagnostics.host_checks import ascend_root, run_host_checks
from model_store.targets import all_targets
from model_store.text import as_json, say

#: Bumped when the report's shape changes in a way an older hub cannot read. Adding keys is
#: not such a change (readers use ``.get``): ``cann``, ``diagnostics`` and ``quantise`` came
#: without a bump.
PROTOCOL = 1


def build_host_report(
    env: Mapping[str, str],
    *,
    devices: Callable[[], dict[str, Any]] = read_devices,
    now: Callable[[], float] = time.time,
    backends_dir: Path | None = None,
) -> dict[str, Any]:
    """Probe this host: ``npu-smi`` (docs/npu-smi.md), CANN, each target's toolchain, the checks.

    Args:
        env: The environment the host's workers build with (CANN is found through it,
            ``ASCEND_ROOT`` names its install root).
        devices: Reads the NPUs (:func:`model_store.devices.read_devices`).
        now: The clock, for the report's time.
        backends_dir: Triton's ``--backend-directory`` as this host sees it (for the npu_ge
            check), or None when Triton's files are not visible here.

    Returns:
        ``{"protocol", "host", "made_at", "devices", "targets", "cann", "diagnostics"}``;
        ``targets`` maps each target's name to ``{"available": bool, "reason": str}``,
        ``cann`` is :func:`cann_summary`, ``diagnostics`` the host-bound checks as dicts
        (``id``, ``title``, ``state``, ``found``, ``advice``, ``details``).
    """
    targets = {}
    for target in all_targets():
        status = target.status(env)
        targets[target.name] = as_json({"available": status.available, "reason": status.reason})
    found_devices = devices()
    cann = cann_summary(env)
    return {
        "protocol": PROTOCOL,
        "host": socket.gethostname(),
        "devices": as_json(found_devices),
        "targets": targets,
        "cann": cann,
        "quantise": quantisers(env, cann_available=bool(cann.get("available"))),
        "diagnostics": run_host_checks(env, devices=found_devices, backends_dir=backends_dir),
        "made_at": now(),
    }


def quantisers(env: Mapping[str, str], *, cann_available: bool) -> dict[str, Any]:
    """The Ascend INT8 tools (:func:`detect_quantisers`), probed only where they could be: a
    host with CANN, or one that names their interpreter. Elsewhere both are absent, unasked."""
    named = any(env.get(v) for v in (AMCT_PYTHON_VAR, MSMODELSLIM_PYTHON_VAR))
    if cann_available or named:
        return detect_quantisers(env)
    absent = {"state": "absent", "version": "", "python": "",
              "reason": as_json(say("No CANN toolkit on this host."))}  # fmt: skip
    return {"amct": dict(absent), "msmodelslim": dict(absent)}


def ascend_matters(report: dict[str, Any]) -> bool:
    """Whether this host has anything Ascend: CANN for its workers, or NPUs npu-smi lists."""
    devices = report.get("devices") or {}
    return bool((report.get("cann") or {}).get("available")) or bool(
        devices.get("available") and devices.get("npus")
    )


def add_serving_side(report: dict[str, Any], ask: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``report`` with ``serving``: what the Triton that serves has, asked from inside it
    (:func:`model_store.serving.facts.remembered_serving_facts`), on hosts where Ascend
    matters; its CANN, pyACL and backends are what the version gate, the device checks and
    the self-test compare with (docs/ascend.md#the-serving-side). Elsewhere nothing is asked."""
    if ascend_matters(report):
        report["serving"] = as_json(ask())
    return report


def cann_summary(env: Mapping[str, str]) -> dict[str, Any]:
    """The CANN toolkit this host's workers would run ATC from, as plain data.

    ``{"available", "version", "ops_version", "layout", "toolkit_home", "atc_path", "reason",
    "ascend_root"}``: found the way the worker finds ATC (``ATC_PATH``, ``ASCEND_TOOLKIT_HOME``,
    ``PATH``, then both default layouts under ``ASCEND_ROOT``; docs/cann.md#install-layouts).
    Readers compare ``version`` with the CANN an OM was built with; it is None when unknown.
    """
    root = ascend_root(env)
    status = cann_status(env, default_homes=default_toolkit_homes(root, env.get("HOME") or None))
    # The reason crosses as a message's JSON: the hub says it in its reader's language.
    return as_json({
        "available": status.available,
        "version": status.version,
        "ops_version": status.ops_version,
        "layout": status.layout,
        "toolkit_home": status.toolkit_home,
        "atc_path": status.atc_path,
        "reason": status.reason,
        "ascend_root": str(root),
    })  # fmt: skip

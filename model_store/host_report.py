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

from model_store.ascend.npu_owner import why_not_here, worker_runs_npu_smi
from model_store.ascend.quantise_tools import (
    AMCT_PYTHON_VAR,
    MSMODELSLIM_PYTHON_VAR,
    detect_quantisers,
)
from model_store.compile.atc.environment import cann_status, default_toolkit_homes
from model_store.devices import read_devices
from model_store.diagnostics.host_checks import ascend_root, run_host_checks
from model_store.targets import all_targets
from model_store.text import Message, Said, as_json, from_json, is_message_json, say

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
    serving: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Probe this host: ``npu-smi`` (docs/npu-smi.md), CANN, each target's toolchain, the checks.

    Args:
        env: The environment the host's workers build with (CANN is found through it,
            ``ASCEND_ROOT`` names its install root).
        devices: Reads the NPUs (:func:`model_store.devices.read_devices`).
        now: The clock, for the report's time.
        backends_dir: Triton's ``--backend-directory`` as this host sees it (for the npu_ge
            check), or None when Triton's files are not visible here.
        serving: Asks the Triton that serves for its own facts
            (:func:`model_store.serving.facts.remembered_serving_facts`); asked where Ascend
            matters and kept as ``serving``. Where this worker leaves npu-smi to the Triton
            container (``WORKER_NPU``, :mod:`model_store.ascend.npu_owner`), the NPUs of the
            report are the ones npu-smi listed there.

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
    cann = cann_summary(env)
    here = worker_runs_npu_smi(env)
    found_devices = devices() if here else {}
    report: dict[str, Any] = {
        "protocol": PROTOCOL,
        "host": socket.gethostname(),
        "targets": targets,
        "cann": cann,
        "quantise": quantisers(env, cann_available=bool(cann.get("available"))),
    }
    # A worker that leaves the NPU to Triton is on an Ascend host by its settings' own word.
    if serving is not None and (not here or ascend_matters({**report, "devices": found_devices})):
        report["serving"] = as_json(serving())
    if not here:
        found_devices = devices_seen_by_triton(report.get("serving"), why_not_here(env))
    report["devices"] = as_json(found_devices)
    report["diagnostics"] = run_host_checks(env, devices=found_devices, backends_dir=backends_dir)
    report["made_at"] = now()
    return report


def devices_seen_by_triton(serving: dict[str, Any] | None, why: Said) -> dict[str, Any]:
    """The npu-smi report the Triton container made (``serving["devices"]``), marked as read
    there; or, when that Triton did not answer, no NPUs and why."""
    seen = (serving or {}).get("devices")
    if isinstance(seen, dict):
        return {**seen, "seen_in": "triton"}
    given = (serving or {}).get("reason")
    reason: Said = given if isinstance(given, Message) else str(given or "")
    if is_message_json(given):
        reason = from_json(given)
    reason = reason or say("The Triton that serves was not asked.")
    return {
        "available": False,
        "npus": [],
        "seen_in": "triton",
        "reason": say("%(why)s Its npu-smi could not be read: %(reason)s", why=why, reason=reason),
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

"""The host-bound checks: run on the host with the hardware, read back from its stored report.

A worker on the host with the NPUs and CANN runs
:data:`~model_store.diagnostics.checklist.HOST_CHECKS` (:func:`run_host_checks`) and puts the
results, as JSON-ready dicts, under ``"diagnostics"`` in its host report
(model_store/host_report.py). The hub stores that report; the web process reads the checks back
with :func:`reported_checks`, which does not trust the report's shape: a future node worker
sends it over the network (docs/nodes.md#the-probe-report-first-piece), so an entry this hub
cannot read becomes a failing check that says so, never a crash.

Example:
    >>> [check] = reported_checks({"diagnostics": [{"id": "npu_smi", "state": "ok", "found": "2"}]})
    >>> check.title, check.state
    ('NPUs (npu-smi)', 'ok')
    >>> reported_checks({"devices": {}}) is None  # a report from a worker before diagnostics
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from model_store.compile.atc.environment import DEFAULT_ASCEND_ROOT
from model_store.diagnostics.checklist import HOST_CHECKS, run_checks
from model_store.diagnostics.context import (
    STATES,
    TITLES,
    Check,
    CheckState,
    DiagnosticsContext,
)
from model_store.text import from_json, is_message_json, say

#: The variable naming where CANN and the driver are installed (compose mounts it read-only).
ASCEND_ROOT_VAR = "ASCEND_ROOT"


def ascend_root(env: Mapping[str, str]) -> Path:
    """``ASCEND_ROOT`` from ``env``, else CANN's default install root ``/usr/local/Ascend``."""
    return Path(env.get(ASCEND_ROOT_VAR, "").strip() or DEFAULT_ASCEND_ROOT)


def run_host_checks(
    env: Mapping[str, str],
    *,
    devices: Mapping[str, Any],
    backends_dir: Path | None,
) -> list[dict[str, Any]]:
    """Run the host-bound checks here, as this host's worker: the dicts its report carries.

    Args:
        env: The environment the host's worker builds and verifies with.
        devices: The npu-smi report the host report already read (not read a second time).
        backends_dir: Triton's ``--backend-directory`` as this host sees it, if known.
    """
    ctx = DiagnosticsContext(
        env=env, backends_dir=backends_dir, devices=devices, ascend_root=ascend_root(env)
    )
    return [check.to_dict() for check in run_checks(ctx, HOST_CHECKS)]


def reported_checks(report: Mapping[str, Any]) -> list[Check] | None:
    """The host checks a stored report carries, or None when it carries none (an older worker)."""
    entries = report.get("diagnostics")
    if not isinstance(entries, list):
        return None
    return [_check_from(entry) for entry in entries]


def _check_from(entry: Any) -> Check:
    """One reported check, validated; a malformed one becomes a failing check saying so."""
    fields = entry if isinstance(entry, Mapping) else {}
    cid, state, found = fields.get("id"), fields.get("state"), fields.get("found")
    advice, details = fields.get("advice", ""), fields.get("details", [])
    if (
        isinstance(cid, str)
        and isinstance(state, str)
        and state in STATES
        and _is_sentence(found)
        and _is_sentence(advice)
        and isinstance(details, list)
    ):
        title = TITLES.get(cid) or from_json(fields.get("title") or cid)
        lines = [from_json(line) for line in details]
        # A node's report is not trusted: from_json gives a template it cannot fill as words.
        return Check(
            cid, title, cast(CheckState, state), from_json(found), from_json(advice), lines
        )
    named = cid if isinstance(cid, str) and cid else "malformed"
    return Check(
        named,
        TITLES.get(named) or say("A check this hub cannot read"),
        "failing",
        say(
            "The worker's report holds a check this hub cannot read: %(entry)s",
            entry=repr(entry)[:200],
        ),
        say(
            "Run the same version of the hub on the worker and the web (restart the worker "
            "after an upgrade)."
        ),
    )


def _is_sentence(value: Any) -> bool:
    """Plain words, or a message as :meth:`~model_store.text.Message.to_json` writes it."""
    return isinstance(value, str) or is_message_json(value)

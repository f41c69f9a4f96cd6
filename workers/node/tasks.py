"""The tasks the hub sends to queue ``node.<name>``; their names are the contract.

Each is thin: check the arguments, call :mod:`~workers.node.placing` or
:mod:`~workers.node.reporting`, and return plain JSON. An expected failure (a refused
argument, a package that does not check out, a hub that does not answer, a version Triton
will not load) is an answer with ``ok: false``, a ``code`` and the reason in plain words, so
the hub can show it; only a bug raises.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from model_store.errors import ModelStoreError
from model_store.runtime.client import TritonRuntime
from model_store.runtime.errors import TritonRuntimeError
from model_store.text import as_json
from workers.node import building, placing, trials
from workers.node.app import app, hub, settings
from workers.node.hub_client import HubError
from workers.node.reporting import send_report

log = logging.getLogger(__name__)


@functools.cache
def _runtime() -> TritonRuntime:
    return placing.node_runtime(settings)


def _failure(model: object, exc: Exception) -> dict[str, Any]:
    code = getattr(exc, "code", "") or exc.__class__.__name__
    message = getattr(exc, "message", "") or str(exc)
    log.warning("node %s: %s refused or failed: %s", settings.name, model, message)
    return {"ok": False, "code": code, "reason": as_json(message)}


@app.task(name="node.probe")
def probe() -> dict[str, Any]:
    """Build this host's report and post it to the hub; the hub's answer."""
    try:
        answer = send_report(settings, hub)
    except HubError as exc:
        return _failure(settings.name, exc)
    return {"ok": True, "protocol": answer.protocol, "report_every_s": answer.report_every_s}


@app.task(name="node.place")
def place(model: str, version: int, sha256: str, target: str | None = None) -> dict[str, Any]:
    """Fetch version ``version`` of ``model`` from the hub, check it is ``sha256``, serve it."""
    try:
        request = placing.checked_request(model, version, sha256, target)
        result = placing.place(settings, hub, request, runtime=_runtime())
    except (HubError, ModelStoreError, TritonRuntimeError) as exc:
        return _failure(model, exc)
    return result.to_dict()


@app.task(name="node.compare")
def compare(
    model: str,
    serving: int,
    compare: int | None = None,
    sha256: str | None = None,
    target: str | None = None,
) -> dict[str, Any]:
    """Load version ``compare`` of ``model`` beside ``serving`` (a canary's candidate; fetched
    and checked against ``sha256`` as ``node.place`` does), or ``serving`` alone again."""
    try:
        request = (
            placing.checked_request(model, compare, sha256, target) if compare is not None else None
        )
        name, number = placing.checked_version(model, serving)
        return placing.load_beside(
            settings, hub, request, model=name, serving=number, runtime=_runtime()
        )
    except (HubError, ModelStoreError, TritonRuntimeError) as exc:
        return _failure(model, exc)


@app.task(name="node.unload")
def unload(model: str) -> dict[str, Any]:
    """Unload ``model`` from this node's Triton (its files stay)."""
    try:
        return placing.unload(settings, model, runtime=_runtime())
    except (ModelStoreError, TritonRuntimeError) as exc:
        return _failure(model, exc)


@app.task(name="node.build")
def build(**message: Any) -> dict[str, Any]:
    """Build and verify a version the hub cannot build here (:mod:`~workers.node.building`)."""
    try:
        request = building.checked_request(message)
        return building.build(settings, hub, request)
    except (HubError, ModelStoreError) as exc:
        return _failure(message.get("model"), exc)


@app.task(name="node.trial")
def trial(**message: Any) -> dict[str, Any]:
    """Measure one tuning trial on this node's Triton (:mod:`~workers.node.trials`)."""
    try:
        return trials.run_trial(settings, hub, message, runtime=_runtime())
    except (HubError, ModelStoreError, TritonRuntimeError) as exc:
        return _failure(message.get("model"), exc)

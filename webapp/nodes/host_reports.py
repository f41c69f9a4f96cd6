"""The stored probe reports of the hosts that run Triton and the workers.

A worker probes its own host (``model_store.host_report``) when it starts and every
``HOST_PROBE_SECONDS`` (beat), and records the result here; the Server page, the devices API,
the memory estimate and the targets' availability read the newest report and say how old it is.
The report also carries the host-bound diagnostics checks (CANN, ATC and its Python, the npu_ge
library, device nodes, npu-smi), which the Diagnostics page shows from here. The web process
never runs ``npu-smi`` or looks for CANN itself: in a compose deployment it has neither, and the
answer would be about the wrong machine.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils.translation import gettext

from model_store.host_report import build_host_report
from model_store.targets import get_target
from model_store.text import Message, restored, say
from webapp.hub_version import hub_version
from webapp.nodes.models import HostReport, Node
from webapp.ops.triton_files import triton_backends_dir

#: The node a single-machine deployment is (the embedded stack, or one compose stack).
LOCAL_NODE = "local"


def probe_and_record(node: str = LOCAL_NODE) -> dict[str, Any]:
    """Probe this host (a worker's) and store the report; returns it.

    The stack's worker is the ``local`` node: its Triton is the one this hub's settings name.
    """
    report = build_host_report(
        dict(os.environ), backends_dir=triton_backends_dir(), serving=_ask_serving_side
    )
    record(report, node=node)
    triton = {
        "http": settings.TRITON_URL,
        "grpc": settings.TRITON_GRPC_URL,
        "metrics": settings.TRITON_METRICS_URL,
    }
    Node.objects.filter(name=node).update(triton=triton, hub_version=hub_version())
    return report


def _ask_serving_side() -> dict[str, Any]:
    """The local Triton's own facts (docs/ascend.md#the-serving-side), at most every
    ``SERVING_FACTS_SECONDS``."""
    from model_store.serving.facts import ask_every_s, remembered_serving_facts
    from webapp.ops.triton import get_runtime
    from webapp.registry.catalogue.storage import get_store

    runtime = get_runtime(timeout=30)
    try:
        return remembered_serving_facts(
            get_store(),
            runtime,
            every_s=ask_every_s(os.environ, float(settings.SERVING_FACTS_SECONDS)),
        )
    finally:
        runtime.close()


def record(report: dict[str, Any], *, node: str = LOCAL_NODE) -> None:
    """Store ``report`` as the newest of ``node``, registering the node on its first report."""
    made_at = datetime.fromtimestamp(float(report["made_at"]), tz=UTC)
    HostReport.objects.update_or_create(node=node, defaults={"made_at": made_at, "data": report})
    Node.objects.get_or_create(name=node)


def latest(node: str = LOCAL_NODE) -> dict[str, Any] | None:
    """The newest report of ``node`` with ``age_s`` and ``stale``, or None if it never reported."""
    row = HostReport.objects.filter(node=node).first()
    if row is None:
        return None
    age = max(0.0, time.time() - row.made_at.timestamp())
    return {**row.data, "age_s": round(age, 1), "stale": age > stale_after_s()}


def stale_after_s() -> float:
    return 3 * settings.HOST_PROBE_SECONDS + 10


def not_reported_reason() -> Message:
    return say(
        "no worker has reported this host yet (a worker probes its host when it starts and "
        "every %(seconds)s s)",
        seconds=settings.HOST_PROBE_SECONDS,
    )


def start_a_worker() -> str:
    """What to do when no worker has reported: where the host probe comes from (said in the
    request's language: the Diagnostics page and its API show it right away)."""
    return gettext(
        "no worker has reported from the host yet: start a worker on the host with the NPUs "
        "and CANN (`make run` starts one; in compose, the `worker` service), which probes its "
        "host when it starts and every %(seconds)s s"
    ) % {"seconds": settings.HOST_PROBE_SECONDS}


def age(report: dict[str, Any]) -> dict[str, Any]:
    """Who made ``report`` (a :func:`latest` result) and when: ``host``, ``reported_at``,
    ``age_s``, ``stale`` (what templates/ops/_host_report_age.html shows)."""
    return {
        "host": report.get("host"),
        "reported_at": datetime.fromtimestamp(float(report["made_at"]), tz=UTC).isoformat(),
        "age_s": report.get("age_s"),
        "stale": bool(report.get("stale")),
    }


def cann(node: str = LOCAL_NODE) -> dict[str, Any] | None:
    """The CANN of the newest report (``version``, ``layout``...) with its age, or None.

    A report from a worker older than the ``cann`` key gives ``{"available": None, ...}``.
    """
    report = latest(node)
    if report is None:
        return None
    found = report.get("cann")
    if not isinstance(found, dict):
        found = {"available": None, "reason": say("the worker's report does not describe CANN")}
    return {**restored(found), **age(report)}


def serving(node: str = LOCAL_NODE) -> dict[str, Any] | None:
    """What the node's serving Triton said of itself (its CANN, pyACL, backends; asked from
    inside it, docs/ascend.md#the-serving-side), with the report's age; None when the newest
    report has no such part (not an Ascend host, or a worker older than it)."""
    report = latest(node)
    found = None if report is None else report.get("serving")
    if not isinstance(found, dict):
        return None
    return {**restored(found), **age(report)}  # type: ignore[arg-type]


def devices(node: str = LOCAL_NODE) -> dict[str, Any]:
    """The NPUs of the newest report, with ``reported_at``, ``age_s`` and ``host``."""
    report = latest(node)
    if report is None:
        return {"available": False, "reason": not_reported_reason(), "npus": [], "age_s": None}
    found = restored(dict(report["devices"]))
    found.setdefault("reason", "")
    return found | age(report)


def target_status(name: str, node: str = LOCAL_NODE) -> dict[str, Any]:
    """``{"available", "reason"}`` for building ``name`` where the workers run.

    A target that needs nothing beyond this project's own packages (the CPU target) is
    available wherever a worker runs; the others are as the newest report says.
    """
    target = get_target(name)
    if not target.needs_cann:
        return {"available": True, "reason": target.status({}).reason}
    report = latest(node)
    if report is None:
        found: dict[str, Any] = {"available": False, "reason": not_reported_reason()}
    elif (status := report["targets"].get(name)) is None:
        found = {
            "available": False,
            "reason": say("The last report does not mention %(name)s.", name=name),
        }
    else:
        # The reason as the reporting worker said it (a message, or a node's plain words).
        found = restored({**status, "available": bool(status["available"])})
    return found

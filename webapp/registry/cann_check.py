"""Before an OM answers: is the serving host's CANN at least as new as the CANN that built it?

An OM must not run on an older runtime CANN than the one that built it
(docs/cann.md#version-compatibility). The building toolkit's version is recorded on the version
by the compile step; the serving side's comes from the newest host report (the worker on the
serving host probes it, webapp/ops/host_reports.py). Only artifacts compiled ahead of time (OMs)
are concerned: an ``npu_ge`` version ships ONNX that the serving host's own CANN compiles at load.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from model_store.cann_versions import Skew, skew
from model_store.targets import get_target
from model_store.text import say
from webapp.ops import host_reports
from webapp.registry.models import Version


def builds_an_om(version: Version) -> bool:
    """Whether ``version``'s artifact is an OM (compiled for one CANN ahead of serving)."""
    name = version.artifact_name or get_target(version.model.target).artifact_name
    return name.endswith(".om")


def serving_cann(node: str = host_reports.LOCAL_NODE) -> dict[str, Any]:
    """A serving node's CANN from its newest host report (``{}`` when never reported).

    Read defensively: reports from older workers have no ``cann`` key.
    """
    try:
        found = host_reports.cann(node)
    except Exception:  # a report of an unexpected shape must not block serving
        return {}
    return found if isinstance(found, dict) else {}


def cann_skew(version: Version) -> Skew | None:
    """How the version's building CANN compares with each serving node's (the nodes of the
    model's placement): the first node where the OM must not run, else the first whose CANN
    is unknown, else "ok". None when not an OM."""
    if not builds_an_om(version):
        return None
    from webapp.ops import nodes as ops_nodes
    from webapp.registry import placement

    model = version.model
    names = placement.resolve(placement.of(model), ops_nodes.summaries())
    found = [_skew_on(version, name, len(names) > 1) for name in names or [placement.LOCAL]]
    for state in ("too_new", "unknown"):
        for one in found:
            if one.state == state:
                return one
    return found[0]


def _skew_on(version: Version, node: str, say_which: bool) -> Skew:
    serving = serving_cann(node)
    serving_version = serving.get("version") if serving.get("available") is not False else None
    found = skew(version.cann_version or None, serving_version or None)
    if say_which:
        found = replace(
            found, message=say("Node %(node)s: %(message)s", node=node, message=found.message)
        )
    return found

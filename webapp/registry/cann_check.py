"""Before an OM answers: is the serving host's CANN at least as new as the CANN that built it?

An OM must not run on an older runtime CANN than the one that built it
(docs/cann.md#version-compatibility). The building toolkit's version is recorded on the version
by the compile step; the serving side's comes from the newest host report (the worker on the
serving host probes it, webapp/ops/host_reports.py). Only artifacts compiled ahead of time (OMs)
are concerned: an ``npu_ge`` version ships ONNX that the serving host's own CANN compiles at load.
"""

from __future__ import annotations

from typing import Any

from model_store.cann_versions import Skew, skew
from model_store.targets import get_target
from webapp.ops import host_reports
from webapp.registry.models import Version


def builds_an_om(version: Version) -> bool:
    """Whether ``version``'s artifact is an OM (compiled for one CANN ahead of serving)."""
    name = version.artifact_name or get_target(version.model.target).artifact_name
    return name.endswith(".om")


def serving_cann() -> dict[str, Any]:
    """The serving host's CANN from the newest host report (``{}`` when never reported).

    Read defensively: reports from older workers have no ``cann`` key.
    """
    try:
        found = host_reports.cann()
    except Exception:  # a report of an unexpected shape must not block serving
        return {}
    return found if isinstance(found, dict) else {}


def cann_skew(version: Version) -> Skew | None:
    """How the version's building CANN compares with the serving host's; None when not an OM."""
    if not builds_an_om(version):
        return None
    serving = serving_cann()
    serving_version = serving.get("version") if serving.get("available") is not False else None
    return skew(version.cann_version or None, serving_version or None)

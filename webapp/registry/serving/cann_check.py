"""Before an OM answers: is the serving side's CANN at least as new as the CANN that built it?

An OM must not run on an older runtime CANN than the one that built it
(docs/cann.md#version-compatibility). The building toolkit's version is recorded on the version
by the compile step. The serving side's is the CANN *beside the Triton that loads the OM*, which
in compose is the Triton image's own, not the worker's: the newest host report carries it as
its ``serving`` part, asked from inside that Triton (docs/ascend.md#the-serving-side). Where no
report has it yet, the worker's toolkit stands in, and the gate says so. Only artifacts compiled
ahead of time (OMs) are concerned: an ``npu_ge`` version ships ONNX that the serving side's own
CANN compiles at load.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from model_store.cann_versions import Skew, skew
from model_store.targets import get_target
from model_store.text import Said, say
from webapp.nodes import host_reports
from webapp.registry.catalogue.models import Version


def builds_an_om(version: Version) -> bool:
    """Whether ``version``'s artifact is an OM (compiled for one CANN ahead of serving)."""
    name = version.artifact_name or get_target(version.model.target).artifact_name
    return name.endswith(".om")


def serving_cann(node: str = host_reports.LOCAL_NODE) -> dict[str, Any]:
    """A serving node's CANN from its newest host report (``{}`` when never reported), with
    ``source``: ``"serving"`` (beside its Triton) or ``"worker"`` (the worker's toolkit, when
    the Triton's own was not reported).

    Read defensively: reports from older workers have no ``serving`` or ``cann`` key.
    """
    try:
        side = host_reports.serving(node) or {}
        beside = side.get("cann") if side.get("available") else None
        if isinstance(beside, dict) and beside.get("available"):
            return {**beside, "source": "serving"}
        found = host_reports.cann(node)
    except Exception:  # a report of an unexpected shape must not block serving
        return {}
    return {**found, "source": "worker"} if isinstance(found, dict) else {}


def cann_skew(version: Version) -> Skew | None:
    """How the version's building CANN compares with each serving node's (the nodes of the
    model's placement): the first node where the OM must not run, else the first whose CANN
    is unknown, else "ok". None when not an OM."""
    if not builds_an_om(version):
        return None
    from webapp.nodes import summaries as ops_nodes
    from webapp.registry.serving import placement

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
    if serving and serving.get("source") == "worker":
        found = replace(
            found,
            message=say(
                "%(message)s (compared with the worker's toolkit: the CANN beside the serving "
                "Triton has not been reported)",
                message=found.message,
            ),
        )
    if say_which:
        found = replace(
            found, message=say("Node %(node)s: %(message)s", node=node, message=found.message)
        )
    return found


def device_ids_of(version: Version) -> list[int]:
    """The NPU ids the version's config names (``device_id`` of acl, ``device_ids`` of npu_ge)."""
    options = version.options or {}
    raw = options.get("device_ids", options.get("device_id"))
    return [int(part) for part in str(raw or "").split(",") if part.strip().isdigit()]


def device_problem(version: Version) -> Said | None:
    """Why the version's device ids do not exist where it serves, or None.

    In a container, pyACL numbers the NPUs mapped into it from 0 (hicann/runtime's device
    management reference: logical and physical ids agree only outside containers), so an id
    typed from the host's npu-smi may name no NPU there. Judged against the device count the
    serving Triton's pyACL reported (docs/ascend.md#the-serving-side); unknown counts pass.
    """
    wanted = device_ids_of(version)
    if not wanted or not builds_on_npu(version):
        return None
    from webapp.nodes import summaries as ops_nodes
    from webapp.registry.serving import placement

    names = placement.resolve(placement.of(version.model), ops_nodes.summaries())
    for node in names or [placement.LOCAL]:
        side = _serving_side(node)
        count = (side.get("pyacl") or {}).get("device_count") if side.get("available") else None
        if isinstance(count, int) and max(wanted) >= count:
            return say(
                "it runs on NPU %(ids)s, but the Triton that serves on node %(node)s has %(count)s "
                "device(s), numbered from 0 in its container; set the device id below "
                "%(count)s in a revision",
                ids=",".join(str(i) for i in wanted),
                node=node,
                count=count,
            )
    return None


def _serving_side(node: str) -> dict[str, Any]:
    try:
        return host_reports.serving(node) or {}
    except Exception:  # a report of an unexpected shape must not block serving
        return {}


def builds_on_npu(version: Version) -> bool:
    return get_target(version.model.target).device == "npu"

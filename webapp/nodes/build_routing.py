"""Where a host-bound build runs: this worker, or a node with the toolkit and the NPU it needs.

A target that needs CANN (``acl``, ``npu_ge``) compiles with ATC, and its artifact can only be
run, for verification, on an NPU of the SoC it was built for. ATC itself cross-compiles for any
SoC, so the choice, from the nodes' newest reports (docs/nodes.md#host-bound-builds), is:

1. a node that is ``up`` (not draining), reports the target available (CANN and ATC found)
   and has NPUs of the version's SoC: it compiles *and* verifies; this worker's own host (the
   node ``local``) first, then the others by name;
2. else this worker, when its own environment has the toolkit (it compiles; verification
   then goes through Triton or stays "not run", as on a single machine);
3. else any other such node without the SoC's NPUs (it compiles, verification is not run);
4. else no node can: the step fails at once (``cann_missing``, as before nodes existed) and
   says which SoC and toolkit are missing, what each node lacks, and how to set up CANN here.

Draining nodes take nothing new, builds included.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from model_store.targets import get_target
from model_store.text import Message, Said, joined, say
from webapp.errors import HubError
from webapp.nodes import host_reports
from webapp.nodes import summaries as nodes
from webapp.nodes.host_reports import LOCAL_NODE
from webapp.nodes.models import HostReport, Node


@dataclass(frozen=True)
class Route:
    """Where to build: ``node`` None means in this worker; ``verifies`` that the place has
    NPUs of the SoC, so the artifact is verified where it is built."""

    node: str | None
    verifies: bool
    why: str


class NoBuildHost(HubError):
    """No node can build this target for this SoC now."""

    def __init__(self, message: Said) -> None:
        # The code a job failed with before nodes existed ("no CANN here"), kept for scripts.
        super().__init__(message, "cann_missing", 409)


def build_route(target_name: str, options: dict[str, Any]) -> Route:
    """Where a build of ``target_name`` with ``options`` (``soc_version``) runs; see the module.

    Raises:
        NoBuildHost: Neither this worker nor an up node has the toolkit.
    """
    target = get_target(target_name)
    if not target.needs_cann:
        return Route(None, False, "needs nothing special")
    soc = str(options.get("soc_version") or "")
    here = target.status(dict(os.environ)).available
    candidates = _candidates(target_name)
    with_soc = [c for c in candidates if soc and c["soc"] == soc]
    local = next((c for c in with_soc if c["name"] == LOCAL_NODE), None)
    if local is not None and here:
        return Route(None, True, f"this host has the toolkit and {soc} NPUs")
    others = [c for c in with_soc if c["name"] != LOCAL_NODE]
    if others:
        chosen = others[0]["name"]
        return Route(chosen, True, f"node {chosen} has the toolkit and {soc} NPUs")
    if here:
        return Route(None, False, "this host has the toolkit (no node has NPUs of the SoC)")
    compile_only = [c for c in candidates if c["name"] != LOCAL_NODE]
    if compile_only:
        chosen = compile_only[0]["name"]
        return Route(chosen, False, f"node {chosen} has the toolkit (no {soc or 'NPU'} there)")
    here_reason = target.status(dict(os.environ)).reason
    raise NoBuildHost(
        say(
            "%(nobody)s This worker: %(reason)s",
            nobody=_nobody(target_name, soc),
            reason=here_reason,
        )
    )


def build_status(target_name: str) -> dict[str, Any]:
    """``{"available", "reason"}`` for building ``target_name`` from this hub: as this host's
    newest report says, or, when this host cannot, on the up nodes that can (where
    :func:`build_route` sends the build)."""
    found = host_reports.target_status(target_name)
    if found["available"]:
        return found
    elsewhere = nodes_that_build(target_name)
    if not elsewhere:
        return found
    return {
        "available": True,
        "reason": say(
            "Builds on node %(nodes)s (not on this host: %(reason)s)",
            nodes=", ".join(elsewhere),
            reason=found["reason"],
        ),
    }


def nodes_that_build(target_name: str) -> list[str]:
    """The up nodes other than ``local`` that can build ``target_name`` now, by name."""
    return [c["name"] for c in _candidates(target_name) if c["name"] != LOCAL_NODE]


def _candidates(target_name: str) -> list[dict[str, Any]]:
    """Up nodes whose newest report says ``target_name`` builds there, by name."""
    found = []
    for summary, report in _up_nodes():
        status = (report.get("targets") or {}).get(target_name) or {}
        if isinstance(status, dict) and status.get("available") is True:
            found.append(summary)
    return found


def _up_nodes() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    rows = list(Node.objects.all())
    reports = {r.node: r for r in HostReport.objects.filter(node__in=[n.name for n in rows])}
    now = timezone.now()
    up = []
    for node in rows:
        report = reports.get(node.name)
        summary = nodes.summary(node, report, now)
        if summary["state"] == "up" and report is not None and isinstance(report.data, dict):
            up.append((summary, report.data))
    return up


def _nobody(target_name: str, soc: str) -> Message:
    """Why no node can build: what is needed, and each node's state as its report says."""
    every = nodes.summaries()
    what = (
        say("the Ascend toolkit (CANN with ATC) for %(target)s and NPUs of SoC %(soc)s",
            target=target_name, soc=soc)
        if soc
        else say("the Ascend toolkit (CANN with ATC) for %(target)s", target=target_name)
    )  # fmt: skip
    if not every:
        return say(
            "No node with %(what)s is up: no node has reported. Start a node on the Ascend "
            "host (make node, or deploy/node/).",
            what=what,
        )
    states = joined([_node_state(n) for n in every], "; ")
    return say(
        "No node with %(what)s is up (%(states)s). Start or undrain a node on an Ascend host "
        "with CANN, then upload again.",
        what=what,
        states=states,
    )


def _node_state(node: dict[str, Any]) -> Message:
    """``name: state, SoC s, CANN c`` for one node (the words "no NPU", "no CANN" said)."""
    soc = say("SoC %(soc)s", soc=node["soc"]) if node.get("soc") else say("no NPU")
    cann = (
        say("CANN %(version)s", version=node["cann_version"])
        if node.get("cann_version")
        else say("no CANN")
    )
    state = _STATE_WORDS.get(node["state"], node["state"])
    return say(
        "%(name)s: %(state)s, %(soc)s, %(cann)s", name=node["name"], state=state, soc=soc, cann=cann
    )


#: A node's state inside a sentence (the Nodes page shows the same words).
_STATE_WORDS = {"up": say("up"), "down": say("down"), "draining": say("draining")}

"""A version rolled out to the nodes of a model's placement, one node at a time.

The serving job (webapp/registry/serving/switch.py) switches ``local`` itself, as before nodes
existed, and every other node of the placement through its queue: ``node.place`` with the
model, the version, its target and the SHA-256 of the version's package tar, which the node
downloads with its token, checks and serves with the same load-before-unload switch
(``model_store.serving.switch_version``), so the node's clients see no failed request.

The hub's ``/v2`` gateway names the version in every call it forwards, so a node must hold
the old version until the route moves, and the new one from then on. A rollout therefore has
three phases: every other node loads the new version beside the one it serves
(:func:`stage_on_nodes`); the route moves (``local``'s switch moves it once its new version is
READY beside the old, or the job moves it when ``local`` is not in the placement); then each
node in turn serves the new version alone (``node.place``, which unloads the old one).

A step that fails stops the rollout there. Before the route moved, nothing changed: staged
nodes unload the new version again (:func:`unstage`). After it moved, the nodes before the
failed one serve the new version, the node that failed kept (or was put back on) the version
it served, and the ones after it still hold both, answering the new version's calls;
:class:`NodeServing` rows say which, the job's error says it in a sentence, and the operator
retries (a node already on the version is a no-op) or rolls back.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone

from model_store.targets import get_target
from model_store.text import Message, Said, say
from webapp import dispatch
from webapp.nodes.replies import NodeTaskFailed, answer_reason, wait_for_answer
from webapp.registry.catalogue import package_tars
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.serving.models import NodeServing

#: A node's switch: its download of the package plus Triton's load, bounded.
NODE_STEP_LIMIT_S = 900.0


@dataclass
class NodeStep:
    """One node's part of a rollout, as the job's evidence and the history keep it."""

    node: str
    ok: bool
    from_version: int | None
    to_version: int | None
    duration_s: float
    reason: Said = ""
    fetched: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def serving_on(model: Model, node: str) -> int | None:
    row = NodeServing.objects.filter(model=model, node=node).first()
    return row.version if row is not None and row.state == NodeServing.State.SERVING else None


def beside_on(model: Model, node: str) -> int | None:
    """The version loaded beside the serving one on ``node`` (a canary's candidate), if any."""
    row = NodeServing.objects.filter(model=model, node=node).first()
    return row.compare_version if row is not None else None


def place_on_node(job: Job, model: Model, node: str, version: Version) -> NodeStep:
    """Makes ``version`` what ``node`` serves for ``model``; records the outcome."""
    before = serving_on(model, node)
    started = time.monotonic()
    row, _ = NodeServing.objects.get_or_create(model=model, node=node)
    if not (row.state == NodeServing.State.SERVING and row.compare_version == version.number):
        # Routers leave a placing node alone. A staged node answers both versions throughout
        # its pin (the new one is READY; the switch only unloads the old), so it stays in.
        row.state, row.error = NodeServing.State.PLACING, ""
        row.save(update_fields=["state", "error", "updated"])
    try:
        tar = package_tars.tar_of(version, f"rollout:{job.uuid.hex}")
        result = dispatch.node_task(
            node,
            "node.place",
            {"model": model.name, "version": version.number, "sha256": tar.sha256,
             "target": model.target},
        )  # fmt: skip
        answer = wait_for_answer(job, node, result, limit_s=NODE_STEP_LIMIT_S, what="switch")
    except NodeTaskFailed as exc:
        answer = {"ok": False, "reason": exc.message}
    except Exception as exc:  # the package could not be built, the broker is away, ...
        answer = {"ok": False, "reason": str(exc)[:500]}
    step = NodeStep(
        node,
        ok=answer.get("ok") is True,
        from_version=before,
        to_version=version.number,
        duration_s=round(time.monotonic() - started, 3),
        reason=_reason(answer.get("reason")),
        fetched=bool(answer.get("fetched")),
    )
    if step.ok:
        # The node's switch pinned the new version alone: anything beside it is unloaded.
        row.version, row.state = version.number, NodeServing.State.SERVING
        row.compare_version = None
    else:
        # switch_version put the previous version back when the new one did not load.
        row.version = before
        row.state = NodeServing.State.FAILED
        row.error = step.reason or say("the node did not switch")
    row.duration_s = step.duration_s
    row.save(
        update_fields=["version", "compare_version", "state", "error", "duration_s", "updated"]
    )
    return step


def load_beside_on_node(job: Job, model: Model, node: str, beside: Version | None) -> NodeStep:
    """Loads ``beside`` next to the version ``node`` serves (a canary's candidate), or, with
    None, unloads what was beside; the serving version answers throughout."""
    row = NodeServing.objects.filter(model=model, node=node).first()
    serving = row.version if row is not None and row.state == NodeServing.State.SERVING else None
    started = time.monotonic()
    if row is None or serving is None:
        answer: dict[str, Any] = {
            "ok": False, "reason": say("node %(node)s serves no version of it now", node=node),
        }  # fmt: skip
    else:
        message: dict[str, Any] = {"model": model.name, "serving": serving, "target": model.target}
        try:
            if beside is not None:
                tar = package_tars.tar_of(beside, f"canary:{job.uuid.hex}")
                message |= {"compare": beside.number, "sha256": tar.sha256}
            result = dispatch.node_task(node, "node.compare", message)
            answer = wait_for_answer(job, node, result, limit_s=NODE_STEP_LIMIT_S, what="load")
        except NodeTaskFailed as exc:
            answer = {"ok": False, "reason": exc.message}
        except Exception as exc:  # the package could not be built, the broker is away, ...
            answer = {"ok": False, "reason": str(exc)[:500]}
    to = beside.number if beside is not None else None
    step = NodeStep(
        node, ok=answer.get("ok") is True, from_version=serving, to_version=to,
        duration_s=round(time.monotonic() - started, 3), reason=_reason(answer.get("reason")),
        fetched=bool(answer.get("fetched")),
    )  # fmt: skip
    if row is not None:
        # On failure the node put its previous config back (load_alongside), so nothing is
        # beside any more when a candidate did not load, and the old one still is when an
        # unload failed: say what the node holds, as far as the hub knows.
        if step.ok:
            row.compare_version = to
        elif beside is not None:
            row.compare_version = None
        row.save(update_fields=["compare_version", "updated"])
    return step


def unload_from_node(job: Job, model: Model, node: str) -> NodeStep:
    """Unloads ``model`` from ``node`` (it left the placement) and forgets the row."""
    before = serving_on(model, node)
    started = time.monotonic()
    try:
        result = dispatch.node_task(node, "node.unload", {"model": model.name})
        answer = wait_for_answer(job, node, result, limit_s=120.0, what="unload")
    except NodeTaskFailed as exc:
        answer = {"ok": False, "reason": exc.message}
    step = NodeStep(
        node, ok=answer.get("ok") is True, from_version=before, to_version=None,
        duration_s=round(time.monotonic() - started, 3), reason=_reason(answer.get("reason")),
    )  # fmt: skip
    if step.ok:
        NodeServing.objects.filter(model=model, node=node).delete()
    else:
        NodeServing.objects.filter(model=model, node=node).update(
            state=NodeServing.State.FAILED, error=step.reason, updated=timezone.now(),
        )  # fmt: skip
    return step


def stage_on_nodes(
    job: Job, model: Model, version: Version, nodes: list[str]
) -> tuple[list[NodeStep], NodeStep | None]:
    """Loads ``version`` beside the version each of ``nodes`` serves, before any route moves:
    a router that names the version it sends a call to (the hub's ``/v2``) keeps reaching the
    old one on every node until the route moves, and finds the new one everywhere after.

    A node that serves nothing, already serves ``version`` or has it beside (a canary's
    candidate) is left for the pin. Stops at the first node that cannot load it. A target that
    holds one version at a time (``npu_ge`` swaps its whole directory) stages nothing: its
    nodes switch in one step, as before.

    Returns:
        ``(the steps of the staged nodes, the failed step or None)``.
    """
    staged: list[NodeStep] = []
    if not get_target(model.target).versions_side_by_side:
        return staged, None
    rows = {
        row.node: row
        for row in NodeServing.objects.filter(
            model=model, node__in=nodes, state=NodeServing.State.SERVING
        )
    }
    for node in nodes:
        row = rows.get(node)
        if (
            row is None
            or row.version is None
            or version.number in (row.version, row.compare_version)
        ):
            continue
        step = load_beside_on_node(job, model, node, version)
        if not step.ok:
            log_step(job, step)
            return staged, step
        loaded = f"v{version.number} loaded beside v{row.version} in {step.duration_s:.2f} s"
        jobs.log(job, f"Node {node}: {loaded}.")
        staged.append(step)
    return staged, None


def unstage(job: Job, model: Model, nodes: list[str]) -> None:
    """The rollout stopped before its route moved: the staged nodes unload the new version
    again (best effort: one that cannot keeps it loaded beside, which answers nothing)."""
    for node in nodes:
        step = load_beside_on_node(job, model, node, None)
        if step.ok:
            jobs.log(job, f"Node {node}: the staged version was unloaded again.")
        else:
            reason = f"the staged version stays loaded: {step.reason!s}"
            jobs.log(job, f"Node {node}: {reason}", "warning")


def _reason(value: Any) -> Said:
    """A node step's reason: a message stays translatable (a hub-made one, or one a node sent
    as JSON); a node's own words are kept as plain text (at most 1000 characters)."""
    return value if isinstance(value, Message) else answer_reason(value)


def log_step(job: Job, step: NodeStep) -> None:
    change = (
        f"v{step.from_version or '-'} -> v{step.to_version}"
        if step.to_version is not None
        else f"v{step.from_version or '-'} unloaded"
    )
    if step.ok:
        jobs.log(job, f"Node {step.node}: {change} in {step.duration_s:.2f} s.")
    else:
        jobs.log(job, f"Node {step.node}: {change} FAILED: {step.reason!s}", "error")


def where_now(model: Model, local_version: int | None, nodes: list[str]) -> str:
    """``"local v2, b v1, c (nothing)"``: what each node serves now, for a sentence."""
    rows = {r.node: r for r in NodeServing.objects.filter(model=model, node__in=nodes)}
    parts = []
    for node in nodes:
        version = local_version if node == "local" else getattr(rows.get(node), "version", None)
        parts.append(f"{node} v{version}" if version else f"{node} (nothing)")
    return ", ".join(parts)


def per_node(model: Model) -> dict[str, Any]:
    """``placement`` and, per node it names, ``{"node", "version", "state", ...}`` (the API's
    model detail and the model page)."""
    from webapp.nodes import summaries as ops_nodes
    from webapp.registry.serving import placement

    summaries = ops_nodes.summaries()
    states = {n["name"]: n["state"] for n in summaries}
    rows = {r.node: r for r in NodeServing.objects.filter(model=model)}
    entries = []
    for node in placement.resolve(placement.of(model), summaries) + sorted(
        set(rows) - set(placement.resolve(placement.of(model), summaries))
    ):
        if node == placement.LOCAL:
            entry: dict[str, Any] = {
                "node": node, "version": model.serving_version, "beside": model.compare_version,
                "state": "serving" if model.serving_version else "empty", "error": None,
                "duration_s": None, "updated": None,
            }  # fmt: skip
        elif node in rows:
            entry = rows[node].to_dict()
        else:
            entry = {"node": node, "version": None, "beside": None, "state": "empty",
                     "error": None, "duration_s": None, "updated": None}  # fmt: skip
        entry["node_state"] = states.get(node, "unknown")
        entries.append(entry)
    return {"placement": placement.of(model), "nodes": entries}


def note_triton_models(node: str, served: object) -> list[str]:
    """Compares what node ``node``'s Triton serves (its report's ``triton_models``) with what
    the hub placed there. A row that says "serving vN" while the Triton does not serve vN (it
    restarted empty, or someone changed it by hand) becomes ``failed`` with that reason, so
    the next reconcile places the version again. Returns the models that drifted."""
    if node == "local" or not isinstance(served, dict):
        return []
    drifted = []
    rows = NodeServing.objects.filter(node=node, state=NodeServing.State.SERVING)
    for row in rows.select_related("model"):
        versions = served.get(row.model.name)
        if isinstance(versions, list) and row.version in versions:
            continue
        row.state = NodeServing.State.FAILED
        row.error = say(
            "node %(node)s's Triton does not serve v%(version)s (it restarted, or was changed by "
            "hand); reconcile places it again", node=node, version=row.version,
        )  # fmt: skip
        row.save(update_fields=["state", "error", "updated"])
        drifted.append(row.model.name)
    return drifted


_turn = itertools.count()


def inference_node(model: Model, version: int) -> tuple[str, str, str | None] | None:
    """Where the hub's infer call for ``version`` goes: ``(node, http, grpc)``, taken in turn
    among the up nodes that serve it, or None for ``local`` (the default placement costs no
    query)."""
    candidates = inference_candidates(model, version)
    if not candidates:
        return None
    return candidates[next(_turn) % len(candidates)]


def inference_candidates(model: Model, version: int) -> list[tuple[str, str, str | None] | None]:
    """Every place that serves ``version`` of ``model`` now, or has it loaded beside (a
    canary's candidate): None for ``local``, else ``(node, http, grpc)`` for an up or draining
    node; empty for the default placement."""
    if not model.placement:
        return []
    from webapp.nodes import summaries as ops_nodes
    from webapp.registry.serving import placement

    summaries = ops_nodes.summaries()
    reachable = {n["name"]: n for n in summaries if n["state"] in ("up", "draining")}
    candidates: list[tuple[str, str, str | None] | None] = []
    local = placement.LOCAL in placement.resolve(placement.of(model), summaries)
    # A canary's candidate answers beside the serving version, wherever the placement serves.
    if local and version in (model.serving_version, model.compare_version):
        candidates.append(None)
    rows = NodeServing.objects.filter(
        Q(version=version) | Q(compare_version=version),
        model=model,
        state=NodeServing.State.SERVING,
    )
    for row in rows:
        triton = (reachable.get(row.node) or {}).get("triton") or {}
        if triton.get("http"):
            candidates.append((row.node, str(triton["http"]), triton.get("grpc")))
    return candidates

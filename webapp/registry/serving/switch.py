"""Serving, the workers' side: the switch lock, the publish gate, switch jobs and reconcile.

The web process checks and records the request, takes the model's switch lock and enqueues a
job (``webapp.registry.serving.actions``); a worker does the switch with
``model_store.serving`` and releases the lock. The lock is two columns on the model row, taken
with a conditional UPDATE, so it holds across processes and hosts; it expires
(``SWITCH_LOCK_TTL_SECONDS``), so a worker killed mid-switch cannot keep it forever, and the
next reconcile puts files and Triton back in line with the database.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any

from django.conf import settings

from model_store.runtime.errors import TritonUnavailable
from model_store.serving import (
    load_alongside,
    load_serving,
    switch_version,
    unload_model,
)
from model_store.text import Said, joined, said, say
from webapp import live
from webapp.errors import HubError
from webapp.nodes import summaries as ops_nodes
from webapp.ops.triton import get_runtime
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.retire import run_retire
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.db_outage import is_connection_error, retrying, wait_for_database
from webapp.registry.jobs.models import Event, Job
from webapp.registry.serving import placement, rollout
from webapp.registry.serving.cann_check import cann_skew, device_problem
from webapp.registry.serving.lock import acquire_lock, release_lock
from webapp.registry.serving.models import NodeServing

log = logging.getLogger(__name__)

#: The Triton client's bound on ordinary calls during a switch. How long a load may take is the
#: model's target's (settings.LOAD_TIMEOUTS, :func:`load_timeout_s`).
SWITCH_TIMEOUT_S = 180.0
#: A temporary verification model older than this belongs to no running verification (they
#: give up loading after VERIFY_TRIAL_TIMEOUT_S in webapp.registry.build.pipeline).
TRIAL_STALE_AFTER_S = 3600.0


def load_timeout_s(model: Model) -> float:
    """How long a load of ``model`` may take: its target's (npu_ge compiles at load, minutes)."""
    return float(settings.LOAD_TIMEOUTS.for_target(model.target))


# --------------------------------------------------------------------------- the publish gate


def refusal_with_code(version: Version) -> tuple[Said, str] | None:
    """``(why, code)`` when ``version`` may not answer under its model's name, else None.

    The one gate for every path that makes a version answer clients' requests: serve,
    rollback, load, compare and reconcile. Loads under names clients never use (a
    verification run, a tuning trial) are not "answering".

    * ``not_publishable``: not packaged, or its verification did not pass ("failed" or
      "not_run") and no admin has overridden it. A "not_run" verification is not a pass:
      nothing was measured, so it needs the same explicit override as a failure.
    * ``cann_version_skew``: an OM built with a newer CANN than the serving host runs
      (:mod:`webapp.registry.serving.cann_check`). No override lifts this: the runtime would refuse
      or misbehave, whatever anyone decides.
    * ``device_out_of_range``: the version runs on an NPU id the serving Triton's container
      does not have (:func:`~webapp.registry.serving.cann_check.device_problem`).
    """
    if not version.publishable:
        if version.status != Version.Status.READY:
            return say("its status is %(status)s", status=version.status), "not_publishable"
        if (version.verification or {}).get("status") == "failed":
            why = say("its verification failed and no admin has overridden it")
        else:
            why = say("its verification did not run and no admin has overridden it")
        return why, "not_publishable"
    found = cann_skew(version)
    if found is not None and found.state == "too_new":
        return found.message, "cann_version_skew"
    no_such_device = device_problem(version)
    if no_such_device is not None:
        return no_such_device, "device_out_of_range"
    return None


def refusal(version: Version) -> Said | None:
    """Why ``version`` may not answer under its model's name, or None when it may."""
    refused = refusal_with_code(version)
    return refused[0] if refused else None


def ensure_may_answer(version: Version) -> None:
    """HubError 409 (``not_publishable``, ``cann_version_skew``) unless the gate lets it answer."""
    refused = refusal_with_code(version)
    if refused is not None:
        why, code = refused
        raise HubError(
            say("Version %(number)s cannot serve: %(why)s.", number=version.number, why=why),
            code,
            409,
        )


# --------------------------------------------------------------------------- the work (worker)


def run_job(job_id: int) -> None:
    # Claim the job: one delivery runs it, any other (a re-sent message, a broker's
    # redelivery) finds it taken and stops here.
    if not Job.objects.filter(pk=job_id, state=Job.State.QUEUED).update(state=Job.State.RUNNING):
        return
    # From here on the job is "running": a database restart before the try below must be
    # waited out, or the job would stay running until reconcile found its lock expired.
    # Taking the lock again is harmless: the holder already holding it takes it.
    job = retrying(
        lambda: Job.objects.select_related("model", "version", "created_by").get(pk=job_id)
    )
    model = job.model
    # A canary's jobs (load the candidate, promote it, unload it) work under the canary's lock,
    # which the canary keeps until it ends (webapp/registry/serving/canary.py).
    holder = job.params.get("lock_holder") or job.uuid.hex
    if not retrying(lambda: acquire_lock(model, holder)):  # it expired; someone else took it
        jobs.fail(
            job, say("The switch lock was taken by another job; nothing was changed."), "lock_lost"
        )
        return
    jobs.start_step(job, job.kind)
    try:
        # The gate again, on the state at run time: an override may have been withdrawn.
        refused = refusal_with_code(job.version) if job.version is not None else None
        if refused is not None and job.version is not None:
            number = job.version.number
            _failed(job, say("v%(number)s cannot serve: %(why)s.", number=number, why=refused[0]),
                    refused[1])  # fmt: skip
        elif job.kind in (Job.Kind.SERVE, Job.Kind.ROLLBACK):
            _run_switch(job)
        elif job.kind == Job.Kind.UNLOAD:
            _run_unload(job)
        elif job.kind == Job.Kind.RETIRE:
            run_retire(job)
        elif job.kind == Job.Kind.PLACE:
            _run_place(job)
        else:
            _run_load(job)
    except TritonUnavailable as exc:
        # Raised before anything was changed (model_store.serving.switch_version): Triton is
        # down or restarting. What serves is whatever the database says; reconcile reloads it.
        _failed(
            job,
            say(
                "Triton did not answer, so nothing was changed: %(error)s. Ask again once "
                "Triton is back (the server page shows it).",
                error=said(exc),
            ),
            "triton_unavailable",
        )
    except Exception as exc:
        if is_connection_error(exc) and wait_for_database():
            # What Triton holds now may differ from what the database says serves: reconcile
            # (sent below) puts Triton back in line with the database. The lock is released.
            log.warning("serving job %s lost the database: %s", job.uuid, exc)
            _failed(
                job,
                say(
                    "The database connection was lost during the %(kind)s (%(error)s). Nothing "
                    "was recorded as changed; reconcile puts Triton back in line with the "
                    "database. Ask again.",
                    kind=job.kind, error=str(exc),
                ),
                "database_unavailable",
            )  # fmt: skip
            _reconcile_soon()
        else:
            log.exception("serving job %s crashed", job.uuid)
            _failed(
                job,
                say("Unexpected error: %(error)s. The worker log has details.", error=str(exc)),
                "internal_error",
            )
    finally:
        # A database restart must not keep the lock until it expires.
        if holder == job.uuid.hex:
            retrying(lambda: release_lock(model, holder))
        live.publish("models", {"model": model.name})


def _reconcile_soon() -> None:
    from webapp.celery_app import app

    try:
        app.send_task("workers.tasks.serve.reconcile", countdown=1)
    except Exception:  # the broker is away too: beat sends one within RECONCILE_SECONDS
        log.warning("could not queue a reconcile", exc_info=True)


def rollout_nodes(model: Model) -> list[str]:
    """The nodes ``model`` is placed on, as its placement resolves against the nodes now."""
    return placement.resolve(placement.of(model), ops_nodes.summaries())


#: After the serving version changes in the database, how long before the old version is
#: unloaded: a call that read the route just before the change is on its way to Triton.
HAND_OVER_GRACE_S = 0.5


def _route_calls_to(model: Model, to_version: int, from_version: int | None) -> None:
    """The gateway names the serving version in every call it forwards (so that a rollback's
    old version is not shadowed by a newer one Triton still holds): it must send calls to
    the new version before Triton unloads the old one. Both are loaded when this runs."""
    updates: dict[str, Any] = {"serving_version": to_version, "compare_version": None}
    if from_version is not None and from_version != to_version:
        updates["previous_version"] = from_version
    # The update moves the access epoch: every web process reads the new route on its next
    # call (webapp/access_epoch.py).
    retrying(lambda: Model.objects.filter(pk=model.pk).update(**updates))
    time.sleep(HAND_OVER_GRACE_S)


def _run_switch(job: Job) -> None:
    targets = rollout_nodes(job.model)
    if targets != [placement.LOCAL]:
        _run_rollout(job, targets)
        return
    model, params = job.model, job.params
    to_version, from_version = int(params["to"]), params.get("from")
    runtime = get_runtime(timeout=SWITCH_TIMEOUT_S)
    result = switch_version(
        get_store(),
        runtime,
        name=model.name,
        target=model.target,
        to_version=to_version,
        from_version=from_version,
        timeout_s=load_timeout_s(model),
        on_log=lambda line: jobs.log(job, line),
        hand_over=partial(_route_calls_to, model, to_version, from_version),
    )
    evidence: dict[str, Any] = {
        "from": from_version,
        "to": to_version,
        "duration_s": round(result.duration_s, 3),
        "load_s": round(result.load_s, 3) if result.load_s is not None else None,
        "reason": params.get("reason", ""),
        "changes": params.get("changes", []),
        "verification": (job.version.verification or {}).get("status") if job.version else None,
        "override": job.version.verification_override if job.version else None,
    }
    if not result.ok:
        evidence["error"] = result.reason
        evidence["restored"] = result.restored
        _failed(
            job,
            say("v%(to)s did not become ready: %(reason)s", to=to_version, reason=result.reason),
            "switch_failed",
            evidence,
        )
        return
    # A switch writes a config for the new version alone: any compared version is unloaded.
    updates: dict[str, Any] = {"serving_version": to_version, "compare_version": None}
    if from_version is not None and from_version != to_version:
        updates["previous_version"] = from_version
    # Triton serves the new version now: record it even across a database restart.
    retrying(lambda: Model.objects.filter(pk=model.pk).update(**updates))
    seconds = f"{result.duration_s:.2f}"
    values = {"who": _who(job), "model": model.name, "old": from_version, "to": to_version,
              "seconds": seconds}  # fmt: skip
    if job.kind == Job.Kind.ROLLBACK and from_version:
        said = say("%(who)s rolled back %(model)s from v%(old)s to v%(to)s in %(seconds)s s.",
                   **values)  # fmt: skip
    elif job.kind == Job.Kind.ROLLBACK:
        said = say("%(who)s rolled back %(model)s to v%(to)s in %(seconds)s s.", **values)
    elif from_version:
        said = say("%(who)s switched %(model)s from v%(old)s to v%(to)s in %(seconds)s s.",
                   **values)  # fmt: skip
    else:
        said = say("%(who)s switched %(model)s to v%(to)s in %(seconds)s s.", **values)
    retrying(
        lambda: jobs.record_event(
            model=model,
            version=job.version,
            job=job,
            kind=job.kind,
            actor=job.created_by,
            message=said,
            data=evidence,
        )
    )
    jobs.finish_step(
        job, job.kind, say("v%(to)s is READY (%(seconds)s s)", to=to_version, seconds=seconds)
    )
    jobs.succeed(job, f"v{to_version} serving")


def _run_rollout(job: Job, targets: list[str]) -> None:
    """Serve or roll back on every node of the placement: the new version beside the old on
    the other nodes, then the route moved, then each node pinned to it in turn; stop at the
    first that fails (webapp/registry/serving/rollout.py)."""
    model, params, version = job.model, job.params, job.version
    assert version is not None
    to_version, from_version = int(params["to"]), params.get("from")
    remote = [node for node in targets if node != placement.LOCAL]
    staging, stopped = (
        ([], None)
        if params.get("rollout") == "node_by_node"  # as before 2026-12: no staging
        else rollout.stage_on_nodes(job, model, version, remote)
    )
    staged = [step.node for step in staging]
    steps: list[rollout.NodeStep] = [] if stopped is None else [stopped]
    moved_here = stopped is None and placement.LOCAL not in targets and bool(staged)
    if moved_here:
        # No local switch to move the route: every node holds both versions, so move it here.
        _route_calls_to(model, to_version, from_version)
        jobs.log(job, f"Calls now go to version {to_version}.")
    for node in targets if stopped is None else []:
        if node == placement.LOCAL:
            result = switch_version(
                get_store(), get_runtime(timeout=SWITCH_TIMEOUT_S), name=model.name,
                target=model.target, to_version=to_version, from_version=from_version,
                timeout_s=load_timeout_s(model), on_log=lambda line: jobs.log(job, line),
                hand_over=partial(_route_calls_to, model, to_version, from_version),
            )  # fmt: skip
            step = rollout.NodeStep(
                node, result.ok, from_version, to_version, round(result.duration_s, 3),
                reason=result.reason or "",
            )  # fmt: skip
        else:
            step = rollout.place_on_node(job, model, node, version)
        rollout.log_step(job, step)
        steps.append(step)
        if not step.ok:
            break
    done = all(s.ok for s in steps)
    local_moved = any(s.node == placement.LOCAL and s.ok for s in steps)  # at its hand-over
    if not (moved_here or local_moved):
        rollout.unstage(job, model, staged)
    if done or local_moved or (placement.LOCAL not in targets and any(s.ok for s in steps)):
        # The version the placement serves (and local's, when local is in it).
        updates: dict[str, Any] = {"serving_version": to_version, "compare_version": None}
        if from_version is not None and from_version != to_version:
            updates["previous_version"] = from_version
        retrying(lambda: Model.objects.filter(pk=model.pk).update(**updates))
    evidence: dict[str, Any] = {
        "from": from_version, "to": to_version, "reason": params.get("reason", ""),
        "nodes": [s.to_dict() for s in steps],
        "staged": [s.to_dict() for s in staging],
        "duration_s": round(sum(s.duration_s for s in [*staging, *steps]), 3),
    }  # fmt: skip
    now = rollout.where_now(model, to_version if local_moved else from_version, targets)
    if not done:
        failed = steps[-1]
        _failed(
            job,
            say(
                "Rollout of v%(to)s stopped at node %(node)s: %(reason)s. Serving now: %(now)s. "
                "Retry (nodes already on v%(to)s are left as they are) or roll back.",
                to=to_version, node=failed.node, reason=failed.reason, now=now,
            ),
            "rollout_stopped",
            evidence,
        )  # fmt: skip
        return
    values = {"who": _who(job), "model": model.name, "to": to_version, "count": len(steps),
              "now": now, "seconds": f"{evidence['duration_s']:.2f}"}  # fmt: skip
    said = (
        say("%(who)s rolled back %(model)s to v%(to)s on %(count)s node(s) (%(now)s) in "
            "%(seconds)s s.", **values)
        if job.kind == Job.Kind.ROLLBACK
        else say("%(who)s switched %(model)s to v%(to)s on %(count)s node(s) (%(now)s) in "
                 "%(seconds)s s.", **values)
    )  # fmt: skip
    retrying(
        lambda: jobs.record_event(
            model=model, version=version, job=job, kind=job.kind, actor=job.created_by,
            message=said, data=evidence,
        )
    )  # fmt: skip
    jobs.finish_step(
        job,
        job.kind,
        say("v%(to)s serving on %(count)s node(s)", to=to_version, count=len(steps)),
    )
    jobs.succeed(job, f"v{to_version} serving on {now}")


def _run_place(job: Job) -> None:
    """Bring the nodes in line with the model's placement: the serving version where it is
    missing, unloaded where the placement no longer names the node."""
    model = job.model
    targets = rollout_nodes(model)
    version = (
        model.versions.filter(number=model.serving_version).first()
        if model.serving_version
        else None
    )
    steps: list[rollout.NodeStep] = []
    for node in targets:
        if version is None or node == placement.LOCAL:
            continue
        if rollout.serving_on(model, node) != version.number:
            steps.append(rollout.place_on_node(job, model, node, version))
            rollout.log_step(job, steps[-1])
        elif rollout.beside_on(model, node) not in (None, model.compare_version):
            # A candidate left beside after its canary ended: the serving version alone.
            steps.append(_beside_on(job, model, node, None))
    for row in NodeServing.objects.filter(model=model).exclude(node__in=targets):
        steps.append(rollout.unload_from_node(job, model, row.node))
        rollout.log_step(job, steps[-1])
    runtime = get_runtime(timeout=SWITCH_TIMEOUT_S)
    local_ready = model.name in {
        r["name"] for r in runtime.repository_index() if r.get("state") == "READY"
    }
    if placement.LOCAL not in targets and local_ready:
        unload_model(runtime, model.name)
        jobs.log(job, "Node local: unloaded (not in the placement).")
    elif placement.LOCAL in targets and version is not None and not local_ready:
        ok, reason = load_serving(get_store(), runtime, model.name, timeout_s=load_timeout_s(model))
        steps.append(rollout.NodeStep(placement.LOCAL, ok, None, version.number, 0.0, reason))
        rollout.log_step(job, steps[-1])
    failed = [s for s in steps if not s.ok]
    if failed:
        _failed(
            job,
            joined(
                [say("node %(node)s: %(reason)s", node=s.node, reason=s.reason) for s in failed],
                "; ",
            ),
            "placement_incomplete",
            {"nodes": [s.to_dict() for s in steps]},
        )
        return
    jobs.finish_step(job, job.kind, say("%(count)s node(s) changed", count=len(steps)))
    jobs.succeed(job, f"placed on {', '.join(targets) or 'no node'}")


def _run_unload(job: Job) -> None:
    model = job.model
    unload_model(get_runtime(timeout=60), model.name, timeout_s=60)
    jobs.record_event(
        model=model, job=job, kind="unload", actor=job.created_by,
        message=say("%(who)s unloaded %(model)s; it no longer answers requests.",
                    who=_who(job), model=model.name),
        data={"reason": job.params.get("reason", "")},
    )  # fmt: skip
    jobs.finish_step(job, job.kind, say("unloaded"))
    jobs.succeed(job)


def _run_compare(job: Job) -> None:
    model = job.model
    extra = job.params.get("compare")
    assert model.serving_version is not None
    targets = rollout_nodes(model)
    if targets == [placement.LOCAL]:
        ok, reason = _beside_on_local(job, model, extra)
    else:
        ok, reason = _beside_on_nodes(job, model, targets, extra)
    if not ok:
        _failed(
            job,
            say(
                "v%(extra)s did not load beside v%(serving)s: %(reason)s",
                extra=extra, serving=model.serving_version, reason=reason,
            )
            if extra is not None
            else say("the version beside v%(serving)s was not unloaded everywhere: %(reason)s",
                     serving=model.serving_version, reason=reason),
            "load_failed",
        )  # fmt: skip
        return
    Model.objects.filter(pk=model.pk).update(compare_version=extra)
    values = {"who": _who(job), "extra": extra, "model": model.name,
              "serving": model.serving_version}  # fmt: skip
    if "canary" in job.params and extra is not None:
        message = say(
            "v%(extra)s of %(model)s is loaded beside v%(serving)s for its canary.", **values
        )
    elif "canary" in job.params:
        message = say(
            "The canary's candidate is unloaded: only v%(serving)s of %(model)s is loaded.",
            **values,
        )
    elif extra is not None:
        message = say(
            "%(who)s loaded v%(extra)s of %(model)s beside v%(serving)s to compare.", **values
        )
    else:
        message = say(
            "%(who)s stopped comparing: only v%(serving)s of %(model)s is loaded.", **values
        )
    jobs.record_event(model=model, job=job, kind="compare", actor=job.created_by, message=message)
    jobs.finish_step(job, job.kind, say("READY"))
    jobs.succeed(job)


def _beside_on_local(job: Job, model: Model, extra: int | None) -> tuple[bool, Said]:
    assert model.serving_version is not None
    ok, reason = load_alongside(
        get_store(), get_runtime(timeout=SWITCH_TIMEOUT_S), model.name, model.serving_version,
        extra, timeout_s=load_timeout_s(model),
    )  # fmt: skip
    return ok, reason


def _beside_on_nodes(
    job: Job, model: Model, targets: list[str], extra: int | None
) -> tuple[bool, Said]:
    """Loads ``extra`` beside the serving version on every node of the placement, one node
    at a time (None: unloads it everywhere). A candidate that fails to load on one node is
    unloaded again from the nodes before it, so it answers everywhere or nowhere."""
    version = model.versions.filter(number=extra).first() if extra is not None else None
    done: list[str] = []
    failed: list[rollout.NodeStep] = []
    for node in targets:
        step = _beside_on(job, model, node, version)
        if step.ok:
            done.append(node)
            continue
        failed.append(step)
        if extra is not None:
            break  # the rest were not touched; the ones before are put back below
    if not failed:
        return True, ""
    if extra is not None:
        for node in done:
            _beside_on(job, model, node, None)
    first = failed[0]
    return False, say("node %(node)s: %(reason)s", node=first.node, reason=first.reason)


def _beside_on(job: Job, model: Model, node: str, version: Version | None) -> rollout.NodeStep:
    """One node's part of :func:`_beside_on_nodes`, logged in the job."""
    extra = version.number if version is not None else None
    if node == placement.LOCAL:
        started = time.monotonic()
        ok, reason = _beside_on_local(job, model, extra)
        step = rollout.NodeStep(node, ok, model.serving_version, extra,
                                round(time.monotonic() - started, 3), reason=reason)  # fmt: skip
    else:
        step = rollout.load_beside_on_node(job, model, node, version)
    change = (
        f"v{extra} beside v{step.from_version}" if extra is not None
        else f"v{step.from_version} alone"
    )  # fmt: skip
    if step.ok:
        jobs.log(job, f"Node {node}: {change} in {step.duration_s:.2f} s.")
    else:
        jobs.log(job, f"Node {node}: {change} FAILED: {step.reason!s}", "error")
    return step


def _run_load(job: Job) -> None:
    model = job.model
    if "compare" in job.params:
        _run_compare(job)
        return
    ok, reason = load_serving(
        get_store(), get_runtime(timeout=SWITCH_TIMEOUT_S), model.name,
        timeout_s=load_timeout_s(model),
    )  # fmt: skip
    if not ok:
        _failed(job, say("%(model)s did not load: %(reason)s", model=model.name, reason=reason),
                "load_failed")  # fmt: skip
        return
    jobs.record_event(
        model=model, job=job, kind="load", actor=job.created_by,
        message=say("%(who)s loaded %(model)s (v%(version)s).", who=_who(job), model=model.name,
                    version=model.serving_version),
        data={"reason": job.params.get("reason", "")},
    )  # fmt: skip
    jobs.finish_step(job, job.kind, say("READY"))
    jobs.succeed(job)


def _failed(job: Job, message: Said, code: str, evidence: dict[str, Any] | None = None) -> None:
    jobs.log(job, message, "error")
    jobs.fail(job, message, code)
    data = evidence or {"code": code}
    retrying(lambda: Event.objects.filter(job=job, kind__in=("job.failed",)).update(data=data))


def _who(job: Job) -> Said:
    return job.created_by.get_username() if job.created_by else say("the hub")

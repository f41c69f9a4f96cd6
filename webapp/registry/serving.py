"""Serving, the workers' side: the switch lock, the publish gate, switch jobs and reconcile.

The web process checks and records the request, takes the model's switch lock and enqueues a
job (``webapp.registry.actions.serving``); a worker does the switch with
``model_store.serving`` and releases the lock. The lock is two columns on the model row, taken
with a conditional UPDATE, so it holds across processes and hosts; it expires
(``SWITCH_LOCK_TTL_SECONDS``), so a worker killed mid-switch cannot keep it forever, and the
next reconcile puts files and Triton back in line with the database.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from model_store.runtime.errors import TritonUnavailable
from model_store.serving import (
    is_trial_name,
    load_alongside,
    load_serving,
    remove_stale_trials,
    repository_state,
    switch_version,
    unload_model,
)
from model_store.text import Message, Said, joined, said, say, say_n
from webapp import live
from webapp.errors import HubError
from webapp.ops import nodes as ops_nodes
from webapp.ops.triton import get_runtime
from webapp.registry import jobs, placement, rollout
from webapp.registry.cann_check import cann_skew, device_problem
from webapp.registry.db_outage import is_connection_error, retrying, wait_for_database
from webapp.registry.models import Event, Job, Model, NodeServing, ReconcileReport, Version
from webapp.registry.retire import run_retire
from webapp.registry.storage import get_store

log = logging.getLogger(__name__)

SWITCH_TIMEOUT_S = 180.0
#: A temporary verification model older than this belongs to no running verification (they
#: give up loading after VERIFY_TRIAL_TIMEOUT_S in webapp.registry.pipeline).
TRIAL_STALE_AFTER_S = 3600.0


def lock_ttl() -> timedelta:
    """Longer than any switch (load + warm-up + restore), short enough to recover from a crash."""
    return timedelta(seconds=settings.SWITCH_LOCK_TTL_SECONDS)


# --------------------------------------------------------------------------- the lock


def acquire_lock(model: Model, holder: str) -> bool:
    now = timezone.now()
    free = Q(lock_expires__isnull=True) | Q(lock_expires__lt=now) | Q(lock_holder=holder)
    taken = Model.objects.filter(free, pk=model.pk).update(
        lock_holder=holder, lock_expires=now + lock_ttl()
    )
    return taken == 1


#: Reconcile takes a model's lock under this prefix while it checks that one model.
RECONCILE_HOLDER_PREFIX = "reconcile-"
#: How long a person's request waits for reconcile to finish with a model before refusing:
#: reconcile is the hub's own housekeeping (a check, at most one reload), not someone else's
#: switch, so a click that happens to meet it should not be turned away.
RECONCILE_WAIT_S = 15.0


def acquire_lock_or_wait_for_reconcile(model: Model, holder: str) -> bool:
    """``acquire_lock``, waiting up to RECONCILE_WAIT_S while the holder is reconcile."""
    deadline = time.monotonic() + RECONCILE_WAIT_S
    while not acquire_lock(model, holder):
        model.refresh_from_db(fields=["lock_holder", "lock_expires"])
        if not model.lock_holder.startswith(RECONCILE_HOLDER_PREFIX):
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def release_lock(model: Model, holder: str) -> None:
    Model.objects.filter(pk=model.pk, lock_holder=holder).update(lock_holder="", lock_expires=None)


def lock_busy_error(model: Model) -> HubError:
    model.refresh_from_db(fields=["lock_holder", "lock_expires"])
    if model.lock_holder.startswith(RECONCILE_HOLDER_PREFIX):
        return HubError(
            f"The hub's periodic check is repairing {model.name} (it reloads what Triton "
            "forgot after a restart). Try again in a few seconds.",
            "switch_in_progress",
            409,
        )
    holder = _as_uuid(model.lock_holder)
    job = Job.objects.filter(uuid=holder).first() if holder else None
    who = f" by {job.created_by.get_username()}" if job and job.created_by else ""
    return HubError(
        f"Another switch of {model.name} is in progress{who}. Wait for it to finish "
        f"(job {model.lock_holder}), then try again.",
        "switch_in_progress",
        409,
    )


def _as_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(hex=text)
    except ValueError:
        return None


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
      (:mod:`webapp.registry.cann_check`). No override lifts this: the runtime would refuse
      or misbehave, whatever anyone decides.
    * ``device_out_of_range``: the version runs on an NPU id the serving Triton's container
      does not have (:func:`~webapp.registry.cann_check.device_problem`).
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
    job = Job.objects.select_related("model", "version", "created_by").get(pk=job_id)
    model = job.model
    holder = job.uuid.hex
    if not acquire_lock(model, holder):  # the lock expired and someone else took it
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
        retrying(lambda: release_lock(model, holder))
        live.publish("models", {"model": model.name})


def _reconcile_soon() -> None:
    from webapp.celery_app import app

    try:
        app.send_task("workers.tasks.serve.reconcile", countdown=1)
    except Exception:  # the broker is away too: beat sends one within RECONCILE_SECONDS
        log.warning("could not queue a reconcile", exc_info=True)


def _rollout_nodes(model: Model) -> list[str]:
    return placement.resolve(placement.of(model), ops_nodes.summaries())


def _run_switch(job: Job) -> None:
    targets = _rollout_nodes(job.model)
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
        timeout_s=SWITCH_TIMEOUT_S,
        on_log=lambda line: jobs.log(job, line),
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
    """Serve or roll back on every node of the placement, one node at a time; stop at the
    first that fails (webapp/registry/rollout.py)."""
    model, params, version = job.model, job.params, job.version
    assert version is not None
    to_version, from_version = int(params["to"]), params.get("from")
    steps: list[rollout.NodeStep] = []
    for node in targets:
        if node == placement.LOCAL:
            result = switch_version(
                get_store(), get_runtime(timeout=SWITCH_TIMEOUT_S), name=model.name,
                target=model.target, to_version=to_version, from_version=from_version,
                timeout_s=SWITCH_TIMEOUT_S, on_log=lambda line: jobs.log(job, line),
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
    local_moved = any(s.node == placement.LOCAL and s.ok for s in steps)
    if done or local_moved or (placement.LOCAL not in targets and any(s.ok for s in steps)):
        # The version the placement serves (and local's, when local is in it).
        updates: dict[str, Any] = {"serving_version": to_version, "compare_version": None}
        if from_version is not None and from_version != to_version:
            updates["previous_version"] = from_version
        retrying(lambda: Model.objects.filter(pk=model.pk).update(**updates))
    evidence: dict[str, Any] = {
        "from": from_version, "to": to_version, "reason": params.get("reason", ""),
        "nodes": [s.to_dict() for s in steps],
        "duration_s": round(sum(s.duration_s for s in steps), 3),
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
    targets = _rollout_nodes(model)
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
        ok, reason = load_serving(get_store(), runtime, model.name, timeout_s=SWITCH_TIMEOUT_S)
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
    ok, reason = load_alongside(
        get_store(),
        get_runtime(timeout=SWITCH_TIMEOUT_S),
        model.name,
        model.serving_version,
        extra,
        timeout_s=SWITCH_TIMEOUT_S,
    )
    if not ok:
        _failed(
            job,
            say(
                "v%(extra)s did not load beside v%(serving)s: %(reason)s",
                extra=extra, serving=model.serving_version, reason=reason,
            ),
            "load_failed",
        )  # fmt: skip
        return
    Model.objects.filter(pk=model.pk).update(compare_version=extra)
    values = {"who": _who(job), "extra": extra, "model": model.name,
              "serving": model.serving_version}  # fmt: skip
    message = (
        say("%(who)s loaded v%(extra)s of %(model)s beside v%(serving)s to compare.", **values)
        if extra is not None
        else say("%(who)s stopped comparing: only v%(serving)s of %(model)s is loaded.", **values)
    )
    jobs.record_event(model=model, job=job, kind="compare", actor=job.created_by, message=message)
    jobs.finish_step(job, job.kind, say("READY"))
    jobs.succeed(job)


def _run_load(job: Job) -> None:
    model = job.model
    if "compare" in job.params:
        _run_compare(job)
        return
    ok, reason = load_serving(
        get_store(), get_runtime(timeout=SWITCH_TIMEOUT_S), model.name, timeout_s=SWITCH_TIMEOUT_S
    )
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


# --------------------------------------------------------------------------- reconcile


def reconcile() -> ReconcileReport:
    """Compare database, repository and Triton; repair what is safe; keep the rest as warnings.

    Safe repairs: reload serving models Triton forgot (explicit mode forgets everything on a
    restart); rewrite a config.pbtxt that disagrees with the database; remove stale staging
    directories. Models whose lock is held are skipped (a switch is in progress).
    """
    store = get_store()
    runtime = get_runtime(timeout=SWITCH_TIMEOUT_S)
    repairs: list[Said] = []
    warnings: list[Said] = []
    # Jobs whose worker is gone are failed whether or not Triton answers.
    _fail_interrupted_jobs(repairs)
    if not runtime.is_live():
        warnings.append(say("Triton is not reachable; nothing was compared."))
        return _save_report(repairs, warnings)
    for uuid_text in requeue_stalled_jobs():
        repairs.append(say("sent the queued job %(job)s to the workers again.", job=uuid_text))
    known = set()
    for model in Model.objects.all():
        known.add(model.name)
        if model.lock_expires and model.lock_expires > timezone.now():
            continue
        holder = f"{RECONCILE_HOLDER_PREFIX}{uuid.uuid4().hex[:8]}"
        if not acquire_lock(model, holder):
            continue
        try:
            if placement.LOCAL not in _rollout_nodes(model):
                _keep_off_local(runtime, model, repairs)
                continue
            _reconcile_model(store, runtime, model, repairs, warnings)
            # What is still wrong after the repairs, in the store's own plain words.
            for problem in repository_state(store, runtime, model.name)["problems"]:
                warnings.append(say("%(model)s: %(problem)s", model=model.name, problem=problem))
        except Exception as exc:
            log.exception("reconcile of %s failed", model.name)
            warnings.append(
                say(
                    "%(model)s: could not be checked (%(error)s).", model=model.name, error=str(exc)
                )
            )
        finally:
            release_lock(model, holder)
    for name in _place_on_nodes_that_miss_it():
        repairs.append(
            say("%(model)s: a node of its placement does not serve it; a placement job is queued.",
                model=name)
        )  # fmt: skip
    # A verification's temporary model (model_store.serving.trial) is ours, not drift; one a
    # crashed worker left behind is removed once older than any verification can take.
    from webapp.registry.tuning import remove_abandoned_trials  # it imports this module

    repairs.extend(remove_abandoned_trials())
    for trial in remove_stale_trials(store, runtime, older_than_s=TRIAL_STALE_AFTER_S):
        repairs.append(
            say("removed the temporary model %(trial)s a stopped verification left.", trial=trial)
        )
    for row in runtime.repository_index():
        if is_trial_name(row["name"]):
            continue
        if row["name"] not in known and row.get("state") == "READY":
            warnings.append(
                say("Triton serves %(model)s, which this hub does not know.", model=row["name"])
            )
    return _save_report(repairs, warnings)


def _keep_off_local(runtime: Any, model: Model, repairs: list[Said]) -> None:
    """The placement leaves ``local`` out: the stack's Triton should not serve the model."""
    ready = any(
        r["name"] == model.name and r.get("state") == "READY" for r in runtime.repository_index()
    )
    if ready:
        unload_model(runtime, model.name)
        repairs.append(
            say("%(model)s: not placed on local; unloaded from its Triton.", model=model.name)
        )


def _place_on_nodes_that_miss_it() -> list[str]:
    """Queue a placement job for each model that an up node of its placement does not serve
    as recorded (a node that joined late, or came back): the nodes' side of reconcile."""
    from webapp.registry.actions.serving import queue_locked_job

    summaries = ops_nodes.summaries()
    up = {n["name"] for n in summaries if n["state"] == "up"} - {placement.LOCAL}
    if not up:
        return []
    queued = []
    for model in Model.objects.exclude(placement={}).exclude(serving_version=None):
        rows = {r.node: r for r in model.node_servings.all()}
        missing = [
            node
            for node in placement.resolve(placement.of(model), summaries)
            if node in up
            and not (
                (row := rows.get(node)) is not None
                and row.version == model.serving_version
                and row.state == NodeServing.State.SERVING
            )
        ]
        if not missing:
            continue
        try:
            queue_locked_job(
                model, Job.Kind.PLACE, None, params={"missing": missing, "reason": "reconcile"},
                message=say("Reconcile: %(nodes)s should serve %(model)s v%(version)s.",
                            nodes=", ".join(missing), model=model.name,
                            version=model.serving_version),
                version=model.versions.filter(number=model.serving_version or 0).first(),
            )  # fmt: skip
        except HubError:  # a switch holds the lock: the next reconcile looks again
            continue
        queued.append(model.name)
    return queued


def after_triton_restart(down_s: float, exit_status: str) -> ReconcileReport:
    """The launcher restarted a crashed Triton: record the outage, reload what served at once.

    Triton in explicit mode starts with nothing loaded, so every serving model failed its
    clients from the crash until now; the history of each says so, then says when it
    answered again.
    """
    started = time.monotonic()
    serving = list(Model.objects.exclude(serving_version=None))
    for model in serving:
        jobs.record_event(
            model=model,
            kind="triton.outage",
            message=say(
                "Triton stopped (%(status)s); the launcher restarted it after %(seconds)s s. "
                "Requests for %(model)s failed meanwhile.",
                status=exit_status,
                seconds=f"{down_s:.1f}",
                model=model.name,
            ),
            data={"down_s": down_s, "exit_status": exit_status},
        )
    # A switch that was running when Triton died still holds its model's lock for a moment
    # (it fails, or restores); reconcile skips locked models, so let those switches end first.
    _wait_for_switches([m.pk for m in serving], timeout_s=60)
    report = reconcile()
    ready = {
        (row["name"], row.get("version"))
        for row in get_runtime(timeout=10).repository_index()
        if row.get("state") == "READY"
    }
    for model in serving:
        back = (model.name, str(model.serving_version)) in ready
        values = {"version": model.serving_version, "model": model.name,
                  "seconds": f"{down_s + time.monotonic() - started:.1f}"}  # fmt: skip
        jobs.record_event(
            model=model,
            kind="triton.reloaded" if back else "triton.reload_failed",
            message=(
                say("v%(version)s of %(model)s answers again, %(seconds)s s after Triton "
                    "stopped.", **values)
                if back
                else say("v%(version)s of %(model)s did not load again after Triton's restart; "
                         "see the server page's reconcile warnings.", **values)
            ),
        )  # fmt: skip
    return report


def _wait_for_switches(model_ids: list[int], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    locked = Model.objects.filter(pk__in=model_ids, lock_expires__gt=timezone.now())
    while time.monotonic() < deadline and locked.exists():
        time.sleep(0.5)


SERVING_KINDS = (Job.Kind.SERVE, Job.Kind.ROLLBACK, Job.Kind.LOAD, Job.Kind.UNLOAD, Job.Kind.RETIRE)
#: A serving job still queued after this long may have lost its message (Redis restarted
#: between the publish and the worker's acknowledgement); sending it again is safe, since
#: :func:`run_job` claims the job first.
STALLED_AFTER = timedelta(seconds=5)


def requeue_stalled_jobs(now: Any = None) -> list[str]:
    """Send the messages of serving jobs that are still queued again; their uuids."""
    cutoff = (now or timezone.now()) - STALLED_AFTER
    stalled = list(
        Job.objects.filter(kind__in=SERVING_KINDS, state=Job.State.QUEUED, created__lt=cutoff)
    )
    from webapp.registry.actions.serving import enqueue_serving_job
    from webapp.registry.actions.versions import _enqueue_compile

    for job in stalled:
        enqueue_serving_job(job)
    # Compile jobs are sent again only when their first sending failed (a chain sent twice
    # would build twice): actions.versions._enqueue_compile marked them.
    unsent = list(Job.objects.filter(kind=Job.Kind.COMPILE, state=Job.State.QUEUED,
                                     params__unsent=True))  # fmt: skip
    for job in unsent:
        job.params = {k: v for k, v in job.params.items() if k != "unsent"}
        Job.objects.filter(pk=job.pk).update(params=job.params)
        _enqueue_compile(job)
    return [str(job.uuid) for job in [*stalled, *unsent]]


def _fail_interrupted_jobs(repairs: list[Said]) -> None:
    """A serving job still "running" after its lock expired lost its worker (killed, host
    down): say so, so nobody waits for it; the model itself is repaired below. A compile job
    whose step runs in a process that is gone, likewise (pipeline.fail_interrupted_compiles)."""
    from webapp.registry.pipeline import fail_interrupted_compiles

    repairs.extend(fail_interrupted_compiles())
    cutoff = timezone.now() - lock_ttl()
    stale = Job.objects.filter(
        kind__in=SERVING_KINDS, state__in=(Job.State.QUEUED, Job.State.RUNNING), created__lt=cutoff
    ).select_related("model")
    for job in stale:
        model = job.model
        if (
            model.lock_holder == job.uuid.hex
            and model.lock_expires
            and model.lock_expires > timezone.now()
        ):
            continue
        jobs.fail(
            job,
            say("The worker stopped in the middle of this job; reconcile checked the model."),
            "interrupted",
        )
        repairs.append(interrupted_repair(model.name, job.kind, str(job.uuid)))
    # A sweep is capped at a few minutes (workers/tasks/perf.py); one still open long after
    # lost its worker.
    now = timezone.now()
    running_too_long = Q(state=Job.State.RUNNING, started__lt=now - timedelta(minutes=10))
    # Queued sweeps may wait behind compile jobs (an hour at most each), so give them longer.
    queued_too_long = Q(state=Job.State.QUEUED, created__lt=now - timedelta(hours=3))
    for job in Job.objects.filter(
        running_too_long | queued_too_long, kind=Job.Kind.SWEEP
    ).select_related("model"):
        jobs.fail(job, say("The worker stopped in the middle of this sweep."), "interrupted")
        repairs.append(
            say("%(model)s: marked the interrupted sweep %(job)s as failed.",
                model=job.model.name, job=str(job.uuid))
        )  # fmt: skip


def _reconcile_model(
    store: Any, runtime: Any, model: Model, repairs: list[Said], warnings: list[Said]
) -> None:
    state = repository_state(store, runtime, model.name)
    for path in state.get("stale_staging", []):
        shutil.rmtree(path, ignore_errors=True)
        repairs.append(
            say("%(model)s: removed the stale staging directory %(path)s.",
                model=model.name, path=str(path))
        )  # fmt: skip
    if model.serving_version is None:
        if state.get("ready_versions"):
            warnings.append(
                say("%(model)s: Triton serves it but the hub records no serving version.",
                    model=model.name)
            )  # fmt: skip
        return
    serving = model.serving_version
    compare = model.compare_version
    if compare is not None and not _passes_gate(model, compare):
        # Never bring back a version the gate refuses: serve the serving one alone.
        warnings.append(
            say("%(model)s: v%(version)s may not answer; it is no longer loaded beside.",
                model=model.name, version=compare)
        )  # fmt: skip
        compare = None
    expected = sorted({v for v in (serving, compare) if v is not None})
    if state.get("policy_versions") != expected:
        result = switch_version(
            store, runtime, name=model.name, target=model.target, to_version=serving,
            from_version=None, timeout_s=SWITCH_TIMEOUT_S,
        )  # fmt: skip
        if result.ok:
            Model.objects.filter(pk=model.pk).update(compare_version=None)
            repairs.append(
                say("%(model)s: the repository config disagreed; v%(version)s serves again.",
                    model=model.name, version=serving)
            )  # fmt: skip
        else:
            warnings.append(
                say("%(model)s: v%(version)s could not be restored: %(reason)s",
                    model=model.name, version=serving, reason=result.reason)
            )  # fmt: skip
        return
    if serving not in state.get("ready_versions", []):
        ok, reason = load_serving(store, runtime, model.name, timeout_s=SWITCH_TIMEOUT_S)
        if ok:
            repairs.append(
                say("%(model)s: Triton had forgotten it; v%(version)s is loaded again.",
                    model=model.name, version=serving)
            )  # fmt: skip
            _note_late_reload(model, serving)
        else:
            warnings.append(
                say("%(model)s: v%(version)s does not load: %(reason)s",
                    model=model.name, version=serving, reason=reason)
            )  # fmt: skip


def _note_late_reload(model: Model, serving: int) -> None:
    """Close an outage whose reload failed: a later reconcile loaded the model after all, so its
    history says when it answered again (an outage's own reload says so itself)."""
    last = model.events.filter(kind__startswith="triton.").order_by("-created").first()
    if last is None or last.kind != "triton.reload_failed":
        return
    jobs.record_event(
        model=model,
        kind="triton.reloaded",
        message=say("v%(version)s of %(model)s answers again: a later reconcile loaded it.",
                    version=serving, model=model.name),
    )  # fmt: skip


def interrupted_repair(model: str, kind: str, job: str) -> Message:
    """The repair line for a job whose worker is gone: one whole sentence per job kind."""
    values = {"model": model, "job": job}
    if kind == Job.Kind.SERVE:
        return say("%(model)s: marked the interrupted serve job %(job)s as failed.", **values)
    if kind == Job.Kind.ROLLBACK:
        return say("%(model)s: marked the interrupted rollback job %(job)s as failed.", **values)
    if kind == Job.Kind.LOAD:
        return say("%(model)s: marked the interrupted load job %(job)s as failed.", **values)
    if kind == Job.Kind.UNLOAD:
        return say("%(model)s: marked the interrupted unload job %(job)s as failed.", **values)
    if kind == Job.Kind.RETIRE:
        return say("%(model)s: marked the interrupted retire job %(job)s as failed.", **values)
    return say("%(model)s: marked the interrupted %(kind)s job %(job)s as failed.",
               kind=str(kind), **values)  # fmt: skip


def _passes_gate(model: Model, number: int) -> bool:
    version = model.versions.filter(number=number).first()
    return version is not None and refusal(version) is None


def _repairs_said(repairs: list[Said]) -> Said:
    """The repairs one after the other, translatable; a very long list is cut to its first
    lines and a count of the rest (an event's message stays short)."""
    shown: list[Said] = []
    for line in repairs:
        if sum(len(str(kept)) for kept in [*shown, line]) > 900:
            break
        shown.append(line)
    if len(shown) < len(repairs):
        rest = len(repairs) - len(shown)
        shown.append(say_n("and %(count)s more.", "and %(count)s more.", rest))
    return joined(shown)


def _save_report(repairs: list[Said], warnings: list[Said]) -> ReconcileReport:
    """Keep the lines as messages, which pages and answers say in their reader's language."""
    report, _ = ReconcileReport.objects.get_or_create(pk=1)
    report.repairs = list(repairs)
    report.warnings = list(warnings)
    report.save()
    if repairs:
        jobs.record_event(
            kind="reconcile",
            message=say("Reconcile repaired: %(repairs)s", repairs=_repairs_said(repairs)),
            data={"repairs": repairs, "warnings": warnings},
        )
    live.publish("server", {"reconciled": True})
    return report

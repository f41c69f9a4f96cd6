"""Reconcile: the database, the repository and Triton compared, and what is safe repaired.

Run by the workers at start, every ``RECONCILE_SECONDS``, after Triton restarts and on
``manage.py reconcile``. It is the top of the registry: it may queue switches and builds
(the rooms' ``actions``) and fail the jobs of a worker that is gone (``build/pipeline.py``,
``performance/tuning.py``); nothing below imports it.
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from model_store.serving import (
    is_trial_name,
    load_serving,
    remove_stale_trials,
    repository_state,
    switch_version,
    unload_model,
)
from model_store.text import Message, Said, joined, say, say_n
from webapp import live
from webapp.errors import HubError
from webapp.nodes import summaries as ops_nodes
from webapp.ops.triton import get_runtime
from webapp.registry.catalogue.models import Model
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.serving import canary as canary_watcher
from webapp.registry.serving import placement
from webapp.registry.serving.lock import (
    RECONCILE_HOLDER_PREFIX,
    acquire_lock,
    lock_ttl,
    release_lock,
)
from webapp.registry.serving.models import NodeServing, ReconcileReport
from webapp.registry.serving.switch import (
    SWITCH_TIMEOUT_S,
    TRIAL_STALE_AFTER_S,
    load_timeout_s,
    refusal,
    rollout_nodes,
)

log = logging.getLogger(__name__)


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
    _watch_canaries(repairs)
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
            if placement.LOCAL not in rollout_nodes(model):
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
    from webapp.registry.performance.tuning import remove_abandoned_trials  # it imports this module

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
    as recorded (a node that joined late, or came back, or still holds a candidate beside):
    the nodes' side of reconcile."""
    from webapp.registry.serving.actions.switch import queue_locked_job

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
                # A candidate left beside after its canary ended (an unload that failed):
                # placing the serving version again pins it alone.
                and row.compare_version in (None, model.compare_version)
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
    from webapp.registry.catalogue.actions.versions import enqueue_compile
    from webapp.registry.serving.actions.switch import enqueue_serving_job

    for job in stalled:
        enqueue_serving_job(job)
    # Compile jobs are sent again only when their first sending failed (a chain sent twice
    # would build twice): actions.versions.enqueue_compile marked them.
    unsent = list(Job.objects.filter(kind=Job.Kind.COMPILE, state=Job.State.QUEUED,
                                     params__unsent=True))  # fmt: skip
    for job in unsent:
        job.params = {k: v for k, v in job.params.items() if k != "unsent"}
        Job.objects.filter(pk=job.pk).update(params=job.params)
        enqueue_compile(job)
    return [str(job.uuid) for job in [*stalled, *unsent]]


def _fail_interrupted_jobs(repairs: list[Said]) -> None:
    """A serving job still "running" after its lock expired lost its worker (killed, host
    down): say so, so nobody waits for it; the model itself is repaired below. A compile job
    whose step runs in a process that is gone, likewise (pipeline.fail_interrupted_compiles)."""
    from webapp.registry.build.pipeline import fail_interrupted_compiles

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


def _watch_canaries(repairs: list[Said]) -> None:
    """No traffic split with nobody watching: wake a canary's watcher, clear a left-over split."""
    woken = canary_watcher.wake_stale()
    if woken:
        repairs.append(say_n("woke the watcher of %(count)s canary nobody looked at lately.",
                             "woke the watchers of %(count)s canaries nobody looked at lately.",
                             woken))  # fmt: skip
    for name in canary_watcher.clear_orphan_splits():
        repairs.append(say("%(model)s: its canary had ended; calls no longer go to the "
                           "candidate.", model=name))  # fmt: skip


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
            from_version=None, timeout_s=load_timeout_s(model),
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
        ok, reason = load_serving(store, runtime, model.name, timeout_s=load_timeout_s(model))
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

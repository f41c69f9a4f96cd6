"""A canary, the watcher's side: every few seconds, read both versions' numbers and act.

One look (:func:`watch`) moves an active canary on by at most one state:

* ``starting``: once the candidate is loaded beside the serving version, the first step's
  share of traffic goes to it (the model row's ``canary`` record, which every router reads);
  if it failed to load, the canary ends ``failed`` before any traffic moved.
* ``running``: :func:`model_store.canary.decide` on the step's window. A failed gate rolls
  back at once; a passed step moves to the next share; passing the step before 100% promotes.
  A person's "promote now" or "abort" is carried out here too, so one process decides.
* ``promoting``: every unpinned call already goes to the candidate; the normal switch (the
  same zero-failure one as a serve) makes it the serving version.
* ``ending``: traffic is back on the serving version; once the candidate is unloaded the
  canary reaches its outcome (rolled back, aborted or failed) and frees the lock.

The canary holds the model's switch lock throughout; each look renews it. Looks are queued
one after the other (``workers.tasks.serve.canary_watch``); reconcile wakes a canary nobody
looked at for :data:`STALE_SECONDS`, so a worker or web restart never leaves traffic split
with nobody watching.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from model_store.canary import Decision, Gates, Verdict, decide
from model_store.text import Message, Said, say
from webapp import dispatch, live
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.serving import canary_traffic
from webapp.registry.serving.actions.switch import queue_locked_job
from webapp.registry.serving.lock import lock_ttl, release_lock
from webapp.registry.serving.models import Canary

log = logging.getLogger(__name__)

#: How often an active canary is looked at.
WATCH_SECONDS = 2.0
#: A canary nobody looked at for this long gets a look from reconcile.
STALE_SECONDS = 30.0


def watch(canary_id: int) -> None:
    """One look at a canary; queues the next while it is active."""
    with transaction.atomic():
        canary = (
            Canary.objects.select_for_update(of=("self",))
            .select_related("model", "job", "created_by", "asked_by")
            .filter(pk=canary_id)
            .first()
        )
        if canary is None or not canary.is_active:
            return
        now = timezone.now()
        if canary.ticked and now - canary.ticked < timedelta(seconds=WATCH_SECONDS / 2):
            return  # another look just happened: let its chain go on alone
        canary.ticked = now
        held = Model.objects.filter(pk=canary.model_id, lock_holder=canary.holder).update(
            lock_expires=now + lock_ttl()
        )
        if not held and canary.state != Canary.State.ENDING:
            # Nobody watched it for longer than the lock lives, and someone else switched
            # since: stop splitting; the candidate's unload then fails on the lock, harmlessly.
            _end(canary, Canary.State.FAILED, say(
                "the canary lost the model's switch lock (nobody watched it for too long); "
                "calls go to the serving version again.",
            ))  # fmt: skip
        else:
            _STEP[Canary.State(canary.state)](canary)
        canary.save()
        active = canary.is_active
    live.publish("models", {"model": canary.model.name, "canary": str(canary.uuid)})
    if active:
        dispatch.canary_watch(canary.pk, countdown=WATCH_SECONDS)


def wake_stale() -> int:
    """Queue a look at every active canary nobody looked at lately (reconcile calls this)."""
    stale = timezone.now() - timedelta(seconds=STALE_SECONDS)
    forgotten = Q(ticked__lt=stale) | Q(ticked__isnull=True, created__lt=stale)
    woken = 0
    for canary_id in Canary.objects.filter(forgotten, state__in=Canary.ACTIVE).values_list(
        "pk", flat=True
    ):
        dispatch.canary_watch(canary_id)
        woken += 1
    return woken


def clear_orphan_splits() -> list[str]:
    """Stop splitting traffic for models whose canary is no longer splitting it (a crash between
    the canary's end and the write); returns the models' names."""
    splitting = Canary.objects.filter(
        state__in=(Canary.State.RUNNING, Canary.State.PROMOTING)
    ).values_list("model_id", flat=True)
    orphans = Model.all_objects.exclude(canary={}).exclude(pk__in=list(splitting))
    names = list(orphans.values_list("name", flat=True))
    if names:
        orphans.update(canary={})
    return names


# -- one step per state ---------------------------------------------------------------------------


def _starting(canary: Canary) -> None:
    job = canary.job
    if canary.asked == "abort":
        _end(canary, Canary.State.ABORTED, _asked_reason(canary))
        return
    if job is None or not job.is_finished:
        return
    if job.state != Job.State.SUCCEEDED:
        # load_alongside put the serving config back: nothing to unload, no traffic moved.
        _finish(canary, Canary.State.FAILED, say(
            "v%(version)s did not load beside v%(serving)s, so no traffic moved: %(error)s",
            version=canary.candidate, serving=canary.baseline, error=job.error,
        ))  # fmt: skip
        return
    canary.state = Canary.State.RUNNING
    _begin_step(canary, 0)


def _running(canary: Canary) -> None:
    if canary.asked == "abort":
        _end(canary, Canary.State.ABORTED, _asked_reason(canary))
        return
    if canary.asked == "promote":
        _promote(canary, say("%(user)s promoted it before the last step.", user=_asker(canary)))
        return
    window = canary.window()
    candidate = canary_traffic.read_side(window, canary.candidate)
    serving = canary_traffic.read_side(window, canary.baseline)
    started = canary.step_started or timezone.now()
    step_over = timezone.now() - started >= timedelta(seconds=canary.step_seconds)
    gates = Gates(canary.max_error_rate, canary.max_p99_ratio, canary.min_requests)
    decision = decide(candidate, serving, gates, step_over=step_over)
    if decision.verdict is Verdict.FAIL:
        _record(canary, decision)
        assert decision.reason is not None
        _end(canary, Canary.State.ROLLED_BACK, say(
            "rolled back v%(version)s at %(weight)s%%: %(why)s",
            version=canary.candidate, weight=canary.weight, why=decision.reason,
        ))  # fmt: skip
    elif decision.verdict is Verdict.EXTEND:
        last = canary.decisions[-1] if canary.decisions else {}
        if last.get("step") != canary.step_index or last.get("verdict") != "extend":
            _record(canary, decision)  # once per step: the panel shows the live counts
    elif decision.verdict is Verdict.PASS:
        _record(canary, decision)
        following = canary.step_index + 1
        if canary.steps[following] >= 100:
            _promote(canary, say(
                "v%(version)s passed every step before 100%%.", version=canary.candidate
            ))  # fmt: skip
        else:
            _begin_step(canary, following)


def _promoting(canary: Canary) -> None:
    job = canary.job
    if job is None or not job.is_finished:
        return
    if job.state == Job.State.SUCCEEDED:
        Model.objects.filter(pk=canary.model_id).update(canary={})
        _finish(canary, Canary.State.PROMOTED, say(
            "promoted v%(version)s: it serves every call now, v%(serving)s is unloaded.",
            version=canary.candidate, serving=canary.baseline,
        ))  # fmt: skip
        return
    _end(canary, Canary.State.FAILED, say(
        "the switch to v%(version)s failed, so v%(serving)s keeps serving: %(error)s",
        version=canary.candidate, serving=canary.baseline, error=job.error,
    ))  # fmt: skip


def _ending(canary: Canary) -> None:
    job = canary.job
    if job is not None and not job.is_finished:
        return
    if job is not None and job.params.get("compare") and job.state == Job.State.SUCCEEDED:
        _unload(canary)  # aborted while the candidate was loading: it loaded, unload it now
        return
    _finish(canary, Canary.State(canary.outcome or Canary.State.ROLLED_BACK), canary.reason,
            announce=False)  # fmt: skip


_STEP = {
    Canary.State.STARTING: _starting,
    Canary.State.RUNNING: _running,
    Canary.State.PROMOTING: _promoting,
    Canary.State.ENDING: _ending,
}


# -- moves --------------------------------------------------------------------------------------


def _begin_step(canary: Canary, index: int) -> None:
    canary.step_index = index
    canary.step_started = timezone.now()
    _route(canary, canary.steps[index])


def _route(canary: Canary, weight: int) -> None:
    """Send ``weight`` percent of unpinned calls to the candidate, counted in this step's window
    (every router reads the record with the model; the access epoch moves with the write)."""
    record = {"candidate": canary.candidate, "weight": weight, "window": canary.window()}
    Model.objects.filter(pk=canary.model_id).update(canary=record)


def _promote(canary: Canary, why: Message) -> None:
    actor = canary.asked_by if canary.asked else None
    canary.state = Canary.State.PROMOTING
    canary.asked = ""
    # Every unpinned call goes to the candidate before the switch unloads the serving version.
    _route(canary, 100)
    canary.job = queue_locked_job(
        canary.model,
        Job.Kind.SERVE,
        actor or canary.created_by,
        params={
            "from": canary.baseline,
            "to": canary.candidate,
            "reason": why,
            "changes": [],
            "canary": canary.uuid.hex,
        },
        message=say(
            "The canary promotes %(model)s v%(version)s: %(why)s",
            model=canary.model.name,
            version=canary.candidate,
            why=why,
        ),
        version=canary.model.versions.filter(number=canary.candidate).first(),
        holder=canary.holder,
    )
    _event(canary, "canary.promoting", why, actor)


def _end(canary: Canary, outcome: Canary.State, why: Said) -> None:
    """Traffic back on the serving version now; the candidate is unloaded; then ``outcome``.

    Before the candidate finished loading there is nothing to unload yet: ``_ending`` waits
    for the load and unloads what it loaded.
    """
    Model.objects.filter(pk=canary.model_id).update(canary={})
    actor = canary.asked_by if canary.asked else None
    canary.state, canary.outcome, canary.reason, canary.asked = (
        Canary.State.ENDING,
        outcome,
        why,
        "",
    )
    loading = canary.job is not None and not canary.job.is_finished
    if not loading:
        _unload(canary)
    _event(canary, f"canary.{outcome}", why, actor)


def _unload(canary: Canary) -> None:
    canary.job = queue_locked_job(
        canary.model,
        Job.Kind.LOAD,
        canary.created_by,
        params={
            "from": canary.baseline,
            "to": canary.baseline,
            "compare": None,
            "canary": canary.uuid.hex,
            "reason": "",
            "changes": [],
        },
        message=say(
            "The canary's candidate v%(version)s of %(model)s is unloaded.",
            version=canary.candidate,
            model=canary.model.name,
        ),
        holder=canary.holder,
    )


def _finish(canary: Canary, outcome: Canary.State, why: Said, *, announce: bool = True) -> None:
    canary.state, canary.reason, canary.asked = outcome, why, ""
    canary.finished = timezone.now()
    release_lock(canary.model, canary.holder)
    if announce:
        _event(canary, f"canary.{outcome}", why, None)


def _record(canary: Canary, decision: Decision) -> None:
    canary.decisions = [
        *canary.decisions,
        {
            "at": timezone.now().isoformat(),
            "step": canary.step_index,
            "weight": canary.weight,
            "verdict": decision.verdict.value,
            "gate": decision.gate,
            "reason": decision.reason.to_json() if decision.reason else None,
            **decision.numbers,
        },
    ]


def _event(canary: Canary, kind: str, why: Said, actor: Any) -> None:
    jobs.record_event(
        kind,
        say(
            "Canary of %(model)s v%(version)s: %(why)s",
            model=canary.model.name,
            version=canary.candidate,
            why=why,
        ),
        model=canary.model,
        version=canary.model.versions.filter(number=canary.candidate).first(),
        job=canary.job,
        actor=actor,
        data=_numbers(canary),
    )


def _numbers(canary: Canary) -> dict[str, Any]:
    last = canary.decisions[-1] if canary.decisions else {}
    return {"canary": str(canary.uuid), "weight": canary.weight, "step": canary.step_index,
            "decision": last}  # fmt: skip


def _asker(canary: Canary) -> str:
    return canary.asked_by.get_username() if canary.asked_by else "?"


def _asked_reason(canary: Canary) -> Message:
    return say("%(user)s aborted it at %(weight)s%%.", user=_asker(canary), weight=canary.weight)

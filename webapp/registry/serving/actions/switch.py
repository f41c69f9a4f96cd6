"""Asking for a serve, rollback, load, unload or comparison of versions.

Each request is checked (the publish gate, the interface change, the target's rules), takes
the model's switch lock, is recorded as a job and an Event, and is sent to a worker after
commit; the worker's side is ``webapp.registry.serving.switch``.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext

from model_store.serving import signature_changes
from model_store.targets import get_target
from model_store.text import Message, Said, from_json, joined, say
from webapp import dispatch
from webapp.errors import HubError
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.jobs.steps import initial_steps
from webapp.registry.serving.lock import (
    acquire_lock_or_wait_for_reconcile,
    lock_busy_error,
    release_lock,
)
from webapp.registry.serving.switch import SWITCH_TIMEOUT_S, ensure_may_answer
from webapp.text import localize

log = logging.getLogger(__name__)


def request_switch(
    *,
    model: Model,
    number: int,
    user: User,
    reason: Said = "",
    kind: str = Job.Kind.SERVE,
    confirm_breaking: bool = False,
    rollout: str = "staged",
) -> Job:
    """Check a serve/rollback request, take the lock and queue the switch job.

    ``rollout`` says how other nodes of the placement take the version (``staged`` or
    ``node_by_node``: webapp/registry/serving/rollout.py)."""
    version = model.versions.filter(number=number).first()
    if version is None:
        raise HubError(
            gettext("%(model)s has no version %(number)s.")
            % {"model": model.name, "number": number},
            "not_found",
            404,
        )
    ensure_may_answer(version)
    changes: list[dict[str, str]] = []
    current = (
        model.versions.filter(number=model.serving_version).first()
        if model.serving_version is not None
        else None
    )
    if current is not None and current.number != number:
        changes = [vars(c) for c in signature_changes(current.signature, version.signature)]
        breaking = [c for c in changes if c["kind"] == "breaking"]
        if breaking and not confirm_breaking:
            raise HubError(
                gettext(
                    "Version %(number)s changes the model's interface: %(changes)s. "
                    "Clients may break. Confirm to switch anyway."
                )
                % {
                    "number": number,
                    "changes": localize(joined([c["message"] for c in breaking], "; ")),
                },
                "breaking_change",
                409,
            )
    # Only the old way is recorded: a job without the key is staged.
    extra = {"rollout": rollout} if rollout != "staged" else None
    return _queue(model, kind, user, version=version, reason=reason, changes=changes, extra=extra)


def request_rollback(*, model: Model, user: User, reason: str = "", rollout: str = "staged") -> Job:
    if model.previous_version is None:
        raise HubError(
            gettext("%(model)s has no earlier serving version to roll back to.")
            % {"model": model.name},
            "no_previous",
            409,
        )
    return request_switch(
        model=model,
        number=model.previous_version,
        user=user,
        reason=reason,
        kind=Job.Kind.ROLLBACK,
        confirm_breaking=True,  # going back to what served before is the safe direction
        rollout=rollout,
    )


def request_unload(*, model: Model, user: User, reason: str = "") -> Job:
    return _queue(model, Job.Kind.UNLOAD, user, reason=reason)


def request_load(*, model: Model, user: User, reason: str = "") -> Job:
    if model.serving_version is None:
        raise HubError(
            gettext("%(model)s has no serving version; serve one first.") % {"model": model.name},
            "not_served",
            409,
        )
    serving = model.versions.filter(number=model.serving_version).first()
    if serving is not None:
        ensure_may_answer(serving)
    return _queue(model, Job.Kind.LOAD, user, reason=reason)


def request_compare(*, model: Model, number: int | None, user: User) -> Job:
    """Load version ``number`` beside the serving one (None: unload the extra one again)."""
    if model.serving_version is None:
        raise HubError(
            gettext("%(model)s is not served; serve a version first.") % {"model": model.name},
            "not_served",
            409,
        )
    if not get_target(model.target).versions_side_by_side:
        raise HubError(
            gettext(
                "%(target)s models hold one version in Triton (its backend runs the first "
                "model file it finds), so two versions cannot answer side by side."
            )
            % {"target": model.target},
            "not_supported",
            409,
        )
    version = None
    if number is not None:
        version = model.versions.filter(number=number).first()
        if version is None:
            raise HubError(
                gettext("%(model)s has no version %(number)s.")
                % {"model": model.name, "number": number},
                "not_found",
                404,
            )
        ensure_may_answer(version)
        if number == model.serving_version:
            raise HubError(
                gettext("v%(number)s is the serving version already.") % {"number": number},
                "serving",
                409,
            )
    return _queue(model, Job.Kind.LOAD, user, version=version, extra={"compare": number})


def _queue(
    model: Model,
    kind: str,
    user: User,
    *,
    version: Version | None = None,
    reason: Said = "",
    changes: list[dict[str, str]] | None = None,
    extra: dict[str, Any] | None = None,
) -> Job:
    params = {
        "from": model.serving_version,
        "to": version.number if version else model.serving_version,
        # The hub's own reasons are Texts (said in the reader's language); a person's, cut.
        "reason": reason if isinstance(reason, Message) else reason[:500],
        "changes": changes or [],
        **(extra or {}),
    }
    message = _describe(kind, model.name, params, user)
    return queue_locked_job(model, kind, user, params=params, message=message, version=version)


def queue_locked_job(
    model: Model,
    kind: str,
    user: User | None,
    *,
    params: dict[str, Any],
    message: Said,
    version: Version | None = None,
    holder: str | None = None,
) -> Job:
    """Take the model's switch lock, record the job and its ``<kind>.requested`` Event, and send
    the job to a worker once that is committed (every serving-kind request, retire included).

    The lock is held by the job from here on (the worker releases it when the job ends); if
    recording fails, it is released again so that the model is not left locked by no job.
    With ``holder``, the lock is already held by that holder (a canary, for the jobs it runs):
    the job works under it and leaves it held when it ends. Call it inside the holder's
    transaction.
    """
    job_uuid = uuid.uuid4()
    if holder is not None:
        return _record_job(
            job_uuid, model, kind, user, {**params, "lock_holder": holder}, message, version
        )
    if not acquire_lock_or_wait_for_reconcile(model, job_uuid.hex):
        raise lock_busy_error(model)
    try:
        with transaction.atomic():
            return _record_job(job_uuid, model, kind, user, params, message, version)
    except Exception:
        release_lock(model, job_uuid.hex)
        raise


def _record_job(
    job_uuid: uuid.UUID,
    model: Model,
    kind: str,
    user: User | None,
    params: dict[str, Any],
    message: Said,
    version: Version | None,
) -> Job:
    """The job row and its ``<kind>.requested`` Event; sent to a worker once committed."""
    job = Job.objects.create(
        uuid=job_uuid,
        kind=kind,
        model=model,
        version=version,
        steps=initial_steps((kind,)),
        params=params,
        created_by=user,
    )
    jobs.record_event(
        f"{kind}.requested",
        message,
        model=model,
        version=version,
        job=job,
        actor=user,
        data=job.params,
    )
    transaction.on_commit(lambda: enqueue_serving_job(job))
    return job


def enqueue_serving_job(job: Job) -> None:
    """Sends a serving-kind job (serve, rollback, load, unload, retire) to the workers."""
    try:
        dispatch.serving_job(job.pk)
    except Exception:
        # Redis (the broker) does not answer: the job stays queued and is sent again once it
        # is back (requeue_stalled_jobs, at every reconcile); the request still gets its job.
        log.warning("serving job %s could not be queued yet", job.uuid, exc_info=True)


def _describe(kind: str, name: str, p: dict[str, Any], user: User) -> Message:
    """The request's Event message, from the job's kind and params (``p``)."""
    who = user.get_username()
    if kind == Job.Kind.ROLLBACK:
        if p.get("from"):
            text = say(
                "%(user)s asked to roll back %(model)s v%(to)s (from v%(from)s)",
                user=who, model=name, to=p["to"], **{"from": p["from"]},
            )  # fmt: skip
        else:
            text = say(
                "%(user)s asked to roll back %(model)s v%(to)s", user=who, model=name, to=p["to"]
            )
    elif kind == Job.Kind.SERVE:
        if p.get("from"):
            text = say(
                "%(user)s asked to serve %(model)s v%(to)s (from v%(from)s)",
                user=who, model=name, to=p["to"], **{"from": p["from"]},
            )  # fmt: skip
        else:
            text = say(
                "%(user)s asked to serve %(model)s v%(to)s", user=who, model=name, to=p["to"]
            )
    elif "compare" in p:
        if p["compare"] is not None:
            text = say(
                "%(user)s asked to load %(model)s v%(compare)s beside v%(from)s",
                user=who, model=name, compare=p["compare"], **{"from": p["from"]},
            )  # fmt: skip
        else:
            text = say(
                "%(user)s asked to stop comparing versions of %(model)s", user=who, model=name
            )
    elif kind == Job.Kind.LOAD:
        text = say("%(user)s asked to load %(model)s", user=who, model=name)
    elif kind == Job.Kind.UNLOAD:
        text = say("%(user)s asked to unload %(model)s", user=who, model=name)
    else:
        text = say("%(user)s asked to %(kind)s %(model)s", user=who, kind=str(kind), model=name)
    return with_reason(text, from_json(p.get("reason")))


def with_reason(request: Message, reason: Said) -> Message:
    """A request's Event message: the request, then the reason given (or a full stop)."""
    if reason:
        return say("%(request)s: %(reason)s", request=request, reason=reason)
    return say("%(request)s.", request=request)


def wait_for(job: Job, timeout_s: float = SWITCH_TIMEOUT_S + 30) -> Job:
    """Block until a job ends (the API's serve call returns when READY or failed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job.refresh_from_db()
        # The worker marks the job finished, then releases the model's switch lock: answer
        # once both happened, so that a client's next switch is not refused as "in progress".
        holding = Model.objects.filter(pk=job.model_id, lock_holder=job.uuid.hex).exists()
        if job.is_finished and not holding:
            return job
        time.sleep(0.1)
    return job


def request_placement(*, model: Model, body: object, user: User) -> Job:
    """Set the model's placement and queue the job that brings the nodes in line with it:
    the serving version placed where it is missing, unloaded where no longer named."""
    from webapp.registry.serving import placement

    wanted = placement.checked(body)
    before = placement.of(model)
    version = (
        model.versions.filter(number=model.serving_version).first()
        if model.serving_version
        else None
    )
    with transaction.atomic():  # the job is sent after the commit, with the new placement
        job = queue_locked_job(
            model, Job.Kind.PLACE, user, params={"placement": wanted, "before": before},
            message=say(
                "%(user)s placed %(model)s on %(placement)s (was %(before)s).",
                user=user.get_username(), model=model.name,
                placement=placement.describe(wanted), before=placement.describe(before),
            ),
            version=version,
        )  # fmt: skip
        Model.objects.filter(pk=model.pk).update(placement=wanted)
    return job

"""A model's switch lock: two columns on its row, taken with a conditional UPDATE.

It holds across processes and hosts, and expires (``SWITCH_LOCK_TTL_SECONDS``) so that a
worker killed in the middle of a switch cannot keep it. A switch job holds it under its own
uuid, reconcile under ``reconcile-...``, a canary under ``canary-...`` for as long as it runs;
whoever meets it taken is told who holds it and what to do.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from model_store.load_timeouts import CEILING_FACTOR
from model_store.text import say
from webapp.errors import HubError
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.serving.models import Canary


def lock_ttl(model: Model | None = None) -> timedelta:
    """Longer than any switch (load + warm-up + restore), short enough to recover from a crash.

    A target with a load timeout of its own (``npu_ge``: GE compiles at load, and a load is
    waited out up to :data:`~model_store.load_timeouts.CEILING_FACTOR` times its timeout) gets
    at least two such loads (the new version, then the old one put back) and a minute, so that
    its lock cannot expire in the middle of a switch that is still working. Other targets keep
    ``SWITCH_LOCK_TTL_SECONDS`` as it is, as before."""
    seconds = float(settings.SWITCH_LOCK_TTL_SECONDS)
    timeouts = settings.LOAD_TIMEOUTS
    if model is not None and model.target in timeouts.per_target:
        load = float(timeouts.for_target(model.target)) * CEILING_FACTOR
        seconds = max(seconds, 2 * load + 60)
    return timedelta(seconds=seconds)


def acquire_lock(model: Model, holder: str) -> bool:
    now = timezone.now()
    free = Q(lock_expires__isnull=True) | Q(lock_expires__lt=now) | Q(lock_holder=holder)
    taken = Model.objects.filter(free, pk=model.pk).update(
        lock_holder=holder, lock_expires=now + lock_ttl(model)
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
    jobs.release_switch_lock(model.pk, holder)


def lock_busy_error(model: Model) -> HubError:
    model.refresh_from_db(fields=["lock_holder", "lock_expires"])
    if model.lock_holder.startswith(RECONCILE_HOLDER_PREFIX):
        return HubError(
            say(
                "The hub's periodic check is repairing %(model)s (it reloads what Triton forgot "
                "after a restart). Try again in a few seconds.",
                model=model.name,
            ),
            "switch_in_progress",
            409,
        )
    if model.lock_holder.startswith(CANARY_HOLDER_PREFIX):
        return _canary_busy_error(model)
    holder = _as_uuid(model.lock_holder)
    job = Job.objects.filter(uuid=holder).first() if holder else None
    values = {"model": model.name, "job": model.lock_holder}
    if job is not None and job.created_by is not None:
        busy = say(
            "Another switch of %(model)s is in progress by %(user)s. Wait for it to finish "
            "(job %(job)s), then try again.",
            user=job.created_by.get_username(), **values,
        )  # fmt: skip
    else:
        busy = say(
            "Another switch of %(model)s is in progress. Wait for it to finish (job %(job)s), "
            "then try again.",
            **values,
        )
    return HubError(busy, "switch_in_progress", 409)


#: A canary holds its model's lock under this prefix for as long as it runs.
CANARY_HOLDER_PREFIX = "canary-"


def _canary_busy_error(model: Model) -> HubError:
    found = _as_uuid(model.lock_holder.removeprefix(CANARY_HOLDER_PREFIX))
    canary = Canary.objects.filter(uuid=found).first() if found else None
    values = {"model": model.name, "version": canary.candidate if canary else "?"}
    return HubError(
        say(
            "A canary of %(model)s v%(version)s is running: promote it or abort it first "
            "(the model page's Canary panel, or POST .../canary/promote or .../canary/abort).",
            **values,
        ),
        "switch_in_progress",
        409,
    )


def _as_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(hex=text)
    except ValueError:
        return None

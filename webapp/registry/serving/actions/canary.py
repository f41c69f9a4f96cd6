"""Asking for a canary, promoting it now, or aborting it (the watcher is serving/canary.py).

Starting one checks the plan and the candidate, takes the model's switch lock for the canary
(holder ``canary-<uuid>``) and queues the load of the candidate beside the serving version;
the watcher moves traffic once it is loaded. Promote and abort are decided here and carried
out by the watcher at its next look (within a few seconds), so one process decides at a time.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from model_store.canary import DEFAULT_MIN_REQUESTS, Gates, plan_problems
from model_store.targets import get_target
from model_store.text import joined, say
from webapp import dispatch
from webapp.errors import HubError
from webapp.nodes import summaries as ops_nodes
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs import record as jobs
from webapp.registry.serving import placement
from webapp.registry.serving.actions.switch import queue_locked_job
from webapp.registry.serving.lock import (
    acquire_lock_or_wait_for_reconcile,
    lock_busy_error,
    release_lock,
)
from webapp.registry.serving.models import Canary, NodeServing
from webapp.registry.serving.switch import ensure_may_answer

log = logging.getLogger(__name__)


def active_canary(model: Model) -> Canary | None:
    return model.canaries.filter(state__in=Canary.ACTIVE).first()


def latest_canary(model: Model) -> Canary | None:
    return model.canaries.select_related("job", "created_by").first()


def start_canary(
    *,
    model: Model,
    version: Any,
    steps: Any,
    step_seconds: Any,
    max_error_rate: float,
    max_p99_ratio: float,
    min_requests: int | None,
    user: User,
) -> Canary:
    """Start a canary of ``version``; HubError 400/404/409 with the reason, nothing changed."""
    gates = Gates(float(max_error_rate), float(max_p99_ratio), min_requests or DEFAULT_MIN_REQUESTS)
    problems = plan_problems(steps, step_seconds, gates)
    if problems:
        raise HubError(joined(problems, "; "), "invalid_canary", 400)
    _check_model(model)
    if not isinstance(version, int) or isinstance(version, bool):
        raise HubError(say("'version' must be a version number."), "invalid_field", 400)
    candidate = model.versions.filter(number=version).first()
    if candidate is None:
        raise HubError(
            say("%(model)s has no version %(number)s.", model=model.name, number=version),
            "not_found",
            404,
        )
    if version == model.serving_version:
        raise HubError(
            say("v%(number)s is the serving version already: a canary needs another one.",
                number=version),
            "serving",
            409,
        )  # fmt: skip
    ensure_may_answer(candidate)  # packaged, verified (or overridden), fits the host
    assert model.serving_version is not None  # _check_model
    canary = Canary(
        model=model,
        candidate=version,
        baseline=model.serving_version,
        steps=list(steps),
        step_seconds=step_seconds,
        max_error_rate=gates.max_error_rate,
        max_p99_ratio=gates.max_p99_ratio,
        min_requests=gates.min_requests,
        created_by=user,
    )
    if not acquire_lock_or_wait_for_reconcile(model, canary.holder):
        raise lock_busy_error(model)
    try:
        with transaction.atomic():
            canary.save()
            message = say(
                "%(user)s started a canary of %(model)s v%(version)s against v%(serving)s: "
                "steps %(steps)s, %(seconds)s s each.",
                user=user.get_username(), model=model.name, version=version,
                serving=model.serving_version, steps=", ".join(f"{s}%" for s in steps),
                seconds=step_seconds,
            )  # fmt: skip
            canary.job = queue_locked_job(
                model,
                "load",
                user,
                params={
                    "from": model.serving_version,
                    "to": model.serving_version,
                    "compare": version,
                    "canary": canary.uuid.hex,
                    "reason": "",
                    "changes": [],
                },
                message=say(
                    "The hub loads %(model)s v%(version)s beside v%(serving)s for its canary.",
                    model=model.name,
                    version=version,
                    serving=model.serving_version,
                ),
                version=candidate,
                holder=canary.holder,
            )
            canary.save(update_fields=["job"])
            jobs.record_event(
                "canary.started", message, model=model, version=candidate, job=canary.job,
                actor=user, data=canary.to_dict(),
            )  # fmt: skip
            transaction.on_commit(lambda: watch_soon(canary))
    except IntegrityError:  # another canary started at the same moment
        release_lock(model, canary.holder)
        raise lock_busy_error(model) from None
    except Exception:
        release_lock(model, canary.holder)
        raise
    return canary


def promote_now(*, model: Model, user: User) -> Canary:
    """Skip the remaining steps: the watcher promotes at its next look."""
    return _ask(model, user, "promote")


def abort(*, model: Model, user: User) -> Canary:
    """Roll the canary back: no more traffic to the candidate, then it is unloaded."""
    canary = _ask(model, user, "abort")
    # Traffic stops now, not at the watcher's next look: the split is the model row's.
    Model.objects.filter(pk=model.pk).update(canary={})
    return canary


def _ask(model: Model, user: User, what: str) -> Canary:
    with transaction.atomic():
        canary = model.canaries.select_for_update().filter(state__in=Canary.ACTIVE).first()
        if canary is None:
            raise HubError(
                say("%(model)s has no canary running.", model=model.name), "no_canary", 409
            )
        if canary.state == Canary.State.PROMOTING and what == "abort":
            raise HubError(
                say("The canary is being promoted already; roll back once it is done."),
                "canary_promoting",
                409,
            )
        canary.asked = what
        canary.asked_by = user
        canary.save(update_fields=["asked", "asked_by"])
    watch_soon(canary)
    return canary


def _check_model(model: Model) -> None:
    if not settings.LIMITS_REDIS_URL:
        raise HubError(
            say("A canary counts every call in Redis, and this hub runs without one "
                "(REDIS_URL or LIMITS_REDIS_URL)."),
            "no_redis",
            409,
        )  # fmt: skip
    if model.serving_version is None:
        raise HubError(
            say("%(model)s is not served: serve a version first, then canary the next one.",
                model=model.name),
            "not_served",
            409,
        )  # fmt: skip
    if not get_target(model.target).versions_side_by_side:
        raise HubError(
            say(
                "%(target)s models hold one version per Triton model (its backend runs the "
                "first model file it finds), so two versions cannot share traffic; switch "
                "instead, and roll back if it misbehaves.",
                target=model.target,
            ),
            "not_supported",
            409,
        )
    behind = _nodes_not_serving(model)
    if behind:
        raise HubError(
            say(
                "A canary loads the candidate beside v%(version)s on every node of the "
                "placement, and %(nodes)s do not serve v%(version)s now; wait for them "
                "(reconcile places it) or serve it again.",
                version=model.serving_version, nodes=", ".join(behind),
            ),
            "nodes_not_serving",
            409,
        )  # fmt: skip
    if active_canary(model) is not None:
        raise lock_busy_error(model)


def _nodes_not_serving(model: Model) -> list[str]:
    """The nodes of the placement (``local`` aside) that do not serve the serving version, or
    are not up: each must load the candidate beside it, so each must answer now."""
    summaries = {n["name"]: n for n in ops_nodes.summaries()}
    rows = {r.node: r for r in NodeServing.objects.filter(model=model)}
    behind = []
    for node in placement.resolve(placement.of(model), list(summaries.values())):
        if node == placement.LOCAL:
            continue
        row = rows.get(node)
        up = (summaries.get(node) or {}).get("state") == "up"
        serving = row is not None and row.state == NodeServing.State.SERVING
        if not (up and serving and row is not None and row.version == model.serving_version):
            behind.append(node)
    return behind


def watch_soon(canary: Canary) -> None:
    """Ask a worker to look at the canary now (it then looks again every few seconds)."""
    try:
        dispatch.canary_watch(canary.pk, countdown=0)
    except Exception:  # no broker: reconcile looks at active canaries every RECONCILE_SECONDS
        log.warning("canary %s: could not queue its watcher yet", canary.uuid, exc_info=True)

"""Asking for a performance sweep of a model's serving version (run by ``registry.sweeps``)."""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from model_store.perf import SweepPlan
from webapp import dispatch, live
from webapp.errors import HubError
from webapp.registry import jobs
from webapp.registry.models import Event, Job, Model, PerfRun
from webapp.registry.sweeps import config_summary


def make_plan(max_concurrency: int, step_seconds: float) -> SweepPlan:
    if not 1 <= max_concurrency <= settings.SWEEP_MAX_CONCURRENCY:
        raise HubError(
            f"Concurrency goes from 1 to {settings.SWEEP_MAX_CONCURRENCY} here "
            "(SWEEP_MAX_CONCURRENCY).",
            "invalid_field",
        )
    if not 1 <= step_seconds <= 30:
        raise HubError("Seconds per level must be between 1 and 30.", "invalid_field")
    try:
        return SweepPlan.doubling(max_concurrency, step_seconds=step_seconds)
    except ValueError as exc:
        raise HubError(str(exc), "invalid_plan") from None


def request_sweep(
    *,
    model: Model,
    user: User,
    max_concurrency: int = 8,
    step_seconds: float | None = None,
    example_id: int | None = None,
) -> PerfRun:
    """Check the request and queue the sweep job; the serving version is what gets measured."""
    if model.serving_version is None:
        raise HubError(
            f"{model.name} is not served; serve a version before measuring it.", "not_served", 409
        )
    version = model.versions.get(number=model.serving_version)
    plan = make_plan(max_concurrency, float(step_seconds or settings.SWEEP_STEP_SECONDS))
    if example_id is not None and not model.examples.filter(pk=example_id).exists():
        raise HubError(f"{model.name} has no saved example {example_id}.", "not_found", 404)
    busy = Job.objects.filter(
        model=model, kind=Job.Kind.SWEEP, state__in=[Job.State.QUEUED, Job.State.RUNNING]
    ).first()
    if busy is not None:
        raise HubError(
            "A sweep of this model is running already; wait for it or cancel it.",
            "sweep_running",
            409,
        )
    with transaction.atomic():
        job = Job.objects.create(
            kind=Job.Kind.SWEEP,
            model=model,
            version=version,
            steps=jobs.initial_steps(jobs.SWEEP_STEPS),
            params={"example_id": example_id},
            created_by=user,
        )
        run = PerfRun.objects.create(
            model=model,
            version=version,
            job=job,
            config_sha256=hashlib.sha256(version.config_pbtxt.encode()).hexdigest(),
            config_summary=config_summary(version.config_pbtxt),
            plan=_plan_dict(plan),
        )
        Event.objects.create(
            model=model,
            version=version,
            job=job,
            kind="perf.sweep_requested",
            actor=user,
            message=f"{user.get_username()} started a performance sweep of v{version.number} "
            f"(concurrency up to {max_concurrency}).",
        )
        transaction.on_commit(lambda: _enqueue(job))
    return run


def _plan_dict(plan: SweepPlan) -> dict[str, Any]:
    return {
        "levels": list(plan.levels),
        "step_seconds": plan.step_seconds,
        "warmup_seconds": plan.warmup_seconds,
        "max_total_seconds": plan.max_total_seconds,
    }


def _enqueue(job: Job) -> None:
    dispatch.sweep_job(job.pk)
    live.publish("sweeps", {"model": job.model.name, "job": str(job.uuid)})

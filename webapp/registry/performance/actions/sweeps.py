"""Asking for a performance sweep of a model's serving version (run by ``sweeps`` here)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext

from model_store.perf import SweepPlan
from model_store.perf.plan import MAX_RATE
from model_store.text import say
from webapp import dispatch, live
from webapp.errors import HubError
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.jobs.steps import SWEEP_STEPS, initial_steps
from webapp.registry.performance import captured_inputs
from webapp.registry.performance.models import PerfRun
from webapp.registry.performance.sweeps import config_summary


def make_plan(max_concurrency: int, step_seconds: float) -> SweepPlan:
    if not 1 <= max_concurrency <= settings.SWEEP_MAX_CONCURRENCY:
        raise HubError(
            gettext("Concurrency goes from 1 to %(max)s here (SWEEP_MAX_CONCURRENCY).")
            % {"max": settings.SWEEP_MAX_CONCURRENCY},
            "invalid_field",
        )
    if not 1 <= step_seconds <= 30:
        raise HubError(gettext("Seconds per level must be between 1 and 30."), "invalid_field")
    try:
        return SweepPlan.doubling(max_concurrency, step_seconds=step_seconds)
    except ValueError as exc:
        raise HubError(str(exc), "invalid_plan") from None


#: Rates of one open-loop sweep at most: with 1 s per level the plan's time cap allows more,
#: but a chart and a table of more points than this are no longer read.
MAX_RATES = 8


def make_rate_plan(rates: Sequence[float], step_seconds: float) -> SweepPlan:
    """An open-loop plan at ``rates`` (sorted, duplicates dropped), at most
    SWEEP_MAX_CONCURRENCY requests in flight: the load bound of the closed loop holds."""
    if not 1 <= step_seconds <= 30:
        raise HubError(gettext("Seconds per level must be between 1 and 30."), "invalid_field")
    if not rates or len(rates) > MAX_RATES:
        raise HubError(
            gettext("Give 1 to %(max)s request rates.") % {"max": MAX_RATES}, "invalid_field"
        )
    if any(
        isinstance(r, bool)
        or not isinstance(r, int | float)
        or not math.isfinite(r)
        or not 0 < r <= MAX_RATE
        for r in rates
    ):
        raise HubError(
            gettext("Request rates are requests per second, above 0 and at most %(max)s.")
            % {"max": f"{MAX_RATE:g}"},
            "invalid_field",
        )
    try:
        return SweepPlan(
            rates=tuple(sorted({float(r) for r in rates})),
            step_seconds=step_seconds,
            max_in_flight=settings.SWEEP_MAX_CONCURRENCY,
        )
    except ValueError as exc:
        raise HubError(str(exc), "invalid_plan") from None


def parse_rates(text: str) -> list[float]:
    """Rates as an operator types them in the form: numbers separated by commas or spaces."""
    words = text.replace(",", " ").split()
    try:
        return [float(word) for word in words]
    except ValueError:
        raise HubError(
            gettext("Request rates are numbers separated by commas, for example 10, 20, 50."),
            "invalid_field",
        ) from None


def request_sweep(
    *,
    model: Model,
    user: User,
    max_concurrency: int = 8,
    step_seconds: float | None = None,
    example_id: int | None = None,
    captured: bool = False,
    mode: str = "concurrency",
    rates: Sequence[float] | None = None,
) -> PerfRun:
    """Check the request and queue the sweep job; the serving version is what gets measured.

    ``mode="concurrency"`` (closed loop, 1, 2, 4 ... up to ``max_concurrency``) or ``"rate"``
    (open loop at each of ``rates`` requests per second)."""
    if model.serving_version is None:
        raise HubError(
            gettext("%(model)s is not served; serve a version before measuring it.")
            % {"model": model.name},
            "not_served",
            409,
        )
    version = model.versions.get(number=model.serving_version)
    seconds = float(step_seconds or settings.SWEEP_STEP_SECONDS)
    if mode == "rate":
        plan = make_rate_plan(rates or (), seconds)
        what = say("at %(rates)s req/s", rates=", ".join(f"{r:g}" for r in plan.rates or ()))
    elif mode == "concurrency":
        plan = make_plan(max_concurrency, seconds)
        what = say("concurrency up to %(max)s", max=max_concurrency)
    else:
        raise HubError(
            gettext("Unknown sweep mode %(mode)s: 'concurrency' or 'rate'.")
            % {"mode": repr(mode[:40])},
            "invalid_field",
        )
    if example_id is not None and not model.examples.filter(pk=example_id).exists():
        raise HubError(
            gettext("%(model)s has no saved example %(example)s.")
            % {"model": model.name, "example": example_id},
            "not_found",
            404,
        )
    capture_id = captured_inputs.newest(version) if captured else None
    busy = Job.objects.filter(
        model=model, kind=Job.Kind.SWEEP, state__in=[Job.State.QUEUED, Job.State.RUNNING]
    ).first()
    if busy is not None:
        raise HubError(
            gettext("A sweep of this model is running already; wait for it or cancel it."),
            "sweep_running",
            409,
        )
    with transaction.atomic():
        job = Job.objects.create(
            kind=Job.Kind.SWEEP,
            model=model,
            version=version,
            steps=initial_steps(SWEEP_STEPS),
            params={"example_id": example_id, "capture_id": capture_id},
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
        text = say(
            "%(user)s started a performance sweep of v%(version)s (%(what)s).",
            user=user.get_username(),
            version=version.number,
            what=what,
        )
        jobs.record_event(
            "perf.sweep_requested",
            text,
            model=model,
            version=version,
            job=job,
            actor=user,
        )
        transaction.on_commit(lambda: _enqueue(job))
    return run


def _plan_dict(plan: SweepPlan) -> dict[str, Any]:
    data: dict[str, Any] = {
        "mode": plan.mode,
        "levels": list(plan.levels),
        "step_seconds": plan.step_seconds,
        "warmup_seconds": plan.warmup_seconds,
        "max_total_seconds": plan.max_total_seconds,
    }
    if plan.rates is not None:
        data |= {"rates": list(plan.rates), "max_in_flight": plan.max_in_flight}
    return data


def _enqueue(job: Job) -> None:
    dispatch.sweep_job(job.pk)
    live.publish("sweeps", {"model": job.model.name, "job": str(job.uuid)})

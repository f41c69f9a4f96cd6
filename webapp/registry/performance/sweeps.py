"""Performance sweeps, the workers' side: run one (queued by ``actions.sweeps``), keep the result.

A sweep drives the serving version at rising concurrency, or at rising request rates (open loop,
``plan["mode"] == "rate"``; model_store/perf) and is bounded in time (levels x seconds per
level, capped) and in load (SWEEP_MAX_CONCURRENCY clients, or requests in flight). It is a job like
a compile: steps, live progress, cancel. Each run is kept with the config it ran under, so two
runs compare only when their config hashes match.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from model_store.config import parse_pbtxt
from model_store.errors import ModelStoreError
from model_store.inference import (
    InferenceInputError,
    decode_inputs,
    example_payload,
)
from model_store.perf import SweepPlan, best_level, run_sweep
from model_store.targets import get_target
from model_store.text import say
from webapp import live
from webapp.errors import HubError
from webapp.ops.metrics_store import record_client_calls
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.performance import captured_inputs
from webapp.registry.performance.models import PerfRun
from webapp.registry.tryit.inference import input_specs, limits, saved_preprocess
from webapp.registry.tryit.models import TryExample

log = logging.getLogger(__name__)


def config_summary(config_pbtxt: str) -> dict[str, Any]:
    try:
        cfg = parse_pbtxt(config_pbtxt)
    except ModelStoreError:
        return {}
    return {
        "backend": cfg.backend or cfg.platform,
        "max_batch_size": cfg.max_batch_size,
        "instances": cfg.instance_count,
        "instance_kind": cfg.instance_kind,
        "dynamic_batching": cfg.dynamic_batching is not None,
    }


def _inputs_for(
    run: PerfRun, example_id: int | None, capture_id: int | None = None
) -> dict[str, np.ndarray]:
    specs = input_specs(run.version)
    if capture_id is not None:
        return captured_inputs.inputs_of(run.version, capture_id)
    if example_id is not None:
        example = TryExample.objects.filter(pk=example_id, model=run.model).first()
        if example is None:
            raise HubError(say("The saved example was deleted before the sweep began."), "gone")
        payload = example.inputs
    else:
        payload = example_payload(specs, "random")
    return decode_inputs(specs, payload, limits(), default_preprocess=saved_preprocess(run.model))


class _CancelCheck:
    """Reads the job's cancel flag at most every quarter second (the sweep asks per request)."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.checked = 0.0
        self.value = False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self.value and now - self.checked > 0.25:
            self.checked = now
            self.value = Job.objects.filter(pk=self.job_id, cancel_requested=True).exists()
        return self.value


def run_sweep_job(job_id: int) -> None:
    """The worker side: measure, store each level as it finishes, finish the job."""
    from webapp.ops.triton import get_runtime

    job = Job.objects.select_related("model", "version").get(pk=job_id)
    if job.is_finished:
        return
    run = PerfRun.objects.select_related("model", "version").get(job=job)
    if job.cancel_requested:
        jobs.fail(job, say("Cancelled before it started."), "cancelled", cancelled=True)
        return
    jobs.start_step(job, "prepare")
    try:
        params = job.params or {}
        inputs = _inputs_for(run, params.get("example_id"), params.get("capture_id"))
        if params.get("capture_id"):
            jobs.log(job, f"Sending captured request {params['capture_id']} as every request.")
    except (HubError, InferenceInputError) as exc:
        message = getattr(exc, "message", str(exc))
        jobs.log(job, message, "error")
        jobs.fail(job, message, getattr(exc, "code", "invalid_input"))
        return
    shapes = ", ".join(f"{n} {list(a.shape)} {a.dtype}" for n, a in inputs.items())
    jobs.log(job, f"Inputs: {shapes}.")
    jobs.finish_step(job, "prepare", shapes)

    jobs.start_step(job, "sweep")
    plan = SweepPlan(**_plan_kwargs(run.plan))
    runtime = get_runtime(timeout=10.0)

    def on_level(level: Any, fraction: float) -> None:
        row = level.to_dict()
        run.levels = [*run.levels, row]
        run.server_stats = run.server_stats and row.get("server") is not None
        run.save(update_fields=["levels", "server_stats"])
        latency = row.get("latency") or {}
        p50, p99 = latency.get("p50_ms"), latency.get("p99_ms")
        if row.get("offered_rps") is None:
            jobs.log(
                job,
                f"Concurrency {row['concurrency']}: {row['throughput_rps']:.1f} req/s, "
                f"p50 {p50 if p50 is None else round(p50, 2)} ms, {row['failed']} failed.",
            )
        else:
            unsent = f", {row['unsent']} unsent" if row.get("unsent") else ""
            jobs.log(
                job,
                f"Rate {row['offered_rps']:g} req/s offered: {row['throughput_rps']:.1f} "
                f"achieved, p99 {p99 if p99 is None else round(p99, 2)} ms, "
                f"{row['late']} late{unsent}, {row['failed']} failed.",
            )
        jobs.set_progress(job, fraction)
        live.publish("sweeps", {"model": run.model.name, "job": str(job.uuid), "level": row})
        # The Metrics tab's client-side series (the only numbers for npu_ge models).
        record_client_calls(
            run.model.name,
            run.version.number,
            row["completed"] + row["failed"],
            row["failed"],
            ((row.get("latency") or {}).get("mean_ms") or 0.0) * row["completed"],
        )

    try:
        result = run_sweep(
            runtime,
            run.model.name,
            run.version.number,
            inputs,
            plan,
            protocol="grpc" if runtime.grpc_url else "http",
            is_cancelled=_CancelCheck(job.pk),
            on_level=on_level,
        )
    finally:
        runtime.close()
    run.stopped = result.stopped or ""
    run.save(update_fields=["stopped"])
    if result.stopped == "cancelled":
        jobs.fail(
            job,
            say("Cancelled; the levels measured so far are kept."),
            "cancelled",
            cancelled=True,
        )
        return
    best = best_level(result)
    if best is None:
        summary = say("no level completed a request")
    elif best.offered_rps is None:
        summary = say(
            "best: %(rps)s req/s at concurrency %(concurrency)s",
            rps=f"{best.throughput_rps:.1f}",
            concurrency=best.concurrency,
        )
    else:
        summary = say(
            "best: %(rps)s req/s at %(offered)s req/s offered",
            rps=f"{best.throughput_rps:.1f}",
            offered=f"{best.offered_rps:g}",
        )
    jobs.finish_step(job, "sweep", summary)
    jobs.start_step(job, "record")
    if not run.server_stats:
        jobs.log(
            job,
            "Triton reported no server-side statistics for this model"
            + ("" if get_target(job.model.target).reports_statistics else " (it reports none)")
            + "; the numbers are the dashboard's own client-side ones.",
            "warning",
        )
    if not result.levels or all(level.completed == 0 for level in result.levels):
        message = "; ".join(e for level in result.levels for e in level.errors[:1]) or summary
        jobs.fail(job, say("No request succeeded: %(errors)s", errors=message), "no_success")
        return
    jobs.finish_step(
        job,
        "record",
        say("%(count)s levels kept", count=len(result.levels)),
    )
    jobs.succeed(job, summary)


def _plan_kwargs(plan: dict[str, Any]) -> dict[str, Any]:
    kwargs = {
        "step_seconds": plan["step_seconds"],
        "warmup_seconds": plan["warmup_seconds"],
        "max_total_seconds": plan["max_total_seconds"],
    }
    if plan.get("rates"):  # runs stored before the open loop existed have no "rates"
        return kwargs | {"rates": tuple(plan["rates"]), "max_in_flight": plan["max_in_flight"]}
    return kwargs | {"levels": tuple(plan["levels"])}

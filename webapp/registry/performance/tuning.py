"""Finding the best config, the workers' side: trials as temporary models beside the serving one.

``actions.tuning`` records a :class:`~.models.TuningRun` and queues its job; a
worker runs it here. The search itself is ``model_store.perf.tune`` (which configs, in which
order, when to stop); this module gives it the real things: each trial is the version's own
packaged files with another config.pbtxt, loaded under a ``_trial-`` name
(``model_store.serving.trial``) that no client uses, measured with the sweep engine at a load
bounded by ``TUNE_MAX_CONCURRENCY``, then unloaded and removed, also when the job is cancelled
or a trial fails. A worker that dies mid-trial leaves the trial's name in ``active_trial``;
reconcile unloads it (:func:`remove_abandoned_trials`).

Every trial changes only options of the target's ``config_only_options``, so the winner can be
made a revision that reuses the artifact (``actions.revisions``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from model_store.config_lint import lint
from model_store.inference import decode_inputs, example_payload
from model_store.perf.trials import TrialLoad, measure_trial
from model_store.perf.tune import (
    Measurement,
    Objective,
    Trial,
    grid,
    grid_size,
    pick_load,
    search,
    standard_dimensions,
)
from model_store.serving import remove_trial
from model_store.targets import get_target
from model_store.text import Message, joined, say
from webapp import live
from webapp.nodes import summaries as ops_nodes
from webapp.ops.server_state import devices_summary
from webapp.registry.catalogue import package_tars
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.performance import captured_inputs
from webapp.registry.performance.actions.revisions import model_infos
from webapp.registry.performance.models import TuningRun
from webapp.registry.serving import placement
from webapp.registry.serving.memory import memory_estimate
from webapp.registry.tryit.inference import input_specs, limits, saved_preprocess

log = logging.getLogger(__name__)

#: How long the hub waits for a node's answer to one trial beyond its nominal duration (the
#: node may fetch the package first, and Triton may take a while to load it).
NODE_TRIAL_SLACK_S = 600.0


def _inputs(version: Version, capture_id: int | None = None) -> dict[str, np.ndarray]:
    if capture_id is not None:
        return captured_inputs.inputs_of(version, capture_id)
    specs = input_specs(version)
    return decode_inputs(
        specs,
        example_payload(specs, "random"),
        limits(),
        default_preprocess=saved_preprocess(version.model),
    )


def _packaged_files(version: Version) -> list[Path]:
    folder = get_store().package_dir(version.model.name, version.number) / str(version.number)
    return sorted(p for p in folder.iterdir() if p.is_file())


def _set_active(run: TuningRun, name: str) -> None:
    run.active_trial = name
    TuningRun.objects.filter(pk=run.pk).update(active_trial=name)


def _npus_of(node: str) -> list[dict[str, Any]]:
    """The NPUs of the host the trials run on (npu-smi, from its newest report)."""
    if node == placement.LOCAL:
        return list(devices_summary().get("npus") or [])
    found = next((n for n in ops_nodes.summaries() if n["name"] == node), None)
    return list((found or {}).get("devices") or [])


def _device_sets(npus: list[dict[str, Any]], *, several: bool) -> list[str]:
    """Each NPU alone and, where the target takes several (``device_ids``), all of them."""
    ids = []
    for npu in npus:
        device = npu.get("device_id") if npu.get("device_id") is not None else npu.get("npu_id")
        if device is not None and str(device) not in ids:
            ids.append(str(device))
    return [*ids, ",".join(ids)] if several and len(ids) > 1 else ids


def _fits(version: Version, options: dict[str, Any], npus: list[dict[str, Any]]) -> str | None:
    """Why ``options`` would not fit in memory beside what is loaded now, or None."""
    estimate = memory_estimate(
        version,
        instances=int(options.get("instance_count") or 1),
        max_batch=int(options.get("max_batch_size") or 0),
        devices={"available": bool(npus), "npus": npus},
    )
    verdicts = [estimate.get("host") or {}, *estimate["devices"]["fit"]]
    if any(v.get("state") == "does_not_fit" for v in verdicts):
        return str(estimate.get("warning") or "the memory estimate says it would not fit")
    return None


def _trial_load(run: TuningRun, objective: Objective) -> TrialLoad:
    """How each trial is driven: concurrency 1, 2, 4 ... up to the run's bound (throughput), or
    one level at the required rate (latency)."""
    step = float(settings.TUNE_STEP_SECONDS)
    if objective.kind == "latency":
        assert objective.rate_rps is not None
        return TrialLoad("rate", rate_rps=objective.rate_rps, step_seconds=2 * step)
    levels = [
        1 << i for i in range(run.max_concurrency.bit_length()) if 1 << i < run.max_concurrency
    ]
    return TrialLoad("concurrency", levels=(*levels, run.max_concurrency), step_seconds=step)


def run_tune_job(job_id: int) -> None:
    """The worker side: search, record every trial as it ends, finish the job."""
    from webapp.ops.triton import get_runtime

    job = Job.objects.select_related("model", "version").get(pk=job_id)
    if job.is_finished:
        return
    run = TuningRun.objects.select_related("model", "version").get(job=job)
    if job.cancel_requested:
        jobs.fail(job, say("Cancelled before it started."), "cancelled", cancelled=True)
        return
    version, model = run.version, run.model
    target = get_target(model.target)
    objective = Objective(**run.objective)

    jobs.start_step(job, "prepare")
    info, packaged = model_infos(version)
    config_info = packaged or info
    serving = target.parse_options(version.options, info=info)
    names = [s.name for s in target.option_specs() if s.name in target.config_only_options]
    grid_run = run.strategy == TuningRun.Strategy.GRID
    npus = _npus_of(run.node)
    dims = standard_dimensions(
        serving,
        option_names=names,
        max_instances=settings.TUNE_MAX_INSTANCES,
        device_sets=_device_sets(npus, several="device_ids" in names),
        # The reference grid is kept small: every config of it is measured.
        **({"batch_sizes": (8, 16), "queue_delays_us": (100, 1000)} if grid_run else {}),
    )
    capture_id = (job.params or {}).get("capture_id")
    inputs = _inputs(version, capture_id)
    if capture_id:
        jobs.log(job, f"Every trial sends captured request {capture_id}.")
    files = _packaged_files(version)
    run.grid_size = grid_size(dims)
    run.save(update_fields=["grid_size"])
    jobs.log(
        job,
        f"Objective: {objective.describe()!s}; budget {run.budget_s} s. Knobs: "
        + (", ".join(f"{d.name} ({len(d.values)} values)" for d in dims) or "none")
        + f"; trying everything would be {run.grid_size} configs. Load per trial: at most "
        f"{run.max_concurrency} requests in flight, beside production.",
    )
    jobs.finish_step(
        job,
        "prepare",
        say("%(knobs)s knobs, grid of %(grid)s", knobs=len(dims), grid=run.grid_size),
    )

    jobs.start_step(job, "search")
    runtime = get_runtime(timeout=30.0)
    cancelled = jobs.CancelCheck(job)
    load = _trial_load(run, objective)
    started = time.monotonic()

    def measure(changes: dict[str, Any]) -> Measurement:
        options = target.parse_options({**serving, **changes}, info=info)
        cfg = target.make_config(model.name, config_info, options, version.number)
        problems = lint(cfg)
        if problems:
            raise ValueError(
                say(
                    "config.pbtxt would not be valid: %(problems)s", problems=joined(problems, "; ")
                )
            )
        if run.node == placement.LOCAL:
            levels = measure_trial(
                get_store(), runtime, cfg, files, version.number, inputs, load,
                max_in_flight=run.max_concurrency, is_cancelled=cancelled,
                on_placed=lambda name: _set_active(run, name),
            )  # fmt: skip
            _set_active(run, "")
        else:
            levels = _measure_on_node(job, run, cfg, inputs, load)
        picked = pick_load(objective, levels)
        assert picked is not None
        return picked

    def on_trial(trial: Trial) -> None:
        row = trial.to_dict()
        run.trials = [*run.trials, row]
        TuningRun.objects.filter(pk=run.pk).update(trials=run.trials)
        numbers = (
            f"{trial.measured.throughput_rps:.1f} req/s, p99 {trial.measured.p99_ms or 0:.1f} ms"
            if trial.measured
            else trial.reason
        )
        jobs.log(job, f"Trial {trial.index} ({trial.label!s}): {trial.state}; {numbers!s}.")
        jobs.set_progress(job, min(0.95, (time.monotonic() - started) / run.budget_s))
        live.publish("tuning", {"model": model.name, "run": run.pk, "trial": row})

    try:
        result = (grid if grid_run else search)(
            objective,
            serving,
            dims,
            measure=measure,
            fits=lambda options: _fits(version, options, npus),
            budget_s=float(run.budget_s),
            is_cancelled=cancelled,
            on_trial=on_trial,
        )
    finally:
        _set_active(run, "")
        runtime.close()
    run.best = result.best
    run.stopped = result.stopped or ""
    run.save(update_fields=["best", "stopped"])
    measured = sum(1 for t in result.trials if t.state == "measured")
    if result.stopped == "cancelled":
        jobs.fail(job, say("Cancelled after %(count)s trial(s); they are kept.", count=measured),
                  "cancelled", cancelled=True)  # fmt: skip
        return
    summary = _summary(result.trials, result.best, objective)
    jobs.finish_step(
        job,
        "search",
        say(
            "%(count)s trials (%(measured)s measured)", count=len(result.trials), measured=measured
        ),
    )
    jobs.start_step(job, "record")
    jobs.finish_step(job, "record", summary)
    jobs.succeed(job, summary)
    live.publish("tuning", {"model": model.name, "run": run.pk, "done": True})


def _measure_on_node(
    job: Job,
    run: TuningRun,
    cfg: Any,
    inputs: dict[str, np.ndarray],
    load: TrialLoad,
) -> list[dict[str, Any]]:
    """One trial on ``run.node``'s Triton (``node.trial``): the node fetches the version's
    package over HTTP if it does not hold it, loads the config as a trial and measures it."""
    from model_store.config import render_pbtxt
    from webapp import dispatch
    from webapp.nodes.replies import NodeTaskFailed, answer_reason, wait_for_answer

    tar = package_tars.tar_of(run.version, f"tune:{job.uuid.hex}")
    message = {
        "model": run.model.name,
        "version": run.version.number,
        "sha256": tar.sha256,
        "config": render_pbtxt(cfg),
        "inputs": [
            {"name": n, "dtype": str(a.dtype), "shape": list(a.shape)} for n, a in inputs.items()
        ],
        "load": load.to_dict(),
        "max_in_flight": run.max_concurrency,
    }
    nominal = len(load.levels) * (load.step_seconds + load.warmup_seconds) + load.step_seconds
    try:
        result = dispatch.node_task(run.node, "node.trial", message)
        answer = wait_for_answer(
            job, run.node, result, limit_s=nominal + NODE_TRIAL_SLACK_S, what="trial"
        )
    except NodeTaskFailed as exc:
        raise RuntimeError(
            say("node %(node)s: %(reason)s", node=run.node, reason=exc.message)
        ) from None
    if answer.get("ok") is not True:
        reason = answer_reason(answer.get("reason")) or say("the trial failed")
        raise RuntimeError(say("node %(node)s: %(reason)s", node=run.node, reason=reason))
    return list(answer.get("levels") or [])


def _summary(trials: list[Trial], best: int | None, objective: Objective) -> Message:
    if best is None:
        return say("No config met the objective (%(objective)s).", objective=objective.describe())
    winner = trials[best]
    base = trials[0]
    if best == 0:
        return say("The serving config is the best found: no change suggested.")
    assert winner.measured is not None
    if objective.kind == "throughput" and base.measured and base.score is not None:
        gain = winner.measured.throughput_rps / max(base.measured.throughput_rps, 1e-9)
        return say(
            "Best: %(label)s at %(rps)s req/s (%(gain)sx the serving config).",
            label=winner.label, rps=f"{winner.measured.throughput_rps:.1f}", gain=f"{gain:.2f}",
        )  # fmt: skip
    return say(
        "Best: %(label)s (p99 %(p99)s ms).", label=winner.label,
        p99=f"{winner.measured.p99_ms or 0:.1f}",
    )  # fmt: skip


def remove_abandoned_trials() -> list[Message]:
    """Trials whose tuning job is over (a dead worker's, once reconcile failed its job):
    unloaded and removed now rather than after the hour stale trials wait."""
    from webapp.ops.triton import get_runtime

    repairs = []
    left = TuningRun.objects.exclude(active_trial="").filter(job__state__in=Job.FINISHED)
    for run in left.select_related("model"):
        runtime = get_runtime(timeout=30.0)
        try:
            if remove_trial(get_store(), runtime, run.active_trial):
                repairs.append(
                    say("%(model)s: removed the trial model %(trial)s a stopped tuning run left "
                        "loaded.", model=run.model.name, trial=run.active_trial)
                )  # fmt: skip
        finally:
            runtime.close()
        TuningRun.objects.filter(pk=run.pk).update(active_trial="")
    return repairs

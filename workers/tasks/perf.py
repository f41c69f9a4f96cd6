"""Performance sweeps run here, never in a web process (they hold threads for minutes)."""

from __future__ import annotations

from celery.exceptions import SoftTimeLimitExceeded

from model_store.text import say
from workers.celery import app

# A sweep is capped at SweepPlan.max_total_seconds (120 s); the limit only catches a hang.
SOFT_LIMIT = 300


@app.task(
    name="workers.tasks.perf.sweep",
    soft_time_limit=SOFT_LIMIT,
    time_limit=SOFT_LIMIT + 60,
    acks_late=True,
    ignore_result=True,
)
def sweep(job_id: int) -> None:
    from webapp.registry.jobs import record as jobs
    from webapp.registry.jobs.models import Job
    from webapp.registry.performance.sweeps import run_sweep_job

    try:
        run_sweep_job(job_id)
    except SoftTimeLimitExceeded:
        job = Job.objects.get(pk=job_id)
        jobs.fail(
            job, say("The sweep ran past %(limit)s s and was stopped.", limit=SOFT_LIMIT), "timeout"
        )
    except Exception as exc:  # recorded on the job, so the page never shows "running" forever
        job = Job.objects.get(pk=job_id)
        if not job.is_finished:
            jobs.fail(
                job,
                say("The sweep failed unexpectedly: %(error)s", error=str(exc)),
                "internal_error",
            )
        raise


#: The longest tuning budget the hub accepts (TUNE_MAX_BUDGET_S), plus the last trial, the
#: clean-up and slack: only catches a hang.
TUNE_SOFT_LIMIT = 3600


@app.task(
    name="workers.tasks.perf.tune",
    soft_time_limit=TUNE_SOFT_LIMIT,
    time_limit=TUNE_SOFT_LIMIT + 120,
    acks_late=True,
    ignore_result=True,
)
def tune(job_id: int) -> None:
    from webapp.registry.jobs import record as jobs
    from webapp.registry.jobs.models import Job
    from webapp.registry.performance.tuning import run_tune_job

    try:
        run_tune_job(job_id)
    except SoftTimeLimitExceeded:
        job = Job.objects.get(pk=job_id)
        jobs.fail(
            job,
            say("The search ran past %(limit)s s and was stopped.", limit=TUNE_SOFT_LIMIT),
            "timeout",
        )
    except Exception as exc:  # recorded on the job, so the page never shows "running" forever
        job = Job.objects.get(pk=job_id)
        if not job.is_finished:
            jobs.fail(
                job,
                say("The search failed unexpectedly: %(error)s", error=str(exc)),
                "internal_error",
            )
        raise

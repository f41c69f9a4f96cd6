"""Serving jobs (serve, roll back, load, unload) and the periodic reconcile."""

from __future__ import annotations

from workers.celery import app

# A switch waits for Triton (load + warm-up); the hard limit leaves room for restoring the
# previous version when the new one fails.
SWITCH_LIMIT_S = 600


@app.task(
    name="workers.tasks.serve.run_job",
    soft_time_limit=SWITCH_LIMIT_S,
    time_limit=SWITCH_LIMIT_S + 60,
    acks_late=True,
    ignore_result=True,
)
def run_job(job_id: int) -> None:
    from webapp.registry.serving import switch as serving

    serving.run_job(job_id)


@app.task(name="workers.tasks.serve.reconcile", ignore_result=True, soft_time_limit=900)
def reconcile() -> None:
    from webapp.registry.serving import reconcile

    reconcile.reconcile()


@app.task(name="workers.tasks.serve.triton_restarted", ignore_result=True, soft_time_limit=900)
def triton_restarted(down_s: float, exit_status: str) -> None:
    """Sent by the launcher after it restarted a crashed Triton."""
    from webapp.registry.serving import reconcile

    reconcile.after_triton_restart(down_s, exit_status)


@app.task(name="workers.tasks.serve.requeue_stalled", ignore_result=True, soft_time_limit=60)
def requeue_stalled() -> None:
    """Sent by the launcher after Redis restarted: queued serving jobs may have lost their
    message."""
    from webapp.registry.serving import reconcile

    reconcile.requeue_stalled_jobs()


@app.task(name="workers.tasks.serve.canary_watch", ignore_result=True, soft_time_limit=60)
def canary_watch(canary_id: int) -> None:
    """One look at a running canary; it queues the next (webapp/registry/serving/canary.py)."""
    from webapp.registry.serving import canary

    canary.watch(canary_id)

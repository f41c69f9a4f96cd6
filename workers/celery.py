"""The worker's entry point (``celery -A workers.celery worker``). Tasks are thin: they load by
id, call into ``webapp`` and return nothing.

The app itself is defined in ``webapp.celery_app`` (so the web side can send tasks by name
without importing this package); it lists the task modules in ``workers/tasks``.
"""

from __future__ import annotations

from celery.signals import beat_init, celeryd_init, worker_ready

from webapp.celery_app import app

__all__ = ["app"]

#: How long a worker or beat keeps trying to publish while Redis restarts: about ten minutes.
#: Celery gives up after three quick retries by default; a compile step that ended while Redis
#: was down then never queued the next step, and its job stayed "running" for ever
#: (tests/faults/test_redis_restart.py). Web processes keep the short default: a request must
#: not hang on a dead Redis (they record the job and reconcile sends it).
WORKER_PUBLISH_RETRY_POLICY = {
    "max_retries": 120,
    "interval_start": 0,
    "interval_step": 1,
    "interval_max": 5,
}


@celeryd_init.connect
@beat_init.connect
def _patient_publishing(sender: object = None, **kwargs: object) -> None:
    app.conf.task_publish_retry_policy = WORKER_PUBLISH_RETRY_POLICY


@worker_ready.connect
def _reconcile_on_start(sender: object, **kwargs: object) -> None:
    """A (re)started worker often means a (re)started Triton, which in explicit mode has
    forgotten every model: bring the serving versions back without waiting for beat."""
    app.send_task("workers.tasks.serve.reconcile")
    # The pages show what this host has (NPUs, CANN) from the worker's report, not their own.
    app.send_task("workers.tasks.server.probe_host")
    from webapp.ops import heartbeat

    heartbeat.beat()

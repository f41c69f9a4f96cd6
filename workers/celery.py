"""The worker's entry point (``celery -A workers.celery worker``). Tasks are thin: they load by
id, call into ``webapp`` and return nothing.

The app itself is defined in ``webapp.celery_app`` (so the web side can send tasks by name
without importing this package); it lists the task modules in ``workers/tasks``.
"""

from __future__ import annotations

from celery.signals import worker_ready

from webapp.celery_app import app

__all__ = ["app"]


@worker_ready.connect
def _reconcile_on_start(sender: object, **kwargs: object) -> None:
    """A (re)started worker often means a (re)started Triton, which in explicit mode has
    forgotten every model: bring the serving versions back without waiting for beat."""
    app.send_task("workers.tasks.serve.reconcile")
    from webapp.ops import heartbeat

    heartbeat.beat()

"""The Celery app. Tasks are thin: they load by id, call an action, and return JSON.

Configuration comes from Django settings (``CELERY_*``); Celery's Django fix-up calls
``django.setup()`` in every worker process, so tasks may use the ORM.
"""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery(
    "triton_model_hub",
    include=[
        "workers.tasks.health",
        "workers.tasks.server",
        "workers.tasks.compile",
        "workers.tasks.serve",
        "workers.tasks.perf",
        "workers.tasks.metrics",
        "workers.tasks.uploads",
    ],
)
app.config_from_object("django.conf:settings", namespace="CELERY")


@worker_ready.connect
def _reconcile_on_start(sender: object, **kwargs: object) -> None:
    """A (re)started worker often means a (re)started Triton, which in explicit mode has
    forgotten every model: bring the serving versions back without waiting for beat."""
    app.send_task("workers.tasks.serve.reconcile")
    from webapp.ops import heartbeat

    heartbeat.beat()

"""The Celery app. Tasks are thin: they load by id, call an action, and return JSON.

Configuration comes from Django settings (``CELERY_*``); Celery's Django fix-up calls
``django.setup()`` in every worker process, so tasks may use the ORM.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery(
    "triton_model_hub",
    include=["workers.tasks.health", "workers.tasks.server", "workers.tasks.compile"],
)
app.config_from_object("django.conf:settings", namespace="CELERY")

"""The Celery app, configured from Django settings (``CELERY_*``).

It lives in ``webapp`` so that the web side can send work without importing ``workers``: the
web process only sends tasks by name (:mod:`webapp.dispatch`); the task code in
``workers/tasks`` is imported by the worker alone (``include`` names the modules without
importing them here). ``celery -A workers.celery`` finds this same app there. Celery's Django
fix-up calls ``django.setup()`` in every worker process, so tasks may use the ORM.
"""

from __future__ import annotations

import os

from celery import Celery

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
        "workers.tasks.sso",
        "workers.tasks.capture",
        "workers.tasks.adopt",
    ],
)
app.config_from_object("django.conf:settings", namespace="CELERY")

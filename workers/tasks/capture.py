"""Capture housekeeping: captures older than their model's retention are removed."""

from __future__ import annotations

from webapp.registry.capture.actions import expire as expire_captures
from workers.celery import app


@app.task(name="workers.tasks.capture.expire", time_limit=600, soft_time_limit=540)
def expire() -> dict[str, int]:
    return {"removed": expire_captures()}

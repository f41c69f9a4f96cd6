"""Capture's worker side: the spool taken in, and captures past their retention removed."""

from __future__ import annotations

from webapp.registry.capture.actions import expire as expire_captures
from webapp.registry.capture.recorder import ingest as ingest_spool
from workers.celery import app


@app.task(name="workers.tasks.capture.expire", time_limit=600, soft_time_limit=540)
def expire() -> dict[str, int]:
    return {"removed": expire_captures()}


@app.task(name="workers.tasks.capture.ingest", time_limit=120, soft_time_limit=100)
def ingest() -> dict[str, int]:
    """Take in what the web processes spooled (webapp/registry/capture/recorder.py)."""
    return ingest_spool(max_seconds=60.0)

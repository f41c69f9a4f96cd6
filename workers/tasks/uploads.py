"""Housekeeping of the upload area: abandoned uploads are removed after a while."""

from __future__ import annotations

from django.conf import settings

from webapp.registry.catalogue.storage import get_uploads
from workers.celery import app


@app.task(name="workers.tasks.uploads.remove_abandoned", time_limit=600, soft_time_limit=540)
def remove_abandoned() -> dict[str, object]:
    """Remove uploads nobody touched for ``UPLOAD_ABANDONED_HOURS`` (never one being written)."""
    removed = get_uploads().cleanup_stale(settings.UPLOAD_ABANDONED_HOURS * 3600)
    return {"removed": removed}

"""Scrape Triton's metrics into the time series (beat, every METRICS_SCRAPE_SECONDS)."""

from __future__ import annotations

import logging

from workers.celery import app

log = logging.getLogger(__name__)


@app.task(name="workers.tasks.metrics.scrape", ignore_result=True, soft_time_limit=60)
def scrape() -> dict[str, object]:
    # Imported here: beat imports task modules only to schedule them (see tasks/server.py).
    from model_store.runtime.errors import TritonRequestError, TritonUnavailable
    from model_store.runtime.metrics import MetricsParseError
    from webapp.ops.metrics_store import scrape_and_store
    from webapp.ops.prometheus import note_triton_scrape

    try:
        result = scrape_and_store()
    except (TritonUnavailable, TritonRequestError) as exc:
        # Triton down or restarting: the next scrape diffs against the last one stored, and a
        # restart shows as a counter reset there.
        log.info("metrics scrape skipped: %s", exc)
        note_triton_scrape(False)
        return {"stored": 0, "skipped": str(exc)}
    except MetricsParseError as exc:
        log.warning("metrics scrape unreadable: %s", exc)
        note_triton_scrape(False)
        return {"stored": 0, "skipped": str(exc)}
    note_triton_scrape(True)
    return {"stored": result.stored, "resets": len(result.resets), "skipped": result.skipped}

"""Scrape every node's Triton metrics into the time series (beat, every METRICS_SCRAPE_SECONDS).

``local`` first, as before the hub knew other nodes, then each other node that is not down
(draining ones still serve) at the metrics URL its report gave. Each node is scraped on its
own: one that cannot be reached, or answers nonsense, is logged and skipped, never stopping
the others.
"""

from __future__ import annotations

import logging

from workers.celery import app

log = logging.getLogger(__name__)


@app.task(name="workers.tasks.metrics.scrape", ignore_result=True, soft_time_limit=60)
def scrape() -> dict[str, object]:
    """Returns ``{"stored": raw points of all nodes, "nodes": {name: that node's result}}``."""
    # Imported here: beat imports task modules only to schedule them (see tasks/server.py).
    from webapp.ops.metrics_store import LOCAL, remote_scrape_targets
    from webapp.ops.prometheus import note_triton_scrape

    results: dict[str, dict[str, object]] = {}
    results[LOCAL] = _scrape_one(LOCAL, None)
    note_triton_scrape(not results[LOCAL].get("failed"))
    try:
        targets = remote_scrape_targets()
    except Exception:  # the database hiccupped: local's points are stored, try again next time
        log.warning("metrics scrape: could not list the nodes", exc_info=True)
        targets = []
    for name, url in targets:
        results[name] = _scrape_one(name, url)
    stored = sum(r["stored"] for r in results.values() if isinstance(r["stored"], int))
    return {"stored": stored, "nodes": results}


def _scrape_one(node: str, metrics_url: str | None) -> dict[str, object]:
    from celery.exceptions import SoftTimeLimitExceeded

    from model_store.runtime.errors import TritonRequestError, TritonUnavailable
    from model_store.runtime.metrics import MetricsParseError
    from webapp.ops.metrics_store import scrape_and_store

    try:
        result = scrape_and_store(node=node, metrics_url=metrics_url)
    except (TritonUnavailable, TritonRequestError) as exc:
        # Triton down or restarting (or, for another node, an address the hub will not read):
        # the next scrape diffs against the last one stored, and a restart shows as a counter
        # reset there.
        log.info("metrics scrape of node %s skipped: %s", node, exc)
        return {"stored": 0, "skipped": str(exc), "failed": True}
    except MetricsParseError as exc:
        log.warning("metrics scrape of node %s unreadable: %s", node, exc)
        return {"stored": 0, "skipped": str(exc), "failed": True}
    except SoftTimeLimitExceeded:
        raise  # the round took too long (nodes that time out): the next one starts afresh
    except Exception as exc:  # one node's failure (its answer is not trusted) stops no other
        log.warning("metrics scrape of node %s failed", node, exc_info=True)
        return {"stored": 0, "skipped": f"{type(exc).__name__}: {exc}"[:300], "failed": True}
    return {"stored": result.stored, "resets": len(result.resets), "skipped": result.skipped}

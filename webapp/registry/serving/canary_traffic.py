"""A canary's traffic on the Django side: which version a call goes to, and counting it.

The ``/v2`` fast path does the same in the event loop (webapp/edge/gateway_fast.py); both use
webapp/edge/canary_split.py, so a call is counted the same whichever path answered it. The
counts live in the limits' Redis (``LIMITS_REDIS_URL``) where every web process and the
canary's watcher see them.
"""

from __future__ import annotations

import functools
import logging
from datetime import datetime
from typing import Any

import redis
from django.conf import settings
from django.db.models import Sum

from model_store.canary import Side
from model_store.runtime.series import RAW
from webapp.edge.canary_split import (
    WINDOW_TTL_SECONDS,
    Split,
    choose,
    count_commands,
    side_counts,
    split_of,
    window_key,
)
from webapp.ops.models import MetricPoint

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)


def split(model: Any) -> Split | None:
    """The traffic split of ``model`` (a row with ``canary``), or None."""
    return split_of(getattr(model, "canary", None))


def version_for(model: Any) -> int | None:
    """The version an unpinned call to ``model`` goes to now."""
    return choose(model.serving_version, split(model))


def count(model: Any, version: int | str, ms: float, ok: bool) -> None:
    """Count one answered call for the canary's decision; never fails the call itself."""
    commands = count_commands(split(model), version, ms, ok)
    if not commands or not settings.LIMITS_REDIS_URL:
        return
    try:
        pipe = _client(settings.LIMITS_REDIS_URL).pipeline(transaction=False)
        for key, field, amount in commands:
            pipe.hincrby(key, field, int(amount))
        pipe.expire(commands[0][0], WINDOW_TTL_SECONDS)
        pipe.execute()
    except redis.RedisError as exc:  # the canary then sees fewer calls and waits longer
        log.warning("canary: a call to %s was not counted (%s)", getattr(model, "name", "?"), exc)


def read_side(window: str, version: int) -> Side:
    """What ``version`` did in ``window``, as the decision reads it."""
    raw = _client(settings.LIMITS_REDIS_URL).hgetall(window_key(window, version))
    requests, errors, buckets = side_counts(raw)
    return Side(version, requests, errors, buckets)


def live(
    window: str, candidate: int, serving: int, *, model: str = "", since: datetime | None = None
) -> dict[str, dict[str, Any]] | None:
    """The step's numbers so far, for the panel and the API (None when Redis does not answer),
    with Triton's own queue and compute time per request for each version where the metrics
    scrape has them (``queue_ms``, ``compute_ms``)."""
    try:
        sides = {
            "candidate": read_side(window, candidate).summary(),
            "serving": read_side(window, serving).summary(),
        }
    except redis.RedisError:
        return None
    if model and since is not None:
        split = triton_split(model, (candidate, serving), since)
        for side in sides.values():
            side.update(split.get(str(side["version"]), {}))
    return sides


def triton_split(model: str, versions: tuple[int, ...], since: datetime) -> dict[str, Any]:
    """Per version, Triton's mean queue and compute time per request since ``since``."""
    rows = (
        MetricPoint.objects.filter(
            model_name=model, tier=RAW, start__gte=since, version__in=[str(v) for v in versions]
        )
        .values("version")
        .annotate(done=Sum("success"), queue=Sum("queue_us"), compute=Sum("compute_infer_us"))
    )
    return {
        row["version"]: {
            "queue_ms": round(row["queue"] / row["done"] / 1000, 3),
            "compute_ms": round(row["compute"] / row["done"] / 1000, 3),
        }
        for row in rows
        if row["done"]
    }

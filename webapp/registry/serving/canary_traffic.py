"""A canary's traffic on the Django side: which version a call goes to, and counting it.

The ``/v2`` fast path does the same in the event loop (webapp/edge/gateway_fast.py); both use
webapp/edge/canary_split.py, so a call is counted the same whichever path answered it. The
counts live in the limits' Redis (``LIMITS_REDIS_URL``) where every web process and the
canary's watcher see them.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import redis
from django.conf import settings

from model_store.canary import Side
from webapp.edge.canary_split import (
    WINDOW_TTL_SECONDS,
    Split,
    choose,
    count_commands,
    side_counts,
    split_of,
    window_key,
)

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


def live(window: str, candidate: int, serving: int) -> dict[str, dict[str, Any]] | None:
    """The step's numbers so far, for the panel and the API (None when Redis does not answer)."""
    try:
        return {
            "candidate": read_side(window, candidate).summary(),
            "serving": read_side(window, serving).summary(),
        }
    except redis.RedisError:
        return None

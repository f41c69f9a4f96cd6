"""Workers say they are alive by writing a timestamp; health checks read it in a millisecond.

Asking the workers (``app.control.ping``) costs a broadcast and a full second of waiting for
replies, on every health request. Instead a worker records ``time.time()`` under its host name
in one Redis hash whenever it runs the periodic server-state task (every
``SERVER_STATE_PUSH_SECONDS``) and when it starts; a worker is "up" while its entry is younger
than three periods (plus a margin for a busy worker).
"""

from __future__ import annotations

import contextlib
import functools
import socket
import time

import redis
from django.conf import settings

KEY = "hub:workers:heartbeat"


@functools.lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)


def max_age_s() -> float:
    return 3 * settings.SERVER_STATE_PUSH_SECONDS + 10


def beat(now: float | None = None) -> None:
    """Record that a worker on this host is alive (best effort: Redis may be down)."""
    if not settings.REDIS_URL:
        return
    with contextlib.suppress(redis.RedisError):
        _client(settings.REDIS_URL).hset(KEY, socket.gethostname(), now or time.time())


def fresh_workers(now: float | None = None) -> dict[str, float]:
    """Host name -> seconds since its last beat, for workers heard from recently."""
    raw: dict[bytes, bytes] = _client(settings.REDIS_URL).hgetall(KEY)  # type: ignore[assignment]
    now = now or time.time()
    ages = {k.decode(): now - float(v) for k, v in raw.items()}
    return {host: age for host, age in ages.items() if age <= max_age_s()}

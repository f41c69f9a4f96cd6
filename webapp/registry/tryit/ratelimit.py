"""A per-user request budget for the infer endpoint, counted in Redis when there is one.

Fixed one-minute windows: cheap (one INCR per request, pipelined with its EXPIRE) and shared
by every web process of a deployment. Without Redis (unit tests, a bare ``manage.py``) the
count is kept in this process, which is exact for a single process and good enough there.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

import redis
from django.conf import settings
from django.utils.translation import gettext

from webapp.edge.shared import WINDOW_SECONDS, rate_key


class RateLimited(Exception):
    def __init__(self, limit: int, retry_after: int, *, token: bool = False) -> None:
        # Made while the request is answered: in its language (English outside one).
        message = (
            gettext(
                "Too many inference requests: this token's limit is %(limit)s per minute. "
                "Try again in %(seconds)s s, or ask an admin to raise its rate_per_minute."
            )
            if token
            else gettext(
                "Too many inference requests: the limit is %(limit)s per minute per user. "
                "Try again in %(seconds)s s, or ask an admin to raise INFER_RATE_PER_MINUTE."
            )
        )
        super().__init__(message % {"limit": limit, "seconds": retry_after})
        self.limit = limit
        self.retry_after = retry_after


@functools.lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)


_local_counts: dict[tuple[str, int], int] = {}
_local_lock = threading.Lock()


def _count_locally(key: str, window: int) -> int:
    with _local_lock:
        for stale in [k for k in _local_counts if k[1] < window]:
            del _local_counts[stale]
        _local_counts[(key, window)] = _local_counts.get((key, window), 0) + 1
        return _local_counts[(key, window)]


def infer_budget(request: Any) -> tuple[str, int]:
    """Whose inference budget a request spends, and its calls a minute (0: none): the token's
    own when it has one (``ApiToken.rate_per_minute``), else its owner's, shared by every
    token and session of that person (``INFER_RATE_PER_MINUTE``)."""
    token = getattr(request, "api_token", None)
    if token is not None and token.rate_per_minute is not None:
        return f"infer-token:{token.pk}", int(token.rate_per_minute)
    return f"infer:{request.user.pk}", int(settings.INFER_RATE_PER_MINUTE)


def check_rate(key: str, limit_per_minute: int, now: float | None = None) -> None:
    """Count one request for ``key``; raise RateLimited when the window's budget is spent.

    A Redis that does not answer must not take inference down with it: the request is
    then allowed and counted locally.
    """
    if limit_per_minute <= 0:
        return
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    count: int
    if settings.LIMITS_REDIS_URL:
        redis_key = rate_key(key, window)
        try:
            pipe = _client(settings.LIMITS_REDIS_URL).pipeline(transaction=False)
            pipe.incr(redis_key)
            pipe.expire(redis_key, WINDOW_SECONDS * 2)
            count = int(pipe.execute()[0])
        except redis.RedisError:
            count = _count_locally(key, window)
    else:
        count = _count_locally(key, window)
    if count > limit_per_minute:
        retry_after = max(1, int((window + 1) * WINDOW_SECONDS - now))
        raise RateLimited(limit_per_minute, retry_after, token=key.startswith("infer-token:"))

"""Requests that may hold a web thread for seconds are bounded, so quick ones always find one.

The web process answers HTTP from a fixed pool of ``WEB_THREADS`` threads (``webapp/edge/asgi.py``).
An infer call waits for Triton (up to ``INFER_TIMEOUT_SECONDS``) and a ``?wait=true`` switch
waits for its job (up to ``SERVE_WAIT_SECONDS``); enough of them at once would leave no thread
for a health check or a page. Two bounds apply, both checked before any waiting starts:

* per process, at most ``WEB_SLOW_REQUESTS`` slow requests hold threads at once (by default
  all but four of the pool); the next one is answered 503 with ``Retry-After`` at once;
* per person, at most ``INFER_CONCURRENCY_PER_USER`` slow requests at once, counted in Redis
  across every web process (a sorted set of request ids, so a crashed process's entries
  expire instead of leaking; ``LIMITS_REDIS_URL``); the next one gets 429.

The process bound is about this process's own threads, so it lives in this process's memory.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import uuid
from collections.abc import Iterator

import redis
from django.conf import settings
from django.utils.translation import gettext

from webapp.edge.shared import slow_key
from webapp.errors import HubError

_gate_lock = threading.Lock()
_gates: dict[int, threading.BoundedSemaphore] = {}
_local_lock = threading.Lock()
_local_inflight: dict[str, set[str]] = {}


class Busy(HubError):
    """A bound was reached; ``Retry-After`` says when to try again (seconds)."""

    def __init__(self, message: str, code: str, status: int, retry_after: int) -> None:
        super().__init__(message, code, status, headers={"Retry-After": str(retry_after)})


def _process_gate() -> threading.BoundedSemaphore:
    limit = settings.WEB_SLOW_REQUESTS or max(1, settings.WEB_THREADS - 4)
    with _gate_lock:
        gate = _gates.get(limit)
        if gate is None:
            gate = _gates[limit] = threading.BoundedSemaphore(limit)
        return gate


@functools.lru_cache(maxsize=4)
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)


def _enter_user(user_key: str, request_id: str, limit: int, ttl: float) -> bool:
    """Count this request for the person; False (and not counted) past ``limit``."""
    if settings.LIMITS_REDIS_URL:
        key, now = slow_key(user_key), time.time()
        pipe = _redis(settings.LIMITS_REDIS_URL).pipeline()
        pipe.zremrangebyscore(key, 0, now - ttl)  # entries of requests that never left
        pipe.zadd(key, {request_id: now})
        pipe.zcard(key)
        pipe.expire(key, int(ttl) + 1)
        count = pipe.execute()[2]
        if count > limit:
            _redis(settings.LIMITS_REDIS_URL).zrem(key, request_id)
            return False
        return True
    with _local_lock:
        mine = _local_inflight.setdefault(user_key, set())
        if len(mine) >= limit:
            return False
        mine.add(request_id)
        return True


def _leave_user(user_key: str, request_id: str) -> None:
    if settings.LIMITS_REDIS_URL:
        with contextlib.suppress(redis.RedisError):
            _redis(settings.LIMITS_REDIS_URL).zrem(slow_key(user_key), request_id)
        return
    with _local_lock:
        _local_inflight.get(user_key, set()).discard(request_id)


@contextlib.contextmanager
def slow_request(user_key: str, *, longest_s: float) -> Iterator[None]:
    """Hold a place for one slow request of ``user_key`` that may last ``longest_s``.

    Raises:
        Busy: 429 ``too_many_requests`` (this person's bound) or 503 ``busy`` (the process's).
    """
    limit = settings.INFER_CONCURRENCY_PER_USER
    request_id = uuid.uuid4().hex
    try:
        admitted = _enter_user(user_key, request_id, limit, ttl=longest_s + 30)
    except redis.RedisError:
        admitted = True  # Redis down: the process bound below still protects the threads
    if not admitted:
        message = gettext(
            "You have %(count)s slow requests running (inference or waiting switches); the "
            "limit is INFER_CONCURRENCY_PER_USER. Wait for one to finish."
        )
        raise Busy(
            message % {"count": limit},
            "too_many_requests",
            429,
            retry_after=1,
        )
    gate = _process_gate()
    if not gate.acquire(blocking=False):
        _leave_user(user_key, request_id)
        raise Busy(
            gettext(
                "The dashboard is busy with other long requests right now; try again in a few "
                "seconds."
            ),
            "busy",
            503,
            retry_after=2,
        )
    try:
        yield
    finally:
        gate.release()
        _leave_user(user_key, request_id)

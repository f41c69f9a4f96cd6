"""Health of each part the dashboard depends on: each check says ok, or the reason it is not."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest

from model_store.text import Message, say
from webapp.ops import heartbeat, stack_status
from webapp.ops.triton import get_runtime

CHECK_TIMEOUT_SECONDS = 2.0
TRITON_TIMEOUT_SECONDS = 1.0
#: One process answers repeated health checks from its last result for this long.
CACHE_SECONDS = 2.0
_cache: tuple[float, dict[str, dict[str, object]]] | None = None
_cache_lock = threading.Lock()


@dataclass
class Check:
    ok: bool
    detail: str


def check_web() -> Check:
    return Check(True, "serving requests")


def check_database() -> Check:
    vendor = connection.vendor
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:
        return Check(False, f"{vendor} is not reachable: {exc}")
    return Check(True, f"{vendor} answers")


def check_broker() -> Check:
    if not settings.REDIS_URL:
        return Check(False, "REDIS_URL is not set, so no jobs can be queued; `make run` sets it.")
    client = redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=CHECK_TIMEOUT_SECONDS,
        socket_connect_timeout=CHECK_TIMEOUT_SECONDS,
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        return Check(False, f"Redis at {_safe_url(settings.REDIS_URL)} does not answer: {exc}")
    finally:
        client.close()
    return Check(True, f"Redis at {_safe_url(settings.REDIS_URL)} answers")


#: Pages ask Redis at most this often per process, and wait this long for it (the banner).
BANNER_CACHE_SECONDS = 2.0
BANNER_TIMEOUT_SECONDS = 0.25
_banner_cache: tuple[float, Message | None] | None = None


def banner(request: HttpRequest) -> dict[str, object]:
    """Template context: the parts that are down, for the banner on every page."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    down = stack_status.parts_down()
    lines = [stack_status.describe(p) for p in down]
    if not any(p["name"] == "redis" for p in down):  # the launcher's own Redis is named above
        broker = broker_banner()
        if broker:
            lines.append(broker)
    return {"stack_down": lines}


def broker_banner() -> Message | None:
    """A sentence for every page while Redis (``REDIS_URL``) does not answer, else None.

    The launcher's banner names its own parts; an external Redis (compose, ``REDIS_URL``) is
    no part of it, so pages ask Redis themselves, briefly and at most every
    :data:`BANNER_CACHE_SECONDS`.
    """
    global _banner_cache
    if not settings.REDIS_URL:
        return None
    with _cache_lock:
        if _banner_cache is not None and time.monotonic() - _banner_cache[0] < BANNER_CACHE_SECONDS:
            return _banner_cache[1]
    client = redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=BANNER_TIMEOUT_SECONDS,
        socket_connect_timeout=BANNER_TIMEOUT_SECONDS,
    )
    try:
        client.ping()
        text = None
    except redis.RedisError as exc:
        text = say(
            "Redis at %(url)s does not answer (%(error)s): new jobs cannot be queued and pages "
            "do not update live until it is back.",
            url=_safe_url(settings.REDIS_URL),
            error=str(exc),
        )
    finally:
        client.close()
    with _cache_lock:
        _banner_cache = (time.monotonic(), text)
    return text


def check_workers() -> Check:
    if not settings.REDIS_URL:
        return Check(False, "no broker, so no worker can be reached")
    try:
        workers = heartbeat.fresh_workers()
    except redis.RedisError as exc:
        return Check(False, f"cannot read the workers' heartbeats: {exc}")
    if not workers:
        return Check(
            False,
            f"no Celery worker reported in the last {heartbeat.max_age_s():.0f} s; start one "
            "(`make run` does), and beat, which asks them to report.",
        )
    newest = min(workers.values())
    return Check(True, f"{len(workers)} worker host(s) reported, the last {newest:.0f} s ago")


def check_triton() -> Check:
    runtime = get_runtime(timeout=TRITON_TIMEOUT_SECONDS)
    if not runtime.is_live():
        return Check(False, f"Triton at {settings.TRITON_URL} is not reachable.")
    if not runtime.is_ready():
        return Check(False, f"Triton at {settings.TRITON_URL} is live but not ready.")
    return Check(True, f"Triton at {settings.TRITON_URL} is live and ready")


def check_parts() -> Check:
    """Only under the launcher (``make run``): every part it supervises is up."""
    down = stack_status.parts_down()
    if down:
        return Check(False, " ".join(str(stack_status.describe(p)) for p in down))
    return Check(True, "every part the launcher runs is up")


CHECKS: dict[str, Callable[[], Check]] = {
    "web": check_web,
    "database": check_database,
    "broker": check_broker,
    "workers": check_workers,
    "triton": check_triton,
}


def run_checks() -> dict[str, dict[str, object]]:
    """Every check's result; within :data:`CACHE_SECONDS` of the last run, that run's."""
    global _cache
    with _cache_lock:
        if _cache is not None and time.monotonic() - _cache[0] < CACHE_SECONDS:
            return _cache[1]
    results = _run_all()
    with _cache_lock:
        _cache = (time.monotonic(), results)
    return results


def forget_cached() -> None:
    global _cache, _banner_cache
    with _cache_lock:
        _cache = None
        _banner_cache = None


def _run_all() -> dict[str, dict[str, object]]:
    results: dict[str, dict[str, object]] = {}
    checks = dict(CHECKS)
    if stack_status.launched():
        checks["parts"] = check_parts
    for name, check in checks.items():
        try:
            results[name] = asdict(check())
        except Exception as exc:  # a broken check must not hide the others
            results[name] = asdict(Check(False, f"check failed: {exc}"))
    return results


def _safe_url(url: str) -> str:
    """Drop a password from a URL before it is shown."""
    if "@" not in url:
        return url
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"

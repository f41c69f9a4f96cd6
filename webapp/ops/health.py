"""Health of each part the dashboard depends on: each check says ok, or the reason it is not."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import redis
from django.conf import settings
from django.db import connection

from webapp.ops.triton import get_runtime

CHECK_TIMEOUT_SECONDS = 2.0


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


def check_workers() -> Check:
    if not settings.REDIS_URL:
        return Check(False, "no broker, so no worker can be reached")
    from workers.celery import app

    try:
        replies = app.control.ping(timeout=1.0)
    except Exception as exc:
        return Check(False, f"cannot ask the workers: {exc}")
    if not replies:
        return Check(False, "no Celery worker answered within 1 s; start one (`make run` does).")
    return Check(True, f"{len(replies)} worker(s) answered")


def check_triton() -> Check:
    runtime = get_runtime(timeout=CHECK_TIMEOUT_SECONDS)
    if not runtime.is_live():
        return Check(False, f"Triton at {settings.TRITON_URL} is not reachable.")
    if not runtime.is_ready():
        return Check(False, f"Triton at {settings.TRITON_URL} is live but not ready.")
    return Check(True, f"Triton at {settings.TRITON_URL} is live and ready")


CHECKS: dict[str, Callable[[], Check]] = {
    "web": check_web,
    "database": check_database,
    "broker": check_broker,
    "workers": check_workers,
    "triton": check_triton,
}


def run_checks() -> dict[str, dict[str, object]]:
    results: dict[str, dict[str, object]] = {}
    for name, check in CHECKS.items():
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

"""``GET /metrics``: the dashboard's own metrics in Prometheus text format.

Web, workers and beat are separate processes (often on separate hosts), so nothing here is a
process-local counter: a custom collector reads the database and Redis at scrape time. Every
figure is a few indexed queries or one Redis round trip; a scrape takes a few milliseconds
(``hub_metrics_collect_seconds`` reports it).

Series:

* ``hub_jobs{kind,state}``: jobs now in each state (every kind x state, zeros included).
* ``hub_job_duration_seconds{kind}``: histogram of started -> finished of the jobs that
  finished in the last 24 hours. It is a window, not a counter: use ``histogram_quantile``
  on it directly, without ``rate()``.
* ``hub_switch_duration_seconds{kind,outcome}``: the same for serve and rollback jobs, by
  outcome (succeeded / failed / cancelled).
* ``hub_models_total``, ``hub_models_serving``, ``hub_versions{status}``.
* ``hub_celery_queue_depth{queue}``: tasks waiting in the broker (Redis ``LLEN``); absent
  without ``REDIS_URL``. ``hub_redis_up`` says whether Redis answered.
* ``hub_metrics_scrape_errors_total`` and ``hub_metrics_last_scrape_timestamp_seconds``: the
  Triton metrics scraper (a worker task) reports through two Redis keys,
  :data:`SCRAPE_ERRORS_KEY` (``INCR`` on each failed scrape) and :data:`LAST_SCRAPE_KEY`
  (Unix time of the last successful scrape); :func:`note_triton_scrape` does both.
* ``hub_triton_up``: Triton answers ``/v2/health/ready`` with 200 within 0.25 s.
* ``hub_collect_ok{part}``: 0 when a part of this collector could not read its source.

Access: any signed-in user or API token with a role (``Authorization: Token <key>``, or
``Bearer <key>``, which is what Prometheus's ``authorization`` block sends); anonymous scrapes
(and users without a role) only when ``METRICS_PUBLIC`` is true.
"""

from __future__ import annotations

import functools
import http.client
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from webapp.accounts.auth import NO_ROLE_MESSAGE
from webapp.accounts.roles import Role, role_of
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Job

log = logging.getLogger(__name__)

#: Redis key the Triton metrics scraper ``INCR``s on every failed scrape.
SCRAPE_ERRORS_KEY = "hub:metrics:scrape_errors"
#: Redis key holding the Unix time (float, seconds) of the last successful Triton scrape.
LAST_SCRAPE_KEY = "hub:metrics:last_scrape_ts"

WINDOW = timedelta(hours=24)
JOB_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)
SWITCH_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
SWITCH_KINDS = (Job.Kind.SERVE, Job.Kind.ROLLBACK)
REDIS_TIMEOUT_SECONDS = 0.2
TRITON_TIMEOUT_SECONDS = 0.25


def _histogram(
    name: str,
    documentation: str,
    labels: Sequence[str],
    buckets: Sequence[float],
    observations: dict[tuple[str, ...], list[float]],
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, documentation, labels=list(labels))
    for key, values in sorted(observations.items()):
        cumulative = [
            (repr(bound), float(sum(1 for v in values if v <= bound))) for bound in buckets
        ]
        cumulative.append(("+Inf", float(len(values))))
        family.add_metric(list(key), cumulative, sum_value=sum(values))
    return family


def _seconds(started: datetime | None, finished: datetime | None) -> float:
    if started is None or finished is None:  # excluded by the query; typed as optional
        return 0.0
    return max(0.0, (finished - started).total_seconds())


class HubCollector(Collector):
    """Reads the database and Redis on every scrape; holds no state of its own."""

    def collect(self) -> Iterator[Metric]:
        began = time.perf_counter()
        ok = GaugeMetricFamily(
            "hub_collect_ok",
            "1 when this part of the collector read its source on this scrape, else 0.",
            labels=["part"],
        )
        for part, reader in (
            ("jobs", self._jobs),
            ("registry", self._registry),
            ("redis", self._redis),
            ("triton", self._triton),
        ):
            try:
                families = list(reader())
            except Exception:
                log.warning("metrics: reading %s failed", part, exc_info=True)
                ok.add_metric([part], 0.0)
                continue
            ok.add_metric([part], 1.0)
            yield from families
        yield ok
        yield GaugeMetricFamily(
            "hub_metrics_collect_seconds",
            "Time this scrape spent reading the database, Redis and Triton.",
            value=time.perf_counter() - began,
        )

    # -- database ---------------------------------------------------------------------

    def _jobs(self) -> Iterable[Metric]:
        counts = {
            (row["kind"], row["state"]): row["n"]
            for row in Job.objects.order_by().values("kind", "state").annotate(n=Count("id"))
        }
        jobs = GaugeMetricFamily("hub_jobs", "Jobs now in each state.", labels=["kind", "state"])
        kinds = sorted({*Job.Kind.values, *(k for k, _ in counts)})
        for kind in kinds:
            for state in Job.State.values:
                jobs.add_metric([kind, state], float(counts.get((kind, state), 0)))
        yield jobs

        since = timezone.now() - WINDOW
        finished = Job.objects.filter(
            state__in=Job.FINISHED, finished__gte=since, started__isnull=False
        ).values_list("kind", "state", "started", "finished")
        by_kind: dict[tuple[str, ...], list[float]] = {(k,): [] for k in kinds}
        switches: dict[tuple[str, ...], list[float]] = defaultdict(list)
        for kind, state, started, ended in finished:
            seconds = _seconds(started, ended)
            by_kind.setdefault((kind,), []).append(seconds)
            if kind in SWITCH_KINDS:
                switches[(kind, state)].append(seconds)
        for kind in SWITCH_KINDS:
            switches.setdefault((kind, Job.State.SUCCEEDED), [])
        yield _histogram(
            "hub_job_duration_seconds",
            "Started to finished, of jobs that finished in the last 24 h (a window: use "
            "histogram_quantile without rate()).",
            ["kind"],
            JOB_BUCKETS,
            by_kind,
        )
        yield _histogram(
            "hub_switch_duration_seconds",
            "Serve and rollback jobs that finished in the last 24 h, started to finished, "
            "by outcome (a window, like hub_job_duration_seconds).",
            ["kind", "outcome"],
            SWITCH_BUCKETS,
            dict(switches),
        )

    def _registry(self) -> Iterable[Metric]:
        models = Model.objects.aggregate(
            total=Count("id"), serving=Count("id", filter=Q(serving_version__isnull=False))
        )
        yield GaugeMetricFamily(
            "hub_models_total", "Models in the registry.", value=float(models["total"])
        )
        yield GaugeMetricFamily(
            "hub_models_serving",
            "Models with a serving version.",
            value=float(models["serving"]),
        )
        statuses = Counter(
            {
                row["status"]: row["n"]
                for row in Version.objects.order_by().values("status").annotate(n=Count("id"))
            }
        )
        versions = GaugeMetricFamily("hub_versions", "Versions by status.", labels=["status"])
        for status in sorted({*Version.Status.values, *statuses}):
            versions.add_metric([status], float(statuses.get(status, 0)))
        yield versions

    # -- Redis --------------------------------------------------------------------------

    def _redis(self) -> Iterable[Metric]:
        url = settings.REDIS_URL
        if not url:
            return []
        queue = getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery")
        up = GaugeMetricFamily("hub_redis_up", "1 when Redis (broker) answered this scrape.")
        try:
            pipe = _redis_client(url).pipeline(transaction=False)
            pipe.llen(queue)
            pipe.get(SCRAPE_ERRORS_KEY)
            pipe.get(LAST_SCRAPE_KEY)
            depth, errors, last = pipe.execute()
        except redis.RedisError:
            log.warning("metrics: Redis did not answer", exc_info=True)
            up.add_metric([], 0.0)
            return [up]
        up.add_metric([], 1.0)
        queue_depth = GaugeMetricFamily(
            "hub_celery_queue_depth",
            "Celery tasks waiting in the broker queue.",
            labels=["queue"],
        )
        queue_depth.add_metric([queue], float(depth))
        families: list[Metric] = [up, queue_depth]
        families.append(
            CounterMetricFamily(
                "hub_metrics_scrape_errors",
                f"Failed scrapes of Triton's metrics endpoint (Redis key {SCRAPE_ERRORS_KEY}).",
                value=_number(errors) or 0.0,
            )
        )
        last_ts = _number(last)
        if last_ts is not None:
            families.append(
                GaugeMetricFamily(
                    "hub_metrics_last_scrape_timestamp_seconds",
                    f"Unix time of the last successful Triton metrics scrape ({LAST_SCRAPE_KEY}).",
                    value=last_ts,
                )
            )
        return families

    # -- Triton -------------------------------------------------------------------------

    def _triton(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(
            "hub_triton_up",
            f"1 when Triton answers /v2/health/ready with 200 within {TRITON_TIMEOUT_SECONDS} s.",
            value=1.0 if triton_ready(settings.TRITON_URL) else 0.0,
        )


def _number(raw: bytes | str | None) -> float | None:
    if raw is None:
        return None
    try:
        return float(raw)
    except (TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=4)
def _redis_client(url: str) -> redis.Redis:
    """One client (and connection pool) per URL per process, with short time-outs."""
    return redis.Redis.from_url(
        url, socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS
    )


def triton_ready(hostport: str, timeout: float = TRITON_TIMEOUT_SECONDS) -> bool:
    """True when ``GET /v2/health/ready`` answers 200 in time. A plain HTTP call: building a
    tritonclient per scrape would cost more than the whole scrape should."""
    host, _, port = hostport.rpartition(":")
    conn = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=timeout)
    try:
        conn.request("GET", "/v2/health/ready")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException, ValueError):
        return False
    finally:
        conn.close()


def note_triton_scrape(ok: bool, *, at: float | None = None) -> None:
    """For the Triton metrics scraper: count a failed scrape, or stamp a successful one.

    Best effort, never raises; without ``REDIS_URL`` it does nothing.
    """
    if not settings.REDIS_URL:
        return
    try:
        client = _redis_client(settings.REDIS_URL)
        if ok:
            client.set(LAST_SCRAPE_KEY, repr(time.time() if at is None else at))
        else:
            client.incr(SCRAPE_ERRORS_KEY)
    except redis.RedisError:
        log.warning("metrics: could not record a Triton scrape in Redis", exc_info=True)


REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(HubCollector())

# In English (marked for translation): said with gettext when answering, in the request's
# language (Accept-Language).
UNAUTHORIZED = gettext_noop(
    "401 Unauthorized: /metrics needs an API token. Send 'Authorization: Token <key>' (or "
    "'Bearer <key>'); create one with 'python manage.py apitoken USERNAME'. Or set "
    "METRICS_PUBLIC=true to let anyone who can reach the dashboard read its metrics.\n"
)
NO_ROLE = "403 Forbidden: " + NO_ROLE_MESSAGE + "\n"


def _no_role() -> str:
    """:data:`NO_ROLE` in the request's language (the status words stay as HTTP says them)."""
    return "403 Forbidden: " + gettext(NO_ROLE_MESSAGE) + "\n"


@login_not_required
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text exposition of :class:`HubCollector`."""
    if request.method not in ("GET", "HEAD"):
        response = HttpResponse(
            "405: use GET.\n", status=405, content_type="text/plain; charset=utf-8"
        )
        response["Allow"] = "GET, HEAD"
        return response
    if not (request.user.is_authenticated or settings.METRICS_PUBLIC):
        response = HttpResponse(
            gettext(UNAUTHORIZED), status=401, content_type="text/plain; charset=utf-8"
        )
        response["WWW-Authenticate"] = 'Token realm="metrics"'
        return response
    # This view is public to the sign-in middleware, so it refuses a user without a role itself
    # (unless the metrics are public anyway).
    if not settings.METRICS_PUBLIC and role_of(request.user) is Role.NONE:
        return HttpResponse(_no_role(), status=403, content_type="text/plain; charset=utf-8")
    # Prometheus asks for OpenMetrics in its Accept header; curl and others get text 0.0.4.
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encoder(REGISTRY), content_type=content_type)

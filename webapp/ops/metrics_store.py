"""Metrics storage: scrape Triton and keep the series in tiers (read back for pages, the API and
advice by webapp/ops/metrics_read.py).

* :func:`scrape_and_store` (the beat task, every METRICS_SCRAPE_SECONDS, once per node)
  parses one node's scrape, diffs it against that node's previous one kept in
  :class:`MetricsState` (under a row lock, so any worker on any host may run next), stores one
  raw :class:`MetricPoint` per model version, rolls that node's finished minutes and 10-minute
  spans up, prunes what is past its tier's retention, and tells open pages ("metrics" topic).
* :func:`record_client_call`: the hub's own inference calls, counted in memory (a dict update
  under a lock) and flushed to :class:`ClientTally` rows by a short-lived timer thread; the
  next scrape folds them into the same points. For ``npu_ge`` models, whose backend reports
  nothing to Triton, they are the only numbers.
* :func:`remote_scrape_targets`: the nodes besides ``local`` the beat task scrapes.

The arithmetic lives in model_store.runtime (metrics, series, advice); this is storage glue.
"""

from __future__ import annotations

import atexit
import logging
import operator
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from django.db import DatabaseError, connection, connections, transaction
from django.db.models import QuerySet

from model_store.runtime.metrics import Scrape, parse_scrape
from model_store.runtime.metrics_fetch import fetch_metrics_text
from model_store.runtime.series import (
    MINUTE,
    RAW,
    SUM_FIELDS,
    TEN_MINUTES,
    TIERS,
    Point,
    bucket_start,
    downsample,
    points_between,
    scrape_from_json,
    scrape_to_json,
)
from webapp.nodes.host_reports import LOCAL_NODE
from webapp.nodes.models import HostReport, Node
from webapp.nodes.summaries import state as node_state
from webapp.ops.models import ClientTally, MetricPoint, MetricsState

log = logging.getLogger(__name__)

#: Client-side tallies older than this many seconds in memory are flushed to the database.
FLUSH_SECONDS = 1.0
#: At most this many tally rows are folded in per scrape (the rest wait for the next one).
MAX_TALLIES = 500

_POINT_FIELDS = (
    "success",
    "failures",
    "inferences",
    "executions",
    *SUM_FIELDS,
    "pending",
    "client_requests",
    "client_failures",
)


def utc_datetime(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


#: The stack's own Triton, the node scraped as before the hub knew others.
LOCAL = LOCAL_NODE
_STATE_PREFIX = "node:"


def state_key(node: str = LOCAL) -> str:
    """A node's :class:`MetricsState` key. Before metrics were per node the key was the metrics
    URL; migration 0004 renamed that row ``node:local``."""
    return f"{_STATE_PREFIX}{node}"


# --------------------------------------------------------------------------- client-side calls

_lock = threading.Lock()
_pending: dict[tuple[str, str], list[float]] = {}  # (model, version) -> [calls, failed, ms]
_timer: threading.Timer | None = None


def record_client_call(model_name: str, version: int | str, latency_ms: float, ok: bool) -> None:
    """Count one of the hub's own inference calls (a few µs; the database sees it within ~1 s)."""
    record_client_calls(model_name, version, 1, 0 if ok else 1, latency_ms if ok else 0.0)


def record_client_calls(
    model_name: str, version: int | str, requests: int, failures: int, latency_ms_sum: float
) -> None:
    """Count ``requests`` calls at once (a sweep level), ``failures`` of them failed;
    ``latency_ms_sum`` sums the latency of the successful ones."""
    global _timer
    key = (model_name, str(version))
    with _lock:
        tally = _pending.get(key)
        if tally is None:
            tally = _pending[key] = [0, 0, 0.0]
        tally[0] += requests
        tally[1] += failures
        tally[2] += latency_ms_sum
        if _timer is None:
            _timer = threading.Timer(FLUSH_SECONDS, _flush_in_thread)
            _timer.daemon = True
            _timer.start()


def _take_pending() -> dict[tuple[str, str], list[float]]:
    global _pending, _timer
    with _lock:
        taken, _pending, _timer = _pending, {}, None
    return taken


def flush_client_calls() -> int:
    """Write this process's counted calls to the database now; returns the rows written."""
    taken = _take_pending()
    if not taken:
        return 0
    rows = [
        ClientTally(
            model_name=model, version=version, requests=int(n), failures=int(f), latency_ms=ms
        )
        for (model, version), (n, f, ms) in taken.items()
    ]
    try:
        ClientTally.objects.bulk_create(rows)
    except DatabaseError:
        log.warning("could not record %d client-side call tallies; retrying", len(rows))
        for (model, version), (n, f, ms) in taken.items():  # keep them for the next flush
            record_client_calls(model, version, int(n), int(f), ms)
        return 0
    return len(rows)


def _flush_in_thread() -> None:
    try:
        flush_client_calls()
    except Exception:  # a timer thread must never die noisily in a web process
        log.warning("client-side metrics flush failed", exc_info=True)
    finally:
        connections.close_all()  # this thread's own connections only


@atexit.register
def _flush_at_exit() -> None:
    if _pending:
        try:
            flush_client_calls()
        except Exception:  # the database may already be gone at exit
            log.debug("client-side metrics lost at exit", exc_info=True)


# --------------------------------------------------------------------------- rows <-> points

_COLUMNS = ("model_name", "version", "start", "seconds", *_POINT_FIELDS)


def _points(rows: QuerySet[MetricPoint]) -> list[Point]:
    """The rows as points (``values_list``: no model instances on this hot path)."""
    return [
        Point(
            model,
            version,
            start.timestamp(),
            seconds,
            **dict(zip(_POINT_FIELDS, rest, strict=True)),
        )
        for model, version, start, seconds, *rest in rows.values_list(*_COLUMNS)
    ]


def points_by_node(rows: QuerySet[MetricPoint], into: dict[str, list[Point]]) -> None:
    """The rows as points, appended to their node's list in ``into``."""
    for node, model, version, start, seconds, *rest in rows.values_list("node", *_COLUMNS):
        point = Point(
            model,
            version,
            start.timestamp(),
            seconds,
            **dict(zip(_POINT_FIELDS, rest, strict=True)),
        )
        into.setdefault(node, []).append(point)


def _insert(points: Sequence[Point], tier: int, node: str) -> None:
    """INSERT the points as ``node``'s rows of ``tier`` in one ``executemany``.

    ``bulk_create`` spent 9 ms of a 100-model scrape preparing 100 instances' values; this
    takes 1.5 ms (bench/metrics_scrape.py). Table and column names come from the model.
    """
    if not points:
        return
    meta = MetricPoint._meta
    quote = connection.ops.quote_name
    column_of = {f.name: str(f.column) for f in meta.concrete_fields}
    columns = ", ".join(quote(column_of[name]) for name in (*_COLUMNS, "tier", "node"))
    marks = ", ".join(["%s"] * (len(_COLUMNS) + 2))
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({marks})"  # noqa: S608
    adapt = connection.ops.adapt_datetimefield_value
    fields_of = operator.attrgetter(*_POINT_FIELDS)
    rows = [
        (p.model, p.version, adapt(utc_datetime(p.start)), p.seconds, *fields_of(p), tier, node)
        for p in points
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


# --------------------------------------------------------------------------- scraping


@dataclass(frozen=True)
class ScrapeResult:
    stored: int  # raw points written
    resets: list[tuple[str, str]]
    skipped: str = ""  # why nothing was stored ("" when points were)


def scrape_and_store(
    *,
    node: str = LOCAL,
    metrics_url: str | None = None,
    text: str | None = None,
    now: float | None = None,
) -> ScrapeResult:
    """One scrape of ``node``: parse, diff against its previous one, store, roll up, prune,
    publish.

    ``text``/``now`` let tests and the benchmark feed recorded scrapes. Otherwise ``local`` is
    read as the hub's runtime reads its Triton (``TRITON_METRICS_URL``), and any other node at
    ``metrics_url``, the address its own report gave, with the bounds of
    :func:`~model_store.runtime.metrics_fetch.fetch_metrics_text` (5 s, 8 MiB, http(s) only).
    TritonUnavailable / TritonRequestError propagate; MetricsParseError too.
    """
    if text is None:
        if metrics_url is not None:
            text = fetch_metrics_text(metrics_url)
        elif node == LOCAL:
            from webapp.ops.triton import get_runtime

            text = get_runtime(timeout=5.0).scrape_metrics()
        else:
            raise ValueError(f"node {node!r}: no metrics URL to scrape")
    cur = parse_scrape(text, at=time.time() if now is None else now)
    # The hub's own calls go through its gateway to local's Triton, so they count as local's
    # (a gateway spreading calls over nodes would have to say which node served each one).
    local = node == LOCAL
    if local:
        flush_client_calls()  # calls counted in this process (a sweep in this worker)
    with transaction.atomic():
        state, _ = MetricsState.objects.select_for_update().get_or_create(key=state_key(node))
        prev = _previous(state)
        if prev is not None and not prev.at < cur.at:
            # Another worker stored a later scrape while this one waited for the lock.
            return ScrapeResult(0, [], skipped="out of order")
        if state.minute_done is None or state.ten_done is None:
            state.minute_done = utc_datetime(bucket_start(cur.at, MINUTE))
            state.ten_done = utc_datetime(bucket_start(cur.at, TEN_MINUTES))
        points: list[Point] = []
        resets: list[tuple[str, str]] = []
        if prev is not None:
            points, resets = points_between(prev, cur)
            if local:
                points = _fold_client_calls(points, prev.at, cur.at - prev.at)
            _insert(points, RAW, node)
        _roll_up(state, cur.at, node)
        _prune(state, cur.at, node)
        state.at, state.scrape = cur.at, scrape_to_json(cur)
        state.save()
    if prev is None:
        return ScrapeResult(0, [], skipped="first scrape (a baseline to diff the next one with)")
    _publish(points, cur.at, node)
    return ScrapeResult(len(points), resets)


def _previous(state: MetricsState) -> Scrape | None:
    if not state.scrape:
        return None
    try:
        return scrape_from_json(state.scrape)
    except ValueError:
        log.warning("stored scrape for %s is unreadable; starting from this one", state.key)
        return None


def _fold_client_calls(points: list[Point], start: float, seconds: float) -> list[Point]:
    tallies = list(ClientTally.objects.order_by("pk")[:MAX_TALLIES])
    if not tallies:
        return points
    calls: dict[tuple[str, str], list[float]] = {}
    for t in tallies:
        entry = calls.setdefault((t.model_name, t.version), [0, 0, 0.0])
        entry[0] += t.requests
        entry[1] += t.failures
        entry[2] += t.latency_ms
    ClientTally.objects.filter(pk__in=[t.pk for t in tallies]).delete()
    out: list[Point] = []
    for point in points:
        n, f, ms = calls.pop((point.model, point.version), (0, 0, 0.0))
        out.append(_with_calls(point, n, f, ms) if n else point)
    for (model, version), (n, f, ms) in sorted(calls.items()):
        # A version Triton does not report (unloaded since, or another Triton): its own point.
        out.append(_with_calls(Point(model, version, start, seconds), n, f, ms))
    return out


def _with_calls(point: Point, requests: float, failures: float, ms: float) -> Point:
    return replace(
        point,
        client_requests=point.client_requests + int(requests),
        client_failures=point.client_failures + int(failures),
        client_latency_ms=point.client_latency_ms + ms,
    )


def _roll_up(state: MetricsState, now: float, node: str) -> None:
    """Raw -> 1-minute rows for every finished minute, then 1-minute -> 10-minute rows, of
    ``node`` only (each node's state row says how far its own roll-ups got)."""
    for source, width, field in ((RAW, MINUTE, "minute_done"), (MINUTE, TEN_MINUTES, "ten_done")):
        done: datetime = getattr(state, field)
        boundary = utc_datetime(bucket_start(now, width))
        if boundary <= done:
            continue
        rows = MetricPoint.objects.filter(
            node=node, tier=source, start__gte=done, start__lt=boundary
        )
        _insert(downsample(_points(rows), width), width, node)
        setattr(state, field, boundary)


def _prune(state: MetricsState, now: float, node: str) -> None:
    """Delete ``node``'s rows past their tier's retention (never rows not rolled up yet)."""
    not_before = {RAW: state.minute_done, MINUTE: state.ten_done}
    for tier in TIERS:
        cutoff = utc_datetime(now - tier.keep)
        guard = not_before.get(tier.width)
        if guard is not None:
            cutoff = min(cutoff, guard)
        MetricPoint.objects.filter(node=node, tier=tier.width, start__lt=cutoff).delete()


def _publish(points: list[Point], at: float, node: str) -> None:
    """Tell open pages a scrape of ``node`` was stored: per model, requests/s of this interval."""
    from webapp import live

    summary: dict[str, dict[str, float]] = {}
    for point in points:  # versions of one model share the interval: add their rates
        if point.seconds <= 0:
            continue
        entry = summary.setdefault(point.model, {"requests_per_s": 0.0, "client_per_s": 0.0})
        entry["requests_per_s"] += point.requests / point.seconds
        entry["client_per_s"] += point.client_requests / point.seconds
    live.publish("metrics", {"at": at, "node": node, "models": summary})


# --------------------------------------------------------------------------- scraper states


def _state(node: str = LOCAL) -> MetricsState | None:
    return MetricsState.objects.filter(key=state_key(node)).first()


def scraper_states() -> dict[str, MetricsState]:
    """Every node's scraper state by node name (one query)."""
    rows = MetricsState.objects.filter(key__startswith=_STATE_PREFIX)
    return {row.key.removeprefix(_STATE_PREFIX): row for row in rows}


# --------------------------------------------------------------------------- which nodes


def remote_scrape_targets() -> list[tuple[str, str]]:
    """``(name, metrics URL)`` of every node other than ``local`` to scrape now: not down
    (draining nodes still serve, so they are scraped) and with a metrics URL in its report.
    Two queries."""
    others = list(Node.objects.exclude(name=LOCAL))
    reports = {r.node: r for r in HostReport.objects.filter(node__in=[n.name for n in others])}
    moment = datetime.now(tz=UTC)
    targets: list[tuple[str, str]] = []
    for node in others:
        url = node.triton.get("metrics") if isinstance(node.triton, dict) else None
        if (
            isinstance(url, str)
            and url
            and node_state(node, reports.get(node.name), moment) != "down"
        ):
            targets.append((node.name, url))
    return targets

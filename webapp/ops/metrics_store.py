"""Metrics: scrape Triton, keep the series in tiers, read it back for pages, API and advice.

* :func:`scrape_and_store` (the beat task, every METRICS_SCRAPE_SECONDS, once per node)
  parses one node's scrape, diffs it against that node's previous one kept in
  :class:`MetricsState` (under a row lock, so any worker on any host may run next), stores one
  raw :class:`MetricPoint` per model version, rolls that node's finished minutes and 10-minute
  spans up, prunes what is past its tier's retention, and tells open pages ("metrics" topic).
* :func:`record_client_call`: the hub's own inference calls, counted in memory (a dict update
  under a lock) and flushed to :class:`ClientTally` rows by a short-lived timer thread; the
  next scrape folds them into the same points. For ``npu_ge`` models, whose backend reports
  nothing to Triton, they are the only numbers.
* :func:`model_metrics`, :func:`sparklines`: the series for one model (API and Metrics tab),
  summed over the nodes or of one node, and the models list's last hour (summed);
  :func:`node_request_rates`: each node's requests/s of the last minutes (the Nodes page).

The arithmetic lives in model_store.runtime (metrics, series, advice); this is storage glue.
"""

from __future__ import annotations

import atexit
import logging
import operator
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, connections, transaction
from django.db.models import F, Max, Q, QuerySet, Sum

from model_store.config import parse_pbtxt
from model_store.errors import ModelStoreError
from model_store.runtime.advice import ServingConfig, advise
from model_store.runtime.metrics import Scrape, parse_scrape
from model_store.runtime.metrics_fetch import fetch_metrics_text
from model_store.runtime.series import (
    MINUTE,
    RAW,
    SUM_FIELDS,
    TEN_MINUTES,
    TIERS,
    Point,
    add_sources,
    bucket_start,
    downsample,
    merge_versions,
    points_between,
    scrape_from_json,
    scrape_to_json,
)
from model_store.targets import get_target
from model_store.text import Message, say
from webapp.ops.host_reports import LOCAL_NODE
from webapp.ops.models import ClientTally, HostReport, MetricPoint, MetricsState, Node
from webapp.ops.nodes import state as node_state

log = logging.getLogger(__name__)

#: range key -> (seconds shown, tier width read, label: a say() message)
RANGES: dict[str, tuple[int, int, Message]] = {
    "1h": (3600, RAW, say("the last hour")),
    "6h": (6 * 3600, MINUTE, say("the last 6 hours")),
    "24h": (24 * 3600, MINUTE, say("the last 24 hours")),
    "7d": (7 * 86400, TEN_MINUTES, say("the last 7 days")),
}
#: The window the capacity advice reads (recent behaviour, not the whole range).
RECENT_SECONDS = 300
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


def _dt(epoch: float) -> datetime:
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


def _points_by_node(rows: QuerySet[MetricPoint], into: dict[str, list[Point]]) -> None:
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
        (p.model, p.version, adapt(_dt(p.start)), p.seconds, *fields_of(p), tier, node)
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
            state.minute_done = _dt(bucket_start(cur.at, MINUTE))
            state.ten_done = _dt(bucket_start(cur.at, TEN_MINUTES))
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
        boundary = _dt(bucket_start(now, width))
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
        cutoff = _dt(now - tier.keep)
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


# --------------------------------------------------------------------------- reading


def _state(node: str = LOCAL) -> MetricsState | None:
    return MetricsState.objects.filter(key=state_key(node)).first()


def _states() -> dict[str, MetricsState]:
    """Every node's scraper state by node name (one query)."""
    rows = MetricsState.objects.filter(key__startswith=_STATE_PREFIX)
    return {row.key.removeprefix(_STATE_PREFIX): row for row in rows}


def read_points(
    names: Sequence[str] | None,
    width: int,
    since: float,
    states: dict[str, MetricsState],
    *,
    node: str | None = None,
) -> dict[str, list[Point]]:
    """Per node, points of ``names`` (None: every model) from ``since`` on, at ``width`` (0:
    raw); only ``node``'s when given.

    A coarse tier only holds finished buckets, so the rest of the range is read from the
    finer tiers (from the instants each node's roll-ups reached) and bucketed here: the
    newest bucket is live, not a minute late. One query per tier, whatever the node count.
    """
    rows = MetricPoint.objects.all()
    if node is not None:
        rows = rows.filter(node=node)
    if names is not None:
        rows = rows.filter(model_name__in=list(names))
    finer: dict[int, Q] = {}
    for name, state in states.items():
        if (node is not None and name != node) or not (state.minute_done and state.ten_done):
            continue
        parts: list[tuple[int, float]] = []
        if width == TEN_MINUTES:
            parts.append((MINUTE, max(since, state.ten_done.timestamp())))
        if width in (MINUTE, TEN_MINUTES):
            parts.append((RAW, max(since, state.minute_done.timestamp())))
        for tier, start in parts:
            finer[tier] = finer.get(tier, Q()) | Q(node=name, start__gte=_dt(start))
    by_node: dict[str, list[Point]] = {}
    _points_by_node(rows.filter(tier=width, start__gte=_dt(since)).order_by("start"), by_node)
    for tier, condition in finer.items():
        _points_by_node(rows.filter(condition, tier=tier).order_by("start"), by_node)
    if width != RAW:
        by_node = {name: downsample(points, width) for name, points in by_node.items()}
    return by_node


def _across_nodes(by_node: dict[str, list[Point]], width: int) -> list[Point]:
    """One series of several nodes' points: per model, version and bucket, their sum.

    Nodes scrape on their own clocks, so raw points (one per scrape) are first put on the
    scrape interval's grid; buckets of a tier line up already. One node's points are kept
    as they are.
    """
    lists = [points for points in by_node.values() if points]
    if len(lists) <= 1:
        return lists[0] if lists else []
    if width == RAW:
        grid = max(1, int(settings.METRICS_SCRAPE_SECONDS))
        lists = [downsample(points, grid) for points in lists]
    groups: dict[tuple[str, str, float], list[Point]] = {}
    for points in lists:
        for point in points:
            groups.setdefault((point.model, point.version, point.start), []).append(point)
    summed = [
        add_sources(items, model=model, version=version, start=start)
        for (model, version, start), items in groups.items()
    ]
    return [p for p in summed if p is not None]


def _window_total(by_node: dict[str, list[Point]], model: str) -> Point | None:
    """All of ``model``'s points of a window, every version and node: the counts exactly."""
    per_node = [merge_versions(points, model=model) for points in by_node.values()]
    return add_sources(
        [p for p in per_node if p is not None],
        model=model,
        version="*",
        start=min((p.start for p in per_node if p is not None), default=0.0),
        keep_rates=False,
    )


def _version_key(version: str) -> tuple[int, str]:
    return (int(version), "") if version.isdigit() else (1 << 30, version)


def _serving_config(model: Any) -> ServingConfig | None:
    if model.serving_version is None:
        return None
    version = model.versions.filter(number=model.serving_version).first()
    if version is None or not version.config_pbtxt:
        return None
    try:
        cfg = parse_pbtxt(version.config_pbtxt)
    except ModelStoreError:
        return None
    batching = cfg.dynamic_batching
    return ServingConfig(
        max_batch_size=cfg.max_batch_size,
        instance_count=cfg.instance_count,
        dynamic_batching=batching is not None,
        max_queue_delay_us=batching.max_queue_delay_microseconds if batching else 0,
    )


def _point_dict(point: Point) -> dict[str, Any]:
    return {
        "t": point.start,
        "seconds": point.seconds,
        "version": point.version,
        "requests": point.requests,
        **point.rates(),
    }


def _totals(point: Point | None) -> dict[str, Any]:
    if point is None:
        return {
            "seconds": 0.0,
            "requests": 0,
            "failures": 0,
            "inferences": 0,
            "client_requests": 0,
            "client_failures": 0,
        }
    return {
        "seconds": point.seconds,
        "requests": point.requests,
        "failures": point.failures,
        "inferences": point.inferences,
        "client_requests": point.client_requests,
        "client_failures": point.client_failures,
    }


def model_metrics(
    model: Any, range_key: str, *, node: str | None = None, now: float | None = None
) -> dict[str, Any]:
    """What ``GET /api/v1/models/{name}/metrics`` answers and the Metrics tab draws.

    ``model`` is a registry Model (its target and serving config shape the advice). ``node``
    None sums every node (the same version's points of the same bucket add up); a name reads
    that node's points only. ``nodes`` lists the nodes with points of the model in the range
    whichever is read (what a node picker offers).
    """
    seconds, width, label = RANGES[range_key]
    now = time.time() if now is None else now
    states = _states()
    since = now - seconds if width == RAW else bucket_start(now - seconds, width) + width
    everywhere = read_points([model.name], width, since, states)
    by_node = everywhere if node is None else {node: everywhere.get(node, [])}
    points = _across_nodes(by_node, width)
    points.sort(key=lambda p: (p.start, _version_key(p.version)))
    recent_by_node = read_points([model.name], RAW, now - RECENT_SECONDS, states, node=node)
    latest = _latest(model.name, recent_by_node)
    total = _window_total(by_node, model.name)
    recent = _window_total(recent_by_node, model.name)
    scraped = [states[name].at for name in ([node] if node else states) if name in states]
    advice = advise(
        target=model.target,
        total=total,
        recent=recent,
        config=_serving_config(model),
        range_label=label,
    )
    versions = sorted({p.version for p in points}, key=_version_key)
    return {
        "model": model.name,
        "range": range_key,
        "tier": width,
        "since": since,
        "now": now,
        "scrape_seconds": settings.METRICS_SCRAPE_SECONDS,
        "last_scrape": max((at for at in scraped if at is not None), default=None),
        "node": node,
        "nodes": sorted(name for name, items in everywhere.items() if items),
        "statistics": "triton"
        if get_target(model.target).reports_statistics
        else f"none ({model.target})",
        "versions": versions,
        "serving_version": model.serving_version,
        "points": [_point_dict(p) for p in points],
        "latest": latest,
        "totals": _totals(total),
        "advice": [a.to_dict() for a in advice],
    }


def _latest(name: str, raw_by_node: dict[str, list[Point]]) -> dict[str, Any] | None:
    """The newest scrape interval of ``name``, all versions (and nodes) together.

    Each node's newest interval counts if it ended after the newest one began: a node that
    stopped being scraped minutes ago adds nothing to "now".
    """
    newest_of = {n: _newest(raw) for n, raw in raw_by_node.items() if raw}
    if not newest_of:
        return None
    began = max(items[0].start for items in newest_of.values())
    current = [items for items in newest_of.values() if items[0].start + items[0].seconds >= began]
    per_node = [merge_versions(items, model=name) for items in current]
    merged = add_sources(
        [p for p in per_node if p is not None], model=name, version="*", start=began
    )
    if merged is None:
        return None
    data = _point_dict(merged)
    versions = sorted({p.version for items in current for p in items}, key=_version_key)
    data["version"] = ",".join(versions)
    data["versions"] = versions
    return data


def _newest(raw: list[Point]) -> list[Point]:
    """The points of the newest interval in ``raw`` (one node's, every version)."""
    newest = max(p.start for p in raw)
    return [p for p in raw if p.start == newest]


# --------------------------------------------------------------------------- models list


@dataclass(frozen=True)
class Sparkline:
    """The last hour of one model's requests/s, ready to draw (an SVG polyline)."""

    latest: float | None  # requests/s of the newest scrape interval, None without data
    peak: float
    points: str  # "x,y x,y ..." in a WIDTH x HEIGHT box, "" when there is nothing to draw
    client_side: bool  # npu_ge: the hub's own calls


WIDTH, HEIGHT = 120, 24


def sparklines(models: Iterable[Any], *, now: float | None = None) -> dict[str, Sparkline]:
    """Per model name: the last hour in 1-minute buckets, summed over the nodes (a handful of
    queries for the whole list, whatever the node count)."""
    targets = {m.name: m.target for m in models}
    if not targets:
        return {}
    now = time.time() if now is None else now
    states = _states()
    since = bucket_start(now - 3600, MINUTE) + MINUTE
    buckets = _across_nodes(read_points(list(targets), MINUTE, since, states), MINUTE)
    # The newest interval of each model, if it ended within the last three scrapes (or minute).
    recent_end = now - max(3 * settings.METRICS_SCRAPE_SECONDS, 60)
    # Per model, each node's newest interval (all versions merged): nodes scrape on their own
    # clocks, so "newest" is per node, then the nodes' rates add up.
    newest: dict[str, list[Point]] = {}
    for raw in read_points(list(targets), RAW, now - RECENT_SECONDS, states).values():
        for model, items in _newest_per_model(p for p in raw if p.start + p.seconds >= recent_end):
            merged = merge_versions(items, model=model)
            if merged is not None:
                newest.setdefault(model, []).append(merged)
    by_model: dict[str, dict[float, list[Point]]] = {}
    for point in buckets:
        by_model.setdefault(point.model, {}).setdefault(point.start, []).append(point)
    out: dict[str, Sparkline] = {}
    for name, target in targets.items():
        client = not get_target(target).reports_statistics
        key = "client_requests_per_s" if client else "requests_per_s"
        series: list[tuple[float, float]] = []
        for start, items in sorted(by_model.get(name, {}).items()):
            merged = merge_versions(items, model=name)
            if merged is not None:
                series.append((start, float(merged.rates()[key] or 0.0)))
        last = add_sources(newest.get(name, []), model=name, version="*", start=now)
        latest = float(last.rates()[key] or 0.0) if last is not None else None
        out[name] = _sparkline(series, since, latest, client)
    return out


def _newest_per_model(points: Iterable[Point]) -> list[tuple[str, list[Point]]]:
    """Per model, the points of its newest interval (one node's points: every version)."""
    newest: dict[str, list[Point]] = {}
    for point in points:
        items = newest.setdefault(point.model, [])
        if items and items[0].start < point.start:
            items.clear()
        if not items or items[0].start == point.start:
            items.append(point)
    return list(newest.items())


def _sparkline(
    series: list[tuple[float, float]], since: float, latest: float | None, client: bool
) -> Sparkline:
    if not series:
        return Sparkline(latest, 0.0, "", client)
    peak = max(v for _, v in series)
    scale = (HEIGHT - 2) / peak if peak > 0 else 0.0
    coords = [f"{(t - since) / 3600 * WIDTH:.1f},{HEIGHT - 1 - v * scale:.1f}" for t, v in series]
    if len(coords) == 1:  # one bucket: a short flat stroke rather than an invisible dot
        x, y = coords[0].split(",")
        coords.append(f"{min(float(x) + 3, WIDTH):.1f},{y}")
    return Sparkline(latest, peak, " ".join(coords), client)


# --------------------------------------------------------------------------- nodes page


def node_request_rates(*, now: float | None = None) -> dict[str, float]:
    """Per node with points: requests/s over the last RECENT_SECONDS, all its models together.

    One query: the raw points of the window, summed per node and scrape interval (the models
    of one scrape share its interval, so its seconds count once). Triton's requests only; the
    hub's own calls to ``npu_ge`` models, which Triton does not count, are left out.
    """
    now = time.time() if now is None else now
    rows = (
        MetricPoint.objects.filter(tier=RAW, start__gte=_dt(now - RECENT_SECONDS))
        .values("node", "start")
        .annotate(requests=Sum(F("success") + F("failures")), seconds=Max("seconds"))
    )
    sums: dict[str, list[float]] = {}
    for row in rows:
        entry = sums.setdefault(row["node"], [0.0, 0.0])
        entry[0] += row["requests"] or 0
        entry[1] += row["seconds"] or 0.0
    return {node: requests / seconds for node, (requests, seconds) in sums.items() if seconds > 0}


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

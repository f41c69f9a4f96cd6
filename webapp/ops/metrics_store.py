"""Metrics: scrape Triton, keep the series in tiers, read it back for pages, API and advice.

* :func:`scrape_and_store` (the beat task, every METRICS_SCRAPE_SECONDS) parses one scrape,
  diffs it against the previous one kept in :class:`MetricsState` (under a row lock, so any
  worker on any host may run next), stores one raw :class:`MetricPoint` per model version,
  rolls finished minutes and 10-minute spans up, prunes what is past its tier's retention, and
  tells open pages ("metrics" topic).
* :func:`record_client_call`: the hub's own inference calls, counted in memory (a dict update
  under a lock) and flushed to :class:`ClientTally` rows by a short-lived timer thread; the
  next scrape folds them into the same points. For ``npu_ge`` models, whose backend reports
  nothing to Triton, they are the only numbers.
* :func:`model_metrics`, :func:`sparklines`: the series for one model (API and Metrics tab)
  and the models list's last hour.

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
from django.db.models import QuerySet

from model_store.config import parse_pbtxt
from model_store.errors import ModelStoreError
from model_store.runtime.advice import ServingConfig, advise
from model_store.runtime.metrics import Scrape, parse_scrape
from model_store.runtime.series import (
    MINUTE,
    RAW,
    SUM_FIELDS,
    TEN_MINUTES,
    TIERS,
    Point,
    bucket_start,
    downsample,
    merge_versions,
    points_between,
    scrape_from_json,
    scrape_to_json,
)
from model_store.targets import get_target
from webapp.ops.models import ClientTally, MetricPoint, MetricsState

log = logging.getLogger(__name__)

#: range key -> (seconds shown, tier width read, label)
RANGES: dict[str, tuple[int, int, str]] = {
    "1h": (3600, RAW, "the last hour"),
    "6h": (6 * 3600, MINUTE, "the last 6 hours"),
    "24h": (24 * 3600, MINUTE, "the last 24 hours"),
    "7d": (7 * 86400, TEN_MINUTES, "the last 7 days"),
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


def state_key() -> str:
    return str(settings.TRITON_METRICS_URL)


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


def _insert(points: Sequence[Point], tier: int) -> None:
    """INSERT the points as rows of ``tier`` in one ``executemany``.

    ``bulk_create`` spent 9 ms of a 100-model scrape preparing 100 instances' values; this
    takes 1.5 ms (bench/metrics_scrape.py). Table and column names come from the model.
    """
    if not points:
        return
    meta = MetricPoint._meta
    quote = connection.ops.quote_name
    column_of = {f.name: str(f.column) for f in meta.concrete_fields}
    columns = ", ".join(quote(column_of[name]) for name in (*_COLUMNS, "tier"))
    marks = ", ".join(["%s"] * (len(_COLUMNS) + 1))
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({marks})"  # noqa: S608
    adapt = connection.ops.adapt_datetimefield_value
    fields_of = operator.attrgetter(*_POINT_FIELDS)
    rows = [
        (p.model, p.version, adapt(_dt(p.start)), p.seconds, *fields_of(p), tier) for p in points
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


# --------------------------------------------------------------------------- scraping


@dataclass(frozen=True)
class ScrapeResult:
    stored: int  # raw points written
    resets: list[tuple[str, str]]
    skipped: str = ""  # why nothing was stored ("" when points were)


def scrape_and_store(*, text: str | None = None, now: float | None = None) -> ScrapeResult:
    """One scrape: parse, diff against the previous one, store, roll up, prune, publish.

    ``text``/``now`` let tests and the benchmark feed recorded scrapes; by default Triton's
    endpoint is read (TritonUnavailable / TritonRequestError propagate; MetricsParseError too).
    """
    if text is None:
        from webapp.ops.triton import get_runtime

        text = get_runtime(timeout=5.0).scrape_metrics()
    cur = parse_scrape(text, at=time.time() if now is None else now)
    flush_client_calls()  # calls counted in this process (a sweep in this worker)
    with transaction.atomic():
        state, _ = MetricsState.objects.select_for_update().get_or_create(key=state_key())
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
            points = _fold_client_calls(points, prev.at, cur.at - prev.at)
            _insert(points, RAW)
        _roll_up(state, cur.at)
        _prune(state, cur.at)
        state.at, state.scrape = cur.at, scrape_to_json(cur)
        state.save()
    if prev is None:
        return ScrapeResult(0, [], skipped="first scrape (a baseline to diff the next one with)")
    _publish(points, cur.at)
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


def _roll_up(state: MetricsState, now: float) -> None:
    """Raw -> 1-minute rows for every finished minute, then 1-minute -> 10-minute rows."""
    for source, width, field in ((RAW, MINUTE, "minute_done"), (MINUTE, TEN_MINUTES, "ten_done")):
        done: datetime = getattr(state, field)
        boundary = _dt(bucket_start(now, width))
        if boundary <= done:
            continue
        rows = MetricPoint.objects.filter(tier=source, start__gte=done, start__lt=boundary)
        _insert(downsample(_points(rows), width), width)
        setattr(state, field, boundary)


def _prune(state: MetricsState, now: float) -> None:
    """Delete rows past their tier's retention (never rows not rolled up yet)."""
    not_before = {RAW: state.minute_done, MINUTE: state.ten_done}
    for tier in TIERS:
        cutoff = _dt(now - tier.keep)
        guard = not_before.get(tier.width)
        if guard is not None:
            cutoff = min(cutoff, guard)
        MetricPoint.objects.filter(tier=tier.width, start__lt=cutoff).delete()


def _publish(points: list[Point], at: float) -> None:
    """Tell open pages a scrape was stored: per model, requests/s of this interval."""
    from webapp import live

    summary: dict[str, dict[str, float]] = {}
    for point in points:  # versions of one model share the interval: add their rates
        if point.seconds <= 0:
            continue
        entry = summary.setdefault(point.model, {"requests_per_s": 0.0, "client_per_s": 0.0})
        entry["requests_per_s"] += point.requests / point.seconds
        entry["client_per_s"] += point.client_requests / point.seconds
    live.publish("metrics", {"at": at, "models": summary})


# --------------------------------------------------------------------------- reading


def _state() -> MetricsState | None:
    return MetricsState.objects.filter(key=state_key()).first()


def read_points(
    names: Sequence[str] | None, width: int, since: float, state: MetricsState | None
) -> list[Point]:
    """Points of ``names`` (None: every model) from ``since`` on, at ``width`` (0: raw).

    A coarse tier only holds finished buckets, so the rest of the range is read from the
    finer tiers (from the instants the roll-ups reached) and bucketed here: the newest
    bucket is live, not a minute late.
    """
    parts: list[tuple[int, float]] = [(width, since)]
    if state is not None and state.minute_done and state.ten_done:
        if width == TEN_MINUTES:
            parts.append((MINUTE, max(since, state.ten_done.timestamp())))
        if width in (MINUTE, TEN_MINUTES):
            parts.append((RAW, max(since, state.minute_done.timestamp())))
    points: list[Point] = []
    for tier, start in parts:
        rows = MetricPoint.objects.filter(tier=tier, start__gte=_dt(start))
        if names is not None:
            rows = rows.filter(model_name__in=list(names))
        points.extend(_points(rows.order_by("start")))
    return points if width == RAW else downsample(points, width)


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


def model_metrics(model: Any, range_key: str, *, now: float | None = None) -> dict[str, Any]:
    """What ``GET /api/v1/models/{name}/metrics`` answers and the Metrics tab draws.

    ``model`` is a registry Model (its target and serving config shape the advice).
    """
    seconds, width, label = RANGES[range_key]
    now = time.time() if now is None else now
    state = _state()
    since = now - seconds if width == RAW else bucket_start(now - seconds, width) + width
    points = read_points([model.name], width, since, state)
    points.sort(key=lambda p: (p.start, _version_key(p.version)))
    raw_recent = read_points([model.name], RAW, now - RECENT_SECONDS, state)
    latest = _latest(model.name, raw_recent)
    total = merge_versions(points, model=model.name)
    recent = merge_versions(raw_recent, model=model.name)
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
        "last_scrape": state.at if state is not None else None,
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


def _latest(name: str, raw: list[Point]) -> dict[str, Any] | None:
    """The newest scrape interval of ``name``, all versions together."""
    if not raw:
        return None
    newest = max(p.start for p in raw)
    items = [p for p in raw if p.start == newest]
    merged = merge_versions(items, model=name)
    if merged is None:
        return None
    data = _point_dict(merged)
    versions = sorted({p.version for p in items}, key=_version_key)
    data["version"] = ",".join(versions)
    data["versions"] = versions
    return data


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
    """Per model name: the last hour in 1-minute buckets (two queries for the whole list)."""
    targets = {m.name: m.target for m in models}
    if not targets:
        return {}
    now = time.time() if now is None else now
    state = _state()
    since = bucket_start(now - 3600, MINUTE) + MINUTE
    buckets = read_points(list(targets), MINUTE, since, state)
    # The newest interval of each model, if it ended within the last three scrapes (or minute).
    recent_end = now - max(3 * settings.METRICS_SCRAPE_SECONDS, 60)
    latest_raw = [
        p
        for p in read_points(list(targets), RAW, now - RECENT_SECONDS, state)
        if p.start + p.seconds >= recent_end
    ]
    by_model: dict[str, dict[float, list[Point]]] = {}
    for point in buckets:
        by_model.setdefault(point.model, {}).setdefault(point.start, []).append(point)
    newest: dict[str, list[Point]] = {}
    for point in latest_raw:
        items = newest.setdefault(point.model, [])
        if items and items[0].start < point.start:
            items.clear()
        if not items or items[0].start == point.start:
            items.append(point)
    out: dict[str, Sparkline] = {}
    for name, target in targets.items():
        client = not get_target(target).reports_statistics
        key = "client_requests_per_s" if client else "requests_per_s"
        series: list[tuple[float, float]] = []
        for start, items in sorted(by_model.get(name, {}).items()):
            merged = merge_versions(items, model=name)
            if merged is not None:
                series.append((start, float(merged.rates()[key] or 0.0)))
        last = merge_versions(newest.get(name, []), model=name)
        latest = float(last.rates()[key] or 0.0) if last is not None else None
        out[name] = _sparkline(series, since, latest, client)
    return out


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

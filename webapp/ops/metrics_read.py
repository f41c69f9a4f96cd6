"""Metrics read back for pages, the API and advice, from the rows webapp/ops/metrics_store.py
keeps.

* :func:`model_metrics`, :func:`sparklines`: the series for one model (API and Metrics tab),
  summed over the nodes or of one node, and the models list's last hour (summed);
* :func:`node_request_rates`: each node's requests/s of the last minutes (the Nodes page).

Apart from the storage: that writes rows on the beat's schedule, this reads them when a page or
the API asks; each changes for its own reasons. The arithmetic lives in model_store.runtime.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import F, Max, Q, Sum

from model_store.config import parse_pbtxt
from model_store.errors import ModelStoreError
from model_store.runtime.advice import ServingConfig, advise
from model_store.runtime.series import (
    MINUTE,
    RAW,
    TEN_MINUTES,
    Point,
    add_sources,
    bucket_start,
    downsample,
    merge_versions,
)
from model_store.targets import get_target
from model_store.text import Message, say
from webapp.ops.metrics_store import points_by_node, scraper_states, utc_datetime
from webapp.ops.models import MetricPoint, MetricsState

#: range key -> (seconds shown, tier width read, label: a say() message)
RANGES: dict[str, tuple[int, int, Message]] = {
    "1h": (3600, RAW, say("the last hour")),
    "6h": (6 * 3600, MINUTE, say("the last 6 hours")),
    "24h": (24 * 3600, MINUTE, say("the last 24 hours")),
    "7d": (7 * 86400, TEN_MINUTES, say("the last 7 days")),
}
#: The window the capacity advice reads (recent behaviour, not the whole range).
RECENT_SECONDS = 300


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
            finer[tier] = finer.get(tier, Q()) | Q(node=name, start__gte=utc_datetime(start))
    by_node: dict[str, list[Point]] = {}
    points_by_node(
        rows.filter(tier=width, start__gte=utc_datetime(since)).order_by("start"), by_node
    )
    for tier, condition in finer.items():
        points_by_node(rows.filter(condition, tier=tier).order_by("start"), by_node)
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
    states = scraper_states()
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
    states = scraper_states()
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
        MetricPoint.objects.filter(tier=RAW, start__gte=utc_datetime(now - RECENT_SECONDS))
        .values("node", "start")
        .annotate(requests=Sum(F("success") + F("failures")), seconds=Max("seconds"))
    )
    sums: dict[str, list[float]] = {}
    for row in rows:
        entry = sums.setdefault(row["node"], [0.0, 0.0])
        entry[0] += row["requests"] or 0
        entry[1] += row["seconds"] or 0.0
    return {node: requests / seconds for node, (requests, seconds) in sums.items() if seconds > 0}

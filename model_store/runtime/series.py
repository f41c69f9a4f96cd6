"""The metrics time series: one :class:`Point` per model, version and interval, kept in tiers.

A point holds *sums* over its interval (requests, inferences, executions, the latency
durations in µs, the hub's own client-side calls) and the interval's length, never rates or
averages. Rates and averages are derived on reading (``count / seconds``, ``Δduration /
Δsuccess``), so merging points into coarser buckets is exact: add the sums, add the seconds.

Tiers (:data:`TIERS`): a raw point per scrape (kept one hour), 1-minute buckets (kept 25 hours)
and 10-minute buckets (kept 7 days). With a scrape every 10 s that is, per model version, at
most 360 + 1,500 + 1,014 = 2,874 rows at any time, whatever the uptime.

Django-free: the storage (webapp/ops) converts these to and from database rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from model_store.runtime.metrics import Scrape, SeriesValues, counter_deltas

__all__ = [
    "COUNT_FIELDS",
    "MINUTE",
    "RAW",
    "SUM_FIELDS",
    "TEN_MINUTES",
    "TIERS",
    "Point",
    "Tier",
    "add_sources",
    "bucket_start",
    "downsample",
    "merge",
    "merge_versions",
    "points_between",
    "scrape_from_json",
    "scrape_to_json",
]

RAW = 0
MINUTE = 60
TEN_MINUTES = 600


@dataclass(frozen=True)
class Tier:
    """``width`` seconds per bucket (0: one point per scrape), kept for ``keep`` seconds."""

    width: int
    keep: int


TIERS: tuple[Tier, ...] = (
    Tier(RAW, 3600),
    # 25 h and 7 d + 1 h, so that a "24 h" or "7 d" chart is full from its first bucket.
    Tier(MINUTE, 25 * 3600),
    Tier(TEN_MINUTES, 7 * 86400 + 3600),
)

#: Whole-number sums (requests and calls).
COUNT_FIELDS = (
    "success",
    "failures",
    "inferences",
    "executions",
    "client_requests",
    "client_failures",
)
#: Sums of durations: Triton's in µs (per successful request), the hub's calls in ms.
SUM_FIELDS = (
    "request_us",
    "queue_us",
    "compute_input_us",
    "compute_infer_us",
    "compute_output_us",
    "client_latency_ms",
)

# metrics.COUNTERS short name -> Point field
_FROM_COUNTER = {
    "success": "success",
    "failure": "failures",
    "inference_count": "inferences",
    "exec_count": "executions",
    "request_us": "request_us",
    "queue_us": "queue_us",
    "compute_input_us": "compute_input_us",
    "compute_infer_us": "compute_infer_us",
    "compute_output_us": "compute_output_us",
}


@dataclass(frozen=True)
class Point:
    """What happened to one model version during ``[start, start + seconds)``.

    ``start`` is in seconds since the epoch. ``pending`` is the most requests seen waiting in
    Triton's scheduler at a scrape inside the interval (None: not exported). The ``client_*``
    fields count the hub's own calls (Try it, sweeps); ``client_latency_ms`` sums the latency
    of the successful ones.
    """

    model: str
    version: str
    start: float
    seconds: float
    success: int = 0
    failures: int = 0
    inferences: int = 0
    executions: int = 0
    request_us: float = 0.0
    queue_us: float = 0.0
    compute_input_us: float = 0.0
    compute_infer_us: float = 0.0
    compute_output_us: float = 0.0
    pending: float | None = None
    client_requests: int = 0
    client_failures: int = 0
    client_latency_ms: float = 0.0

    @property
    def requests(self) -> int:
        return self.success + self.failures

    @property
    def compute_us(self) -> float:
        return self.compute_input_us + self.compute_infer_us + self.compute_output_us

    def _per_success_ms(self, total_us: float) -> float | None:
        return total_us / self.success / 1000.0 if self.success > 0 else None

    def _per_second(self, count: float) -> float:
        return count / self.seconds if self.seconds > 0 else 0.0

    def rates(self) -> dict[str, float | None]:
        """Rates per second and average latencies in ms (None where nothing was measured)."""
        client_ok = self.client_requests - self.client_failures
        return {
            "requests_per_s": self._per_second(self.requests),
            "inferences_per_s": self._per_second(self.inferences),
            "failures_per_s": self._per_second(self.failures),
            "avg_batch": self.inferences / self.executions if self.executions > 0 else None,
            "request_ms": self._per_success_ms(self.request_us),
            "queue_ms": self._per_success_ms(self.queue_us),
            "compute_input_ms": self._per_success_ms(self.compute_input_us),
            "compute_infer_ms": self._per_success_ms(self.compute_infer_us),
            "compute_output_ms": self._per_success_ms(self.compute_output_us),
            "pending": self.pending,
            "client_requests_per_s": self._per_second(self.client_requests),
            "client_failures_per_s": self._per_second(self.client_failures),
            "client_latency_ms": self.client_latency_ms / client_ok if client_ok > 0 else None,
        }

    def busy_fraction(self, instances: int) -> float | None:
        """The share of time the model's instances spent computing (None without data).

        Triton adds an execution's compute time to *each* request of its batch, so one
        execution's time is the per-request sum divided by the batch size.
        """
        if self.seconds <= 0 or self.executions <= 0 or instances < 1:
            return None
        per_execution_us = self.compute_us / max(self.inferences / self.executions, 1.0)
        return per_execution_us / (self.seconds * 1e6 * instances)

    def sums(self) -> dict[str, Any]:
        """Every field as a plain dict (the storage layer's row values)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _max(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def merge(points: Iterable[Point], *, model: str, version: str, start: float) -> Point:
    """One point that holds all of ``points``: sums added, seconds added, pending the max.

    Points that cover the same interval for different versions add their seconds too, so
    merge across versions with :func:`merge_versions` instead.
    """
    total: dict[str, Any] = dict.fromkeys(COUNT_FIELDS, 0) | dict.fromkeys(SUM_FIELDS, 0.0)
    seconds = 0.0
    pending: float | None = None
    for point in points:
        seconds += point.seconds
        pending = _max(pending, point.pending)
        for name in (*COUNT_FIELDS, *SUM_FIELDS):
            total[name] += getattr(point, name)
    return Point(
        model=model, version=version, start=start, seconds=seconds, pending=pending, **total
    )


def merge_versions(points: Iterable[Point], *, model: str, version: str = "*") -> Point | None:
    """All versions of a model over one window: sums added; seconds are the window's own.

    The window's length is taken per version (the sum of its points' seconds) and the
    longest is kept, since versions that serve side by side share the same clock.
    """
    items = list(points)
    if not items:
        return None
    by_version: dict[str, float] = {}
    for point in items:
        by_version[point.version] = by_version.get(point.version, 0.0) + point.seconds
    merged = merge(items, model=model, version=version, start=min(p.start for p in items))
    return replace(merged, seconds=max(by_version.values()))


def add_sources(
    points: Iterable[Point], *, model: str, version: str, start: float, keep_rates: bool = True
) -> Point | None:
    """One window as several independent sources (nodes) saw it, one point each, added up.

    The sources' clocks are not shared: one node's bucket may hold 40 s of scrapes when
    another's holds 30 s. With ``keep_rates`` each source's sums are scaled to the longest
    one's seconds first, so every rate and mean of the result is the sources' together
    (rates add; means are weighted by requests); counts are rounded. Without it the sums add
    as they are (a range's totals: the requests of its nodes). ``pending`` adds up (what
    waited anywhere). None without points.
    """
    items = list(points)
    if not items:
        return None
    seconds = max(p.seconds for p in items)
    if keep_rates:
        items = [_scaled(p, seconds / p.seconds) if p.seconds > 0 else p for p in items]
    pending = [p.pending for p in items if p.pending is not None]
    merged = merge(items, model=model, version=version, start=start)
    return replace(merged, seconds=seconds, pending=sum(pending) if pending else None)


def _scaled(point: Point, factor: float) -> Point:
    if factor == 1.0:
        return point
    values: dict[str, Any] = {name: round(getattr(point, name) * factor) for name in COUNT_FIELDS}
    values |= {name: getattr(point, name) * factor for name in SUM_FIELDS}
    return replace(point, seconds=point.seconds * factor, **values)


def bucket_start(at: float, width: int) -> float:
    """The start of the ``width``-second bucket that holds ``at`` (epoch-aligned)."""
    return float(math.floor(at / width) * width)


def downsample(points: Iterable[Point], width: int) -> list[Point]:
    """Points merged into ``width``-second buckets per model and version, by their start.

    Exact for counts, sums and seconds (so rates and averages of a bucket are exactly those of
    its raw points together); ``pending`` keeps the bucket's maximum. Sorted by start, then
    model and version. Points already on a ``width`` grid map to themselves.
    """
    if width <= 0:
        raise ValueError(f"bucket width must be positive, got {width}")
    groups: dict[tuple[str, str, float], list[Point]] = {}
    for point in points:
        key = (point.model, point.version, bucket_start(point.start, width))
        groups.setdefault(key, []).append(point)
    merged = [
        merge(items, model=model, version=version, start=start)
        for (model, version, start), items in groups.items()
    ]
    return sorted(merged, key=lambda p: (p.start, p.model, p.version))


def _point_from(
    key: tuple[str, str], prev: SeriesValues | None, cur: SeriesValues, start: float, dt: float
) -> tuple[Point, bool]:
    deltas, reset = counter_deltas(prev, cur)
    values: dict[str, Any] = {}
    for short, name in _FROM_COUNTER.items():
        value = deltas.get(short, 0.0)
        values[name] = round(value) if name in COUNT_FIELDS else float(value)
    point = Point(
        model=key[0], version=key[1], start=start, seconds=dt, pending=cur.pending, **values
    )
    return point, reset


def points_between(prev: Scrape, cur: Scrape) -> tuple[list[Point], list[tuple[str, str]]]:
    """Raw points for the interval between two scrapes, and the series that reset in it.

    Same rules as :func:`model_store.runtime.metrics.rates`: a counter reset (Triton restart,
    model reload) makes the current values the deltas, a series new in ``cur`` counts from
    zero, one gone from ``cur`` gives no point. Counts are rounded to whole numbers (Triton's
    counters are integers; the text format carries them as floats).

    Raises ``ValueError`` when ``cur`` was not taken after ``prev``.
    """
    dt = cur.at - prev.at
    if not dt > 0:
        raise ValueError(f"scrapes must be in time order (prev.at={prev.at}, cur.at={cur.at})")
    points: list[Point] = []
    resets: list[tuple[str, str]] = []
    for key in sorted(cur.series):
        point, reset = _point_from(key, prev.series.get(key), cur.series[key], prev.at, dt)
        points.append(point)
        if reset:
            resets.append(key)
    return points, resets


def scrape_to_json(scrape: Scrape) -> dict[str, Any]:
    """A parsed scrape as JSON-able data (kept between scrapes by whichever process is next)."""
    return {
        "at": scrape.at,
        "series": [
            [model, version, dict(values.counters), values.pending]
            for (model, version), values in sorted(scrape.series.items())
        ],
    }


def scrape_from_json(data: Mapping[str, Any]) -> Scrape:
    """The inverse of :func:`scrape_to_json`; ``ValueError`` on anything malformed."""
    try:
        series = {
            (str(model), str(version)): SeriesValues(
                counters={str(k): float(v) for k, v in counters.items()},
                pending=None if pending is None else float(pending),
            )
            for model, version, counters, pending in data["series"]
        }
        return Scrape(at=float(data["at"]), series=series)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"not a stored scrape: {exc}") from exc

"""Per-model rates from two scrapes of Triton's Prometheus metrics endpoint.

Triton exposes cumulative counters per ``(model, version)`` (``nv_inference_request_success``,
``nv_inference_count``, the ``*_duration_us`` latency sums, ...) and one gauge
(``nv_inference_pending_request_count``). Counters only grow while the server lives, so
anything meaningful is a *difference* between two scrapes: :func:`parse_scrape` turns one
exposition text into a :class:`Scrape`, and :func:`rates` turns two of them into
:class:`Rates` per series.

Django-free on purpose: only ``prometheus_client``'s text parser is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "COUNTERS",
    "PENDING_GAUGE",
    "MetricsParseError",
    "Rates",
    "Scrape",
    "SeriesKey",
    "SeriesValues",
    "counter_deltas",
    "parse_scrape",
    "rates",
]

#: ``(model, version)`` -- the labels Triton puts on every per-model metric.
SeriesKey = tuple[str, str]

#: Triton counter family -> the short name used in :class:`SeriesValues`.
COUNTERS: dict[str, str] = {
    "nv_inference_request_success": "success",
    "nv_inference_request_failure": "failure",
    "nv_inference_count": "inference_count",
    "nv_inference_exec_count": "exec_count",
    "nv_inference_request_duration_us": "request_us",
    "nv_inference_queue_duration_us": "queue_us",
    "nv_inference_compute_input_duration_us": "compute_input_us",
    "nv_inference_compute_infer_duration_us": "compute_infer_us",
    "nv_inference_compute_output_duration_us": "compute_output_us",
}

#: The one gauge we keep (requests waiting in the scheduler right now).
PENDING_GAUGE = "nv_inference_pending_request_count"

#: Families whose samples may be split by a ``reason`` label, summed on parse.
_SUMMED_OVER_REASON = frozenset({"nv_inference_request_failure"})


class MetricsParseError(ValueError):
    """The text is not valid Prometheus exposition format, or holds impossible values."""


@dataclass(frozen=True)
class SeriesValues:
    """Cumulative counter values (and the pending gauge) of one ``(model, version)``.

    ``counters`` maps the short names of :data:`COUNTERS` to their values; a counter whose
    family was absent from the scrape (e.g. latencies switched off with
    ``--metrics-config counter_latencies=false``) is absent from the mapping.
    """

    counters: dict[str, float] = field(default_factory=dict)
    pending: float | None = None

    def get(self, name: str) -> float | None:
        """The cumulative value of counter ``name`` (short name), or None when not exported."""
        return self.counters.get(name)


@dataclass(frozen=True)
class Scrape:
    """One parsed scrape: when it was taken (seconds, any monotonic clock) and its series."""

    at: float
    series: dict[SeriesKey, SeriesValues]


@dataclass(frozen=True)
class Rates:
    """What happened to one ``(model, version)`` between two scrapes.

    ``requests_per_s`` counts successful and failed requests; the average latencies are per
    *successful* request (Triton adds to the duration counters only on success) and are None
    when no request succeeded in the interval or when the counters are not exported.
    ``avg_batch`` is inferences per model execution (None when nothing was executed).
    ``pending`` is the gauge value at the second scrape.
    """

    requests_per_s: float
    inferences_per_s: float
    failures_per_s: float
    avg_batch: float | None
    avg_request_ms: float | None
    avg_queue_ms: float | None
    avg_compute_input_ms: float | None
    avg_compute_infer_ms: float | None
    avg_compute_output_ms: float | None
    pending: float | None
    #: True when a counter went down since the previous scrape (Triton restarted or the
    #: model was reloaded): the deltas are then the current values.
    reset: bool = False


def parse_scrape(text: str, at: float) -> Scrape:
    """Parse one Prometheus text scrape of Triton into a :class:`Scrape` taken at ``at``.

    Only the families of :data:`COUNTERS` and :data:`PENDING_GAUGE` are kept; everything
    else (GPU, CPU, cache, summaries, ...) is ignored. Samples without a ``model`` label are
    ignored too; a missing ``version`` label counts as ``""``. The failure counter is summed
    over its ``reason`` label.

    Raises :class:`MetricsParseError` on text the parser rejects, on non-finite or negative
    values, and on the same series appearing twice.
    """
    counters: dict[SeriesKey, dict[str, float]] = {}
    pending: dict[SeriesKey, float] = {}
    seen: set[tuple[SeriesKey, tuple[tuple[str, str], ...]]] = set()
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise MetricsParseError(f"malformed Prometheus text: {exc}") from exc
    # A scrape of 100 models holds ~1,300 samples: this loop stays lean on purpose.
    for family in families:
        name = family.name
        short = COUNTERS.get(name)
        if short is None and name != PENDING_GAUGE:
            continue
        # Counters may be exposed as "<name>" (Triton) or "<name>_total"; skip "_created"
        # and any other derived sample.
        accepted = (name, f"{name}_total")
        summed = name in _SUMMED_OVER_REASON
        for sample in family.samples:
            if sample.name not in accepted:
                continue
            labels = sample.labels
            model = labels.get("model")
            if model is None:
                continue
            key: SeriesKey = (model, labels.get("version", ""))
            value = sample.value
            if not 0 <= value < math.inf:  # also false for NaN
                raise MetricsParseError(f"{sample.name}: impossible value {value!r}")
            if short is None:
                if key in pending:
                    raise MetricsParseError(f"duplicate series {sample.name} for {key}")
                pending[key] = float(value)
                counters.setdefault(key, {})
                continue
            values = counters.setdefault(key, {})
            if summed:
                identity = (key, tuple(sorted(labels.items())))
                if identity in seen:
                    raise MetricsParseError(f"duplicate series {sample.name}{labels}")
                seen.add(identity)
            elif short in values:
                raise MetricsParseError(f"duplicate series {sample.name} for {key}")
            values[short] = values.get(short, 0.0) + value
    series = {
        key: SeriesValues(counters=values, pending=pending.get(key))
        for key, values in counters.items()
    }
    return Scrape(at=float(at), series=series)


def _ratio(numerator: float | None, denominator: float | None, scale: float = 1.0) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator * scale


def counter_deltas(prev: SeriesValues | None, cur: SeriesValues) -> tuple[dict[str, float], bool]:
    """How much each exported counter of one series grew since ``prev``, and whether it reset.

    Prometheus' rule: if any counter is smaller than in ``prev``, the series restarted (Triton
    restarted, the model was reloaded) and its current values are the deltas; a series with no
    ``prev`` counts from zero. Counters absent from ``cur`` are absent from the result; no
    value is ever negative.
    """
    reset = prev is not None and any(
        value < prev.counters[name] for name, value in cur.counters.items() if name in prev.counters
    )
    base = {} if prev is None or reset else prev.counters
    return {name: value - base.get(name, 0.0) for name, value in cur.counters.items()}, reset


def _series_rates(prev: SeriesValues | None, cur: SeriesValues, dt: float) -> Rates:
    deltas, reset = counter_deltas(prev, cur)

    def delta(name: str) -> float | None:
        return deltas.get(name)

    success = delta("success") or 0.0
    failure = delta("failure") or 0.0
    inferences = delta("inference_count") or 0.0
    executions = delta("exec_count")
    to_ms = 1e-3  # µs -> ms
    return Rates(
        requests_per_s=(success + failure) / dt,
        inferences_per_s=inferences / dt,
        failures_per_s=failure / dt,
        avg_batch=_ratio(delta("inference_count"), executions),
        avg_request_ms=_ratio(delta("request_us"), success, to_ms),
        avg_queue_ms=_ratio(delta("queue_us"), success, to_ms),
        avg_compute_input_ms=_ratio(delta("compute_input_us"), success, to_ms),
        avg_compute_infer_ms=_ratio(delta("compute_infer_us"), success, to_ms),
        avg_compute_output_ms=_ratio(delta("compute_output_us"), success, to_ms),
        pending=cur.pending,
        reset=reset,
    )


def rates(prev: Scrape, cur: Scrape) -> dict[SeriesKey, Rates]:
    """Rates per ``(model, version)`` between two scrapes of the same Triton.

    Counter resets follow Prometheus' rule: if any counter of a series is smaller than in
    ``prev``, the series restarted and its current values are the deltas. A series only in
    ``cur`` (model loaded in between) is treated as starting from zero; a series only in
    ``prev`` (model unloaded) is left out of the result.

    Raises ``ValueError`` when ``cur`` was not taken after ``prev``.
    """
    dt = cur.at - prev.at
    if not dt > 0:
        raise ValueError(f"scrapes must be in time order (prev.at={prev.at}, cur.at={cur.at})")
    return {
        key: _series_rates(prev.series.get(key), values, dt) for key, values in cur.series.items()
    }

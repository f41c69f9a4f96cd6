"""The arithmetic of a performance sweep: client-side latency summaries and the server-side
split computed from two Triton statistics responses.

Pure functions and dataclasses, no I/O, so they can be tested without a server.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "LatencySummary",
    "ServerSplit",
    "percentile",
    "server_split",
    "success_count",
]

#: The per-request phases Triton times, as named under ``inference_stats``.
_PHASES = ("queue", "compute_input", "compute_infer", "compute_output")


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ascending ``sorted_values``, interpolated linearly.

    Same definition as ``numpy.percentile``'s default ("linear"): the rank ``q/100 * (n-1)``
    falls between two neighbours and the value is weighted between them.
    """
    if not sorted_values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= q <= 100.0 or math.isnan(q):
        raise ValueError(f"percentile q must be within [0, 100], got {q}")
    rank = q / 100.0 * (len(sorted_values) - 1)
    lo = math.floor(rank)
    hi = min(lo + 1, len(sorted_values) - 1)
    low_value = float(sorted_values[lo])
    return low_value + (float(sorted_values[hi]) - low_value) * (rank - lo)


@dataclass
class LatencySummary:
    """Client-side latency of the successful requests of one measurement window, in ms."""

    count: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    min_ms: float
    max_ms: float

    @classmethod
    def from_seconds(cls, latencies: list[float]) -> LatencySummary:
        """Summarise latencies given in seconds (perf_counter differences); empty → ValueError."""
        if not latencies:
            raise ValueError("no latencies to summarise")
        ms = sorted(value * 1000.0 for value in latencies)
        return cls(
            count=len(ms),
            mean_ms=math.fsum(ms) / len(ms),
            p50_ms=percentile(ms, 50),
            p90_ms=percentile(ms, 90),
            p99_ms=percentile(ms, 99),
            min_ms=ms[0],
            max_ms=ms[-1],
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ServerSplit:
    """Where Triton says the time went, averaged per successful request, over one window.

    ``request_ms`` is Triton's whole request time (receipt to response), the phases are its
    parts; what the client measured beyond ``request_ms`` is network and client overhead.
    ``avg_batch`` is None when the window had no executions (cannot happen with successes,
    but a backend may report inconsistently).
    """

    success: int
    fail: int
    request_ms: float
    queue_ms: float
    compute_input_ms: float
    compute_infer_ms: float
    compute_output_ms: float
    inference_count: int
    execution_count: int
    avg_batch: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _model_entry(stats: Mapping[str, Any] | None, version: str) -> Mapping[str, Any] | None:
    """The ``model_stats`` entry of ``version``; with ``version=""``, the only entry if one."""
    if not stats:
        return None
    entries = [e for e in stats.get("model_stats") or [] if isinstance(e, Mapping)]
    if version == "":
        return entries[0] if len(entries) == 1 else None
    for entry in entries:
        if str(entry.get("version", "")) == version:
            return entry
    return None


def _stat(entry: Mapping[str, Any], phase: str, field: str) -> int:
    # A missing phase counts as zero: JSON encoders of protobuf messages drop zero fields.
    value = (entry.get("inference_stats") or {}).get(phase) or {}
    return int(value.get(field, 0) or 0)


def success_count(stats: Mapping[str, Any] | None, version: str) -> int | None:
    """The cumulative success count of ``version`` in a statistics response, None if absent."""
    entry = _model_entry(stats, version)
    return None if entry is None else _stat(entry, "success", "count")


def server_split(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, version: str
) -> ServerSplit | None:
    """The server-side split between two statistics responses for the same model.

    None when there is nothing trustworthy to report: the version is missing from either
    response, no request succeeded in between (backends such as the Ascend ``npu_ge`` one
    report no statistics at all, so callers should say "not reported", not "zero"), or a
    counter went backwards (Triton restarted or the model was reloaded in between).
    """
    old, new = _model_entry(before, str(version)), _model_entry(after, str(version))
    if old is None or new is None:
        return None

    def delta(phase: str, field: str) -> int:
        return _stat(new, phase, field) - _stat(old, phase, field)

    counts = {
        "inference_count": int(new.get("inference_count", 0) or 0)
        - int(old.get("inference_count", 0) or 0),
        "execution_count": int(new.get("execution_count", 0) or 0)
        - int(old.get("execution_count", 0) or 0),
    }
    deltas = {(p, f): delta(p, f) for p in ("success", "fail", *_PHASES) for f in ("count", "ns")}
    if any(v < 0 for v in (*deltas.values(), *counts.values())):
        return None
    success = deltas[("success", "count")]
    if success == 0:
        return None

    def avg_ms(phase: str) -> float:
        # Each phase carries its own count; it equals the success count on current Triton, but
        # dividing by the phase's own count stays right if a phase is skipped for some requests.
        count = deltas[(phase, "count")]
        return deltas[(phase, "ns")] / count / 1e6 if count else 0.0

    executions = counts["execution_count"]
    return ServerSplit(
        success=success,
        fail=deltas[("fail", "count")],
        request_ms=avg_ms("success"),
        queue_ms=avg_ms("queue"),
        compute_input_ms=avg_ms("compute_input"),
        compute_infer_ms=avg_ms("compute_infer"),
        compute_output_ms=avg_ms("compute_output"),
        inference_count=counts["inference_count"],
        execution_count=executions,
        avg_batch=counts["inference_count"] / executions if executions else None,
    )

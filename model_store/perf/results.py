"""What a sweep yields: one :class:`LevelResult` per level, the :class:`SweepResult`, and the
judgements made on them (when a level is saturated, which level is worth recommending).

Apart from the measurement (:mod:`model_store.perf.levels`) because these are plain data and
arithmetic on it: a stored sweep is read and judged without running anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from model_store.perf.plan import SweepPlan
from model_store.perf.stats import LatencySummary, ServerSplit

__all__ = ["LevelResult", "SweepResult", "best_level"]

#: Saturation: throughput gained less than this factor while p50 latency grew more than that.
_SATURATION_GAIN = 1.05
_SATURATION_LATENCY = 1.5
#: Open-loop saturation: the server completed less than this share of the offered rate, or p99
#: grew more than _SATURATION_P99 times the previous level's, and by more than the floor: the
#: p99 of a few dozen requests is nearly their maximum, which one scheduler stall on a shared
#: host moves by milliseconds, and that alone is not saturation.
_SATURATION_ACHIEVED = 0.9
_SATURATION_P99 = 2.0
_SATURATION_P99_FLOOR_MS = 5.0


@dataclass
class LevelResult:
    """One measured level. ``failed`` and ``errors`` cover the warmup too: a failure is worth
    reporting whenever it happens; successes of the warmup are not counted.

    ``throughput_rps`` is what completed per second (achieved). In open loop ``offered_rps`` is
    the scheduled rate, ``concurrency`` the most requests that were in flight at once during
    the window, ``late`` the requests sent after their time because every sender was busy
    and ``unsent`` those still unsent one step after the window (both 0 in closed loop, where
    ``offered_rps`` is None).
    """

    concurrency: int
    duration_s: float
    completed: int
    failed: int
    throughput_rps: float
    latency: LatencySummary | None
    server: ServerSplit | None
    errors: list[str] = field(default_factory=list)
    offered_rps: float | None = None
    late: int = 0
    unsent: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "offered_rps": self.offered_rps,
            "duration_s": self.duration_s,
            "completed": self.completed,
            "failed": self.failed,
            "late": self.late,
            "unsent": self.unsent,
            "throughput_rps": self.throughput_rps,
            "latency": self.latency.to_dict() if self.latency else None,
            "server": self.server.to_dict() if self.server else None,
            "errors": list(self.errors),
        }


@dataclass
class SweepResult:
    """All levels measured, in order, and why the sweep ended early (None: it did not)."""

    model: str
    version: str
    plan: SweepPlan
    levels: list[LevelResult] = field(default_factory=list)
    stopped: str | None = None  # "cancelled" | "saturated" | "time_limit" | "failures"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "version": self.version,
            "plan": self.plan.to_dict(),
            "levels": [level.to_dict() for level in self.levels],
            "stopped": self.stopped,
        }


def best_level(result: SweepResult) -> LevelResult | None:
    """The level worth recommending: the highest throughput among the levels whose p99 latency
    is at most twice the lowest p99 of the sweep (more concurrency that only buys queueing is
    not better). Ties go to the lower concurrency (open loop: the lower offered rate). None
    when no level completed a request."""
    measured = [(lv, lv.latency.p99_ms) for lv in result.levels if lv.latency and lv.completed]
    if not measured:
        return None
    floor = min(p99 for _, p99 in measured)
    eligible = [lv for lv, p99 in measured if p99 <= 2.0 * floor]
    return max(
        eligible,
        key=lambda lv: (
            lv.throughput_rps,
            -(lv.offered_rps if lv.offered_rps is not None else lv.concurrency),
        ),
    )


def _saturated(previous: LevelResult | None, current: LevelResult) -> bool:
    """Closed loop: more concurrency bought < 5 % throughput while p50 latency grew > 50 %.
    Open loop: less than 90 % of the offered rate completed (the first level too), or p99
    more than doubled since the previous level (and grew by more than 5 ms)."""
    if current.offered_rps is not None:
        if current.throughput_rps < current.offered_rps * _SATURATION_ACHIEVED:
            return True
        if previous is None or previous.latency is None or current.latency is None:
            return False
        before, now = previous.latency.p99_ms, current.latency.p99_ms
        return now > before * _SATURATION_P99 and now - before > _SATURATION_P99_FLOOR_MS
    if previous is None or previous.latency is None or current.latency is None:
        return False
    if previous.throughput_rps <= 0:
        return False
    return (
        current.throughput_rps < previous.throughput_rps * _SATURATION_GAIN
        and current.latency.p50_ms > previous.latency.p50_ms * _SATURATION_LATENCY
    )

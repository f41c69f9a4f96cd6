"""Find a better serving config: a bounded search over instances, batching and queue delay.

Trying every combination of instance count x batch size x queue delay takes longer than
anyone waits (4 x 5 x 4 = 80 trials of tens of seconds each), and most of it is spent far from
the best. The search here moves along one dimension at a time (coordinate ascent), as people
tune by hand:

1. The serving config is always trial 0, so the winner is compared with it in the same run,
   on the same machine, under the same load.
2. For each dimension in turn (instances, then batching, then queue delay), step away from
   the best config so far, upward first; keep stepping while each step improves the objective
   by more than the noise margin (:data:`MIN_GAIN`), else try the other direction once.
3. A candidate the memory estimate says would not fit is recorded as skipped, with the
   reason, and not loaded; a candidate already measured is not measured again.
4. The search stops when the time budget would be exceeded by one more trial (each trial's
   duration is estimated from the ones before it), or when it is cancelled.

Everything that touches a server is injected (``measure``, ``fits``), so the search is plain
Python that the tests drive with a synthetic model of performance.

Objectives (:class:`Objective`):

* ``throughput``: the highest completed requests per second at any measured load whose p99
  is within ``p99_ms``; a config that never meets the budget scores nothing.
* ``latency``: the lowest p99 at a fixed offered ``rate_rps``, among configs that actually
  sustain that rate (completing at least :data:`SUSTAINED` of it).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from model_store.text import Message, Said, as_json, said, say

__all__ = [
    "MIN_GAIN",
    "SUSTAINED",
    "Dimension",
    "Measurement",
    "Objective",
    "Trial",
    "TuneResult",
    "grid",
    "search",
    "standard_dimensions",
]

#: A step must improve the objective by more than this share to count (run-to-run noise on a
#: shared 2-core machine is a few per cent).
MIN_GAIN = 0.03
#: A config sustains a rate when it completes at least this share of the requests offered.
SUSTAINED = 0.95


@dataclass(frozen=True)
class Objective:
    """What "best" means. Validated on construction."""

    kind: Literal["throughput", "latency"]
    p99_ms: float | None = None
    rate_rps: float | None = None

    def __post_init__(self) -> None:
        if self.kind == "throughput":
            if self.p99_ms is None or not (0 < self.p99_ms <= 60_000):
                raise ValueError("the throughput objective needs p99_ms between 0 and 60000")
        elif self.kind == "latency":
            if self.rate_rps is None or not (0 < self.rate_rps <= 100_000):
                raise ValueError("the latency objective needs rate_rps between 0 and 100000")
        else:
            raise ValueError(f"unknown objective {self.kind!r}; use throughput or latency")

    def describe(self) -> Message:
        if self.kind == "throughput":
            return say("highest throughput with p99 <= %(p99)s ms", p99=f"{self.p99_ms:g}")
        return say("lowest p99 at %(rate)s requests/s", rate=f"{self.rate_rps:g}")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "p99_ms": self.p99_ms, "rate_rps": self.rate_rps}


@dataclass
class Measurement:
    """What one trial measured, reduced to the objective's terms.

    Attributes:
        throughput_rps: Completed requests per second at the load that scored.
        p50_ms, p99_ms: Latency at that load.
        load: The concurrency (throughput objective) or offered rate (latency) it was at.
        failed: Requests that failed during the trial (any at all disqualifies it).
        levels: Every load level measured, as the sweep engine reports them.
    """

    throughput_rps: float
    p50_ms: float | None
    p99_ms: float | None
    load: float
    failed: int = 0
    levels: list[Mapping[str, Any]] = field(default_factory=list)


def score(objective: Objective, measured: Measurement | None) -> float | None:
    """Higher is better; None when the trial does not meet the objective at all."""
    if measured is None or measured.failed or measured.p99_ms is None:
        return None
    if objective.kind == "throughput":
        assert objective.p99_ms is not None
        return measured.throughput_rps if measured.p99_ms <= objective.p99_ms else None
    assert objective.rate_rps is not None
    if measured.throughput_rps < SUSTAINED * objective.rate_rps:
        return None
    return -measured.p99_ms


def _improves(new: float | None, old: float | None) -> bool:
    """Better by more than the noise margin (scores may be negative: -p99)."""
    if new is None:
        return False
    if old is None:
        return True
    return new > old + MIN_GAIN * abs(old)


@dataclass(frozen=True)
class Dimension:
    """One knob: its name for people and its values, each a set of option changes, in order
    from the smallest to the largest setting."""

    name: str
    values: tuple[Mapping[str, Any], ...]
    #: Only searched when this holds for the best options so far (e.g. queue delay only
    #: matters with the dynamic batcher on).
    applies: Callable[[Mapping[str, Any]], bool] = lambda options: True

    def index_of(self, options: Mapping[str, Any]) -> int | None:
        """The value ``options`` already has, if it is one of ours."""
        for i, value in enumerate(self.values):
            if all(options.get(k) == v for k, v in value.items()):
                return i
        return None


def standard_dimensions(
    options: Mapping[str, Any],
    *,
    option_names: Sequence[str],
    max_instances: int = 4,
    batch_sizes: Sequence[int] = (4, 8, 16, 32),
    queue_delays_us: Sequence[int] = (0, 100, 500, 2000),
    device_sets: Sequence[str] = (),
) -> list[Dimension]:
    """The knobs a target offers, from its option names and the serving options.

    ``device_sets`` are the values of the target's device option worth trying (``"0"``,
    ``"1"``, ``"0,1"`` ...: the NPUs of the host the trials run on); with fewer than two there
    is nothing to choose. Batching is searched only when the model batches at all
    (``max_batch_size`` > 0 in the serving options): a model whose first axis is not a batch
    axis cannot be batched by Triton, whatever the config says.
    """
    names = set(option_names)
    dims: list[Dimension] = []
    if "instance_count" in names:
        counts = sorted({1, 2, 3, 4, 6, 8} & set(range(1, max_instances + 1)))
        dims.append(Dimension("instances", tuple({"instance_count": n} for n in counts)))
    batches = (options.get("max_batch_size") or 0) > 0 and "max_batch_size" in names
    if batches and "dynamic_batching" in names:
        # Off keeps the serving max_batch_size: clients may still send batches themselves.
        off: dict[str, Any] = {
            "dynamic_batching": False,
            "max_batch_size": options["max_batch_size"],
        }
        values: list[Mapping[str, Any]] = [off]
        for size in batch_sizes:
            value: dict[str, Any] = {"dynamic_batching": True, "max_batch_size": size}
            if "preferred_batch_sizes" in names:
                value["preferred_batch_sizes"] = []
            values.append(value)
        dims.append(Dimension("batching", tuple(values)))
    device_option = next((o for o in ("device_ids", "device_id") if o in names), None)
    if device_option and len(device_sets) > 1:
        dims.append(Dimension("devices", tuple({device_option: d} for d in device_sets)))
    if "max_queue_delay_us" in names and "dynamic_batching" in names:
        dims.append(
            Dimension(
                "queue delay",
                tuple({"max_queue_delay_us": d} for d in queue_delays_us),
                applies=lambda o: bool(o.get("dynamic_batching")),
            )
        )
    return dims


@dataclass
class Trial:
    """One config tried (or skipped), in the order tried."""

    index: int
    changes: dict[str, Any]
    label: Said
    state: Literal["measured", "skipped", "failed"]
    reason: Said = ""
    measured: Measurement | None = None
    score: float | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        m = self.measured
        return as_json({
            "index": self.index,
            "changes": self.changes,
            "label": self.label,
            "state": self.state,
            "reason": self.reason,
            "score": self.score,
            "seconds": round(self.seconds, 2),
            "throughput_rps": m.throughput_rps if m else None,
            "p50_ms": m.p50_ms if m else None,
            "p99_ms": m.p99_ms if m else None,
            "load": m.load if m else None,
            "failed": m.failed if m else None,
            "levels": m.levels if m else [],
        })  # fmt: skip


@dataclass
class TuneResult:
    objective: Objective
    trials: list[Trial] = field(default_factory=list)
    best: int | None = None  # index of the best trial, if any met the objective
    stopped: str | None = None  # "budget" | "cancelled" | None (searched every dimension)

    def to_dict(self) -> dict[str, Any]:
        return {
            "objective": self.objective.to_dict(),
            "trials": [t.to_dict() for t in self.trials],
            "best": self.best,
            "stopped": self.stopped,
        }


def _label(changes: Mapping[str, Any]) -> Said:
    if not changes:
        return say("serving config")
    parts = []
    for key, value in changes.items():
        if key == "preferred_batch_sizes" and not value:
            continue
        parts.append(f"{key}={value}")
    return ", ".join(parts)


def _key(options: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, repr(v)) for k, v in options.items()))


class _Trials:
    """Runs trials for a strategy: measures each config once, records it, keeps the clock."""

    def __init__(
        self,
        objective: Objective,
        serving: Mapping[str, Any],
        *,
        measure: Callable[[dict[str, Any]], Measurement],
        fits: Callable[[dict[str, Any]], str | None],
        budget_s: float,
        is_cancelled: Callable[[], bool],
        on_trial: Callable[[Trial], None],
        clock: Callable[[], float],
    ) -> None:
        self.objective, self.serving = objective, serving
        self.measure, self.fits, self.on_trial = measure, fits, on_trial
        self.budget_s, self.is_cancelled, self.clock = budget_s, is_cancelled, clock
        self.result = TuneResult(objective)
        self.started = clock()
        self.tried: dict[tuple[tuple[str, str], ...], Trial] = {}
        self.durations: list[float] = []

    def attempt(self, changes: Mapping[str, Any]) -> Trial | None:
        """Measure ``changes`` (relative to serving) unless tried already; None: stop."""
        options = {**self.serving, **changes}
        known = self.tried.get(_key(options))
        if known is not None:
            return known
        if self.is_cancelled():
            self.result.stopped = "cancelled"
            return None
        # One more trial must fit in what is left (estimated from the slowest so far).
        left = self.budget_s - (self.clock() - self.started)
        if self.durations and left < max(self.durations):
            self.result.stopped = "budget"
            return None
        effective = {k: v for k, v in changes.items() if self.serving.get(k) != v}
        trial = Trial(len(self.result.trials), effective, _label(effective), "measured")
        reason = self.fits(options)
        if reason:
            trial.state, trial.reason = "skipped", reason
        else:
            begin = self.clock()
            try:
                trial.measured = self.measure(dict(effective))
                trial.score = score(self.objective, trial.measured)
                if trial.score is None:
                    trial.reason = _why_not(self.objective, trial.measured)
            except Exception as exc:
                trial.state, trial.reason = "failed", said(exc)
            trial.seconds = self.clock() - begin
            self.durations.append(trial.seconds)
        self.tried[_key(options)] = trial
        self.result.trials.append(trial)
        self.on_trial(trial)
        return trial


def search(
    objective: Objective,
    serving: Mapping[str, Any],
    dimensions: Sequence[Dimension],
    *,
    measure: Callable[[dict[str, Any]], Measurement],
    fits: Callable[[dict[str, Any]], str | None] = lambda options: None,
    budget_s: float,
    is_cancelled: Callable[[], bool] = lambda: False,
    on_trial: Callable[[Trial], None] = lambda trial: None,
    clock: Callable[[], float] = time.monotonic,
) -> TuneResult:
    """Search from the ``serving`` options; see the module docstring.

    ``measure(changes)`` loads the serving options with ``changes`` applied under a temporary
    name, measures it and returns the measurement (raising ``Exception`` when it cannot; the
    trial is then recorded as failed and the search goes on). ``fits(options)`` returns why
    the options would not fit in memory, or None.
    """
    trials = _Trials(objective, serving, measure=measure, fits=fits, budget_s=budget_s,
                     is_cancelled=is_cancelled, on_trial=on_trial, clock=clock)  # fmt: skip
    base = trials.attempt({})
    if base is None:
        return trials.result
    best_changes: dict[str, Any] = {}
    best = base
    for dim in dimensions:
        current = {**serving, **best_changes}
        if not dim.applies(current):
            continue
        at = dim.index_of(current)
        for direction in (1, -1):
            if at is None:
                # Not on the grid: start from its smallest value upward only.
                steps = range(len(dim.values))
            else:
                steps = range(at + direction, len(dim.values) if direction > 0 else -1, direction)
            moved = False
            for j in steps:
                candidate = {**best_changes, **dim.values[j]}
                trial = trials.attempt(candidate)
                if trial is None:
                    return _finish(trials.result)
                if _improves(trial.score, best.score):
                    best, best_changes, moved = trial, candidate, True
                elif trial.state == "measured" or at is not None:
                    break  # worse, or equal within noise: no point going further this way
            if moved or at is None:
                break
    return _finish(trials.result)


def grid(
    objective: Objective,
    serving: Mapping[str, Any],
    dimensions: Sequence[Dimension],
    *,
    measure: Callable[[dict[str, Any]], Measurement],
    fits: Callable[[dict[str, Any]], str | None] = lambda options: None,
    budget_s: float,
    is_cancelled: Callable[[], bool] = lambda: False,
    on_trial: Callable[[Trial], None] = lambda trial: None,
    clock: Callable[[], float] = time.monotonic,
) -> TuneResult:
    """Try every combination of ``dimensions`` (the serving config first), as far as the
    budget goes: the reference the search is measured against. A knob that does not apply
    to a combination (queue delay without the batcher) is left at its serving value, so such
    combinations are tried once."""
    trials = _Trials(objective, serving, measure=measure, fits=fits, budget_s=budget_s,
                     is_cancelled=is_cancelled, on_trial=on_trial, clock=clock)  # fmt: skip
    if trials.attempt({}) is None:
        return trials.result
    for combo in itertools.product(*(d.values for d in dimensions)):
        changes: dict[str, Any] = {}
        for dim, value in zip(dimensions, combo, strict=True):
            if dim.applies({**serving, **changes, **value}):
                changes.update(value)
        if trials.attempt(changes) is None:
            break
    return _finish(trials.result)


def _why_not(objective: Objective, measured: Measurement) -> Said:
    if measured.failed:
        return say("%(count)s request(s) failed", count=measured.failed)
    if measured.p99_ms is None:
        return say("no request completed")
    if objective.kind == "throughput":
        return say(
            "p99 %(p99)s ms over the %(budget)s ms budget at every load",
            p99=f"{measured.p99_ms:.1f}", budget=f"{objective.p99_ms:g}",
        )  # fmt: skip
    return say(
        "completed %(rps)s of the %(rate)s requests/s asked",
        rps=f"{measured.throughput_rps:.1f}", rate=f"{objective.rate_rps:g}",
    )  # fmt: skip


def _finish(result: TuneResult) -> TuneResult:
    scored = [t for t in result.trials if t.score is not None]
    if scored:
        top = max(t.score for t in scored if t.score is not None)
        # Ties within noise go to the earlier trial: the serving config wins a draw.
        result.best = next(
            t.index for t in scored if t.score is not None and not _improves(top, t.score)
        )
    return result


def pick_load(objective: Objective, levels: Sequence[Mapping[str, Any]]) -> Measurement | None:
    """The level of a sweep that stands for the trial: for throughput, the fastest level
    within the p99 budget (else the lowest-p99 level, which then fails the budget); for
    latency, the one level measured. ``levels`` are ``LevelResult.to_dict()`` rows."""
    rows = [lv for lv in levels if (lv.get("latency") or {}).get("p99_ms") is not None]
    failed = sum(int(lv.get("failed") or 0) for lv in levels)
    if not rows:
        return Measurement(0.0, None, None, 0.0, failed, list(levels))

    def measurement(row: Mapping[str, Any]) -> Measurement:
        latency = row["latency"]
        load = row.get("offered_rps") or row.get("concurrency") or 0
        return Measurement(
            float(row["throughput_rps"]), latency.get("p50_ms"), latency["p99_ms"],
            float(load), failed, list(levels),
        )  # fmt: skip

    if objective.kind == "latency":
        return measurement(rows[-1])
    assert objective.p99_ms is not None
    within = [r for r in rows if r["latency"]["p99_ms"] <= objective.p99_ms]
    if within:
        return measurement(max(within, key=lambda r: r["throughput_rps"]))
    return measurement(min(rows, key=lambda r: r["latency"]["p99_ms"]))


def grid_size(dimensions: Sequence[Dimension]) -> int:
    """How many configs trying everything would take (for the page and the bench)."""
    return math.prod(len(d.values) for d in dimensions) if dimensions else 1

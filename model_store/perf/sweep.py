"""Drive one model version at increasing load and measure each level.

Two modes, as ``perf_analyzer`` has them:

* closed loop (``SweepPlan(levels=...)``, the default): for each concurrency level ``c``,
  ``c`` threads send requests back to back (like ``--concurrency-range``);
* open loop (``SweepPlan(rates=...)``): for each rate ``r``, request ``i`` of the window is
  *scheduled* at ``t0 + i / r`` whatever the server does (like ``--request-rate-range`` with
  the constant distribution). A pool of sender threads, grown on demand up to
  ``max_in_flight``, sends each request at its time; when every sender is busy at a request's
  time it is sent as soon as one frees up and counted as ``late``, never dropped. Latency is
  measured from the scheduled time, not the actual send, so the time a request waited in the
  client because the server fell behind counts: measuring from the send would hide exactly the
  slow periods (coordinated omission). Requests still unsent one ``step_seconds`` after the
  window ends are counted as ``unsent`` rather than waited for (the level is then saturated).
  :func:`measure_rate` measures one rate, for a tuner.

A level has two phases:

1. warmup (``warmup_seconds``): requests are sent but their successes are not counted, so
   connection set-up and cold caches do not skew the numbers;
2. measurement (``step_seconds``): every thread waits at a barrier first, so no request is in
   flight when Triton's statistics are read; the window then runs until the deadline and each
   thread finishes the request it has started. Statistics are read again once every thread
   has stopped, so the server-side success delta covers exactly the measured requests.

In open loop the warmup runs on the same schedule; then the senders finish what is in flight
(the schedule pauses), statistics are read and the measured schedule starts afresh, so the
statistics window again holds exactly the measured requests, and the senders the warmup needed
are already running (and connected) when the window starts.

Cancellation, the failure limit and the overall time limit are checked by the calling thread
while the workers run; workers only look at an Event between requests, so a stop takes effect
within one request. Every thread started is joined before :func:`run_sweep` returns or
raises.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from model_store.perf.stats import LatencySummary, ServerSplit, server_split, success_count
from model_store.runtime.client import Protocol, TritonRuntime
from model_store.runtime.errors import TritonRequestError, TritonUnavailable

__all__ = ["LevelResult", "SweepPlan", "SweepResult", "best_level", "measure_rate", "run_sweep"]

MAX_CONCURRENCY = 64
#: The highest open-loop rate a plan accepts, in requests per second.
MAX_RATE = 10_000.0
DEFAULT_LEVELS = (1, 2, 4, 8)
#: How often the calling thread polls ``is_cancelled``: often enough for a prompt cancel,
#: rarely enough that a database-backed check stays cheap.
_POLL_SECONDS = 0.05
#: Triton updates its statistics just after sending a response, so a read right after the
#: last response can miss it; we wait this long at most for the counts to catch up.
_SETTLE_SECONDS = 1.0
_MAX_ERRORS_KEPT = 5
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

StatsReader = Callable[[], Mapping[str, Any] | None]


def _never() -> bool:
    return False


def _ignore(level: LevelResult, fraction_done: float) -> None:
    return None


def _noop() -> None:
    return None


@dataclass(frozen=True)
class SweepPlan:
    """What to measure. Validated on construction; every field has a sane default.

    ``levels`` (concurrencies, closed loop) drive the plan unless ``rates`` (requests per
    second, open loop) are given; then ``levels`` must be left alone and becomes ``()``.
    ``max_in_flight`` bounds the open loop's sender threads, hence its requests in flight; the
    closed loop ignores it (its concurrency is the bound).
    """

    levels: tuple[int, ...] = DEFAULT_LEVELS
    step_seconds: float = 3.0
    warmup_seconds: float = 0.5
    request_timeout: float = 10.0
    max_total_seconds: float = 120.0
    max_failures_per_level: int = 50
    stop_on_saturation: bool = True
    rates: tuple[float, ...] | None = None
    max_in_flight: int = MAX_CONCURRENCY

    def __post_init__(self) -> None:
        levels = tuple(self.levels)
        object.__setattr__(self, "levels", levels)  # accept a list, keep the plan hashable
        if self.rates is not None:
            self._check_rates(levels)
        elif (
            not levels
            or any(type(c) is not int or not 1 <= c <= MAX_CONCURRENCY for c in levels)
            or any(a >= b for a, b in pairwise(levels))
        ):
            raise ValueError(
                f"levels must be ascending, distinct concurrencies within 1..{MAX_CONCURRENCY}; "
                f"got {levels!r}"
            )
        if type(self.max_in_flight) is not int or not 1 <= self.max_in_flight <= MAX_CONCURRENCY:
            raise ValueError(f"max_in_flight must be an integer within 1..{MAX_CONCURRENCY}")
        _check_range("step_seconds", self.step_seconds, 0.0, 600.0, low_inclusive=False)
        _check_range("warmup_seconds", self.warmup_seconds, 0.0, 60.0)
        _check_range("request_timeout", self.request_timeout, 0.0, 600.0, low_inclusive=False)
        _check_range("max_total_seconds", self.max_total_seconds, 0.0, 3600.0, low_inclusive=False)
        if type(self.max_failures_per_level) is not int or self.max_failures_per_level < 0:
            raise ValueError("max_failures_per_level must be an integer >= 0")
        if self.estimated_seconds > self.max_total_seconds:
            raise ValueError(
                f"this plan needs about {self.estimated_seconds:g} s ({len(self.points)} levels x "
                f"({self.warmup_seconds:g} s warmup + {self.step_seconds:g} s measurement)), "
                f"more than max_total_seconds={self.max_total_seconds:g}; "
                "use fewer levels or shorter steps"
            )

    def _check_rates(self, levels: tuple[int, ...]) -> None:
        if levels not in ((), DEFAULT_LEVELS):
            raise ValueError("give levels (closed loop) or rates (open loop), not both")
        raw = tuple(self.rates or ())
        if not raw or any(
            isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r <= MAX_RATE
            for r in raw
        ):
            raise ValueError(
                f"rates must be requests per second within (0, {MAX_RATE:g}]; got {raw!r}"
            )
        rates = tuple(float(r) for r in raw)
        if any(a >= b for a, b in pairwise(rates)):
            raise ValueError(f"rates must be ascending and distinct; got {raw!r}")
        object.__setattr__(self, "levels", ())
        object.__setattr__(self, "rates", rates)

    @property
    def mode(self) -> str:
        """``"rate"`` (open loop) or ``"concurrency"`` (closed loop)."""
        return "concurrency" if self.rates is None else "rate"

    @property
    def points(self) -> tuple[float, ...]:
        """What each level is driven at: the rates in open loop, else the concurrencies."""
        return self.levels if self.rates is None else self.rates

    @property
    def estimated_seconds(self) -> float:
        """Nominal duration: warmup plus measurement for every level (overheads excluded; an
        open-loop level the server cannot keep up with may take up to one more step to
        send what is late)."""
        return len(self.points) * (self.warmup_seconds + self.step_seconds)

    @classmethod
    def doubling(cls, max_concurrency: int, **options: Any) -> SweepPlan:
        """Levels 1, 2, 4, ... up to ``max_concurrency``, which is included even if it is not
        a power of two (``doubling(6)`` → 1, 2, 4, 6). Other fields as keyword arguments."""
        if type(max_concurrency) is not int or not 1 <= max_concurrency <= MAX_CONCURRENCY:
            raise ValueError(f"max_concurrency must be within 1..{MAX_CONCURRENCY}")
        levels = [1 << i for i in range(max_concurrency.bit_length()) if 1 << i < max_concurrency]
        return cls(levels=(*levels, max_concurrency), **options)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["levels"] = list(self.levels)
        data["rates"] = None if self.rates is None else list(self.rates)
        data["mode"] = self.mode
        return data


def _check_range(
    name: str, value: float, low: float, high: float, *, low_inclusive: bool = True
) -> None:
    ok = math.isfinite(value) and (value >= low if low_inclusive else value > low)
    if not ok or value > high:
        bound = "[" if low_inclusive else "("
        raise ValueError(f"{name} must be within {bound}{low:g}, {high:g}], got {value!r}")


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


class _ServerStats:
    """Reads Triton's statistics for one version, waiting for them to settle when asked."""

    def __init__(self, read: StatsReader, version: str) -> None:
        self._read = read
        self._version = version
        self._reporting = True

    def read(
        self, since: Mapping[str, Any] | None = None, successes: int = 0
    ) -> Mapping[str, Any] | None:
        """Statistics once Triton counts ``successes`` more successes than in ``since``."""
        stats = self._read()
        base = success_count(since, self._version)
        if base is None or successes <= 0 or not self._reporting:
            return stats
        deadline = time.monotonic() + _SETTLE_SECONDS
        while (count := success_count(stats, self._version)) is None or count < base + successes:
            if time.monotonic() >= deadline:
                # Nothing moved at all: the backend reports no statistics (npu_ge), so do not
                # wait for them again at the following levels.
                self._reporting = count != base
                break
            time.sleep(0.01)
            stats = self._read()
        return stats


class _Level:
    """The shared state of one level's worker threads."""

    def __init__(
        self,
        concurrency: int,
        plan: SweepPlan,
        infer: Callable[[], object],
        release: Callable[[], None],
    ) -> None:
        self.plan = plan
        self.infer = infer
        self.release = release
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.go = threading.Event()
        self.barrier = threading.Barrier(concurrency + 1)  # the workers and the calling thread
        self.warmup_end = 0.0
        self.deadline = math.inf
        self.last_finish = 0.0
        self.latencies: list[float] = []
        self.warm_successes = 0
        self.failed = 0
        self.errors: list[str] = []
        self.crash: BaseException | None = None

    def work(self) -> None:
        try:
            while not self.stop.is_set() and time.perf_counter() < self.warmup_end:
                self._one(measured=False)
            self.barrier.wait()
            self.go.wait()
            while not self.stop.is_set() and time.perf_counter() < self.deadline:
                self._one(measured=True)
        except threading.BrokenBarrierError:
            pass  # the calling thread abandoned the level (cancel or error)
        except BaseException as exc:  # handed to the calling thread, which re-raises it
            with self.lock:
                self.crash = self.crash or exc
            self.stop.set()
            self.barrier.abort()  # never leave the calling thread waiting for us
        finally:
            with self.lock:
                self.last_finish = max(self.last_finish, time.perf_counter())
            self.release()

    def _one(self, measured: bool) -> None:
        started = time.perf_counter()
        try:
            self.infer()
        except (TritonRequestError, TritonUnavailable) as exc:
            with self.lock:
                self.failed += 1
                message = str(exc)
                if message not in self.errors and len(self.errors) < _MAX_ERRORS_KEPT:
                    self.errors.append(message)
                if self.failed > self.plan.max_failures_per_level:
                    self.stop.set()  # the level is lost; stop hammering a failing server
            return
        elapsed = time.perf_counter() - started
        with self.lock:
            if measured:
                self.latencies.append(elapsed)
            else:
                self.warm_successes += 1


def _wait_until(until: float, stop: threading.Event, is_cancelled: Callable[[], bool]) -> bool:
    """Sleep until ``until`` (perf_counter) or ``stop``; False if cancelled meanwhile."""
    while not is_cancelled():
        remaining = until - time.perf_counter()
        if remaining <= 0 or stop.is_set():
            return True
        stop.wait(min(_POLL_SECONDS, remaining))
    return False


def _run_level(
    concurrency: int,
    plan: SweepPlan,
    version: str,
    stats: _ServerStats,
    infer: Callable[[], object],
    release: Callable[[], None],
    is_cancelled: Callable[[], bool],
) -> LevelResult | None:
    """Measure one level; None when cancelled (a cut-short level is not a measurement)."""
    level = _Level(concurrency, plan, infer, release)
    # Daemon threads: they are always joined, but a request hung past its timeout must not
    # also keep the interpreter from exiting.
    threads = [
        threading.Thread(target=level.work, name=f"perf-sweep-{concurrency}-{i}", daemon=True)
        for i in range(concurrency)
    ]
    baseline = stats.read()
    level.warmup_end = time.perf_counter() + plan.warmup_seconds
    try:
        for thread in threads:
            thread.start()
        if not _wait_until(level.warmup_end, level.stop, is_cancelled):
            return None
        level.barrier.wait()  # every worker is idle: nothing in flight while we read
        before = stats.read(baseline, level.warm_successes)
        started = time.perf_counter()
        level.deadline = started + plan.step_seconds
        level.go.set()
        if not _wait_until(level.deadline, level.stop, is_cancelled):
            return None
    finally:
        # Also reached when a worker crashed and broke the barrier: its exception replaces
        # the BrokenBarrierError, once every thread is joined.
        level.stop.set()
        level.barrier.abort()
        level.go.set()
        for thread in threads:
            thread.join()
        if level.crash is not None:
            raise level.crash
    completed = len(level.latencies)
    after = stats.read(before, completed)
    duration = max(level.last_finish - started, 1e-9)
    return LevelResult(
        concurrency=concurrency,
        duration_s=duration,
        completed=completed,
        failed=level.failed,
        throughput_rps=completed / duration,
        latency=LatencySummary.from_seconds(level.latencies) if completed else None,
        server=server_split(before, after, version),
        errors=list(level.errors),
    )


class _RateLevel:
    """The shared state of one open-loop level: a pool of sender threads and the schedule.

    The schedule is a phase (warmup or measurement) of ``count`` requests, request ``i`` due at
    ``t0 + i / rate``. One idle sender, the leader, sleeps until the next request's time and
    takes it, handing the lead to one other idle sender (the rest wait on ``follow``, so a
    tick wakes one thread, not the whole pool); a sender back from a request takes a due
    request at once. Taking the last idle one starts another sender (up to
    ``max_in_flight``), so one is normally waiting when the next request is due. The pool
    persists from the warmup to the measurement. All fields are guarded by ``lock``, which
    ``cond`` (the leader, the calling thread) and ``follow`` (the other idle senders) share.
    """

    def __init__(
        self,
        rate: float,
        plan: SweepPlan,
        infer: Callable[[], object],
        release: Callable[[], None],
    ) -> None:
        self.rate = rate
        self.plan = plan
        self.infer = infer
        self.release = release
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.follow = threading.Condition(self.lock)
        self.leader: int | None = None
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        #: When each idle sender became idle (by thread id): a request is late only when no
        #: sender was idle at its time, not when a sender merely woke a little after it.
        self.waiting: dict[int, float] = {}
        self.busy = 0
        self.peak_busy = 0
        self.active = False
        self.measured = False
        self.t0 = 0.0
        self.count = 0
        self.next = 0
        self.drain_until = math.inf
        self.late = 0
        self.unsent = 0
        self.last_finish = 0.0
        self.latencies: list[float] = []
        self.warm_successes = 0
        self.failed = 0
        self.errors: list[str] = []
        self.crash: BaseException | None = None

    def spawn(self) -> None:
        """Start one more sender (``cond`` held by the caller or no sender running yet)."""
        thread = threading.Thread(
            target=self.work, name=f"perf-rate-{self.rate:g}-{len(self.threads)}", daemon=True
        )
        self.threads.append(thread)
        thread.start()

    def begin(self, seconds: float, *, measured: bool) -> float:
        """Start a phase of ``seconds`` now; returns its t0. Requests of the measurement still
        unsent one more step after its end are counted as unsent; the warmup's are skipped."""
        with self.cond:
            self.t0 = time.perf_counter()
            self.count = max(1, math.ceil(self.rate * seconds - 1e-9))
            self.next = 0
            self.measured = measured
            self.drain_until = self.t0 + seconds + (self.plan.step_seconds if measured else 0.0)
            self.last_finish = self.t0
            self.peak_busy = 0
            self.active = True
            self._wake_all()
            return self.t0

    def wait_done(self, is_cancelled: Callable[[], bool]) -> bool:
        """Wait until every request of the phase was sent and answered (or the level stopped);
        False if cancelled meanwhile. The phase is then paused: nothing is in flight."""
        with self.cond:
            while not self.stop.is_set() and (
                not self.active or self.next < self.count or self.busy
            ):
                if is_cancelled():
                    return False
                self.cond.wait(_POLL_SECONDS)
            self.active = False
            return True

    def wait_idle(self, is_cancelled: Callable[[], bool]) -> bool:
        """Wait until every sender started is idle; False if cancelled meanwhile."""
        with self.cond:
            while not self.stop.is_set() and len(self.waiting) < len(self.threads):
                if is_cancelled():
                    return False
                self.cond.wait(_POLL_SECONDS)
            return True

    def _wake_all(self) -> None:
        """Wake every waiting thread (``lock`` held): the phase changed or the level stops."""
        self.cond.notify_all()
        self.follow.notify_all()

    def close(self) -> None:
        with self.cond:
            self.stop.set()  # under the lock: no sender can start another after this
            self._wake_all()
        for thread in self.threads:
            thread.join()

    def work(self) -> None:
        me = threading.get_ident()
        try:
            while True:
                with self.cond:
                    self.waiting[me] = time.perf_counter()
                    self.cond.notify_all()  # wait_idle may be waiting for us
                    ticket = self._take()
                    del self.waiting[me]
                    if ticket is None:
                        return
                    self.busy += 1
                    if self.measured:
                        self.peak_busy = max(self.peak_busy, self.busy)
                    if not self.waiting and len(self.threads) < self.plan.max_in_flight:
                        self.spawn()
                due, measured = ticket
                try:
                    self._one(due, measured)
                finally:
                    with self.cond:
                        self.busy -= 1
                        self.last_finish = max(self.last_finish, time.perf_counter())
                        self.cond.notify_all()
        except BaseException as exc:  # handed to the calling thread, which re-raises it
            with self.cond:
                self.crash = self.crash or exc
                self.stop.set()
                self._wake_all()
        finally:
            self.release()

    def _take(self) -> tuple[float, bool] | None:
        """The next request's scheduled time once it is due (``lock`` held); None to stop."""
        me = threading.get_ident()
        try:
            while not self.stop.is_set():
                if not self.active or self.next >= self.count:
                    self.follow.wait()  # begin() and close() wake everyone
                    continue
                due = self.t0 + self.next / self.rate
                now = time.perf_counter()
                if now < due:
                    if self.leader is None:
                        self.leader = me
                    if self.leader == me:
                        self.cond.wait(due - now)
                    else:
                        self.follow.wait()
                    continue
                if now > self.drain_until:
                    if self.measured:
                        self.unsent += self.count - self.next
                    self.next = self.count
                    self.cond.notify_all()  # the calling thread waits for the phase's end
                    continue
                self.next += 1
                if self.measured and min(self.waiting.values()) > due:
                    self.late += 1  # every sender was busy at its time
                if self.next < self.count and self.t0 + self.next / self.rate <= now:
                    self.follow.notify_all()  # behind schedule: every idle sender to work
                return due, self.measured
            return None
        finally:
            if self.leader == me:  # hand the lead to one idle sender, if any
                self.leader = None
                self.follow.notify()

    def _one(self, due: float, measured: bool) -> None:
        try:
            self.infer()
        except (TritonRequestError, TritonUnavailable) as exc:
            with self.cond:
                self.failed += 1
                message = str(exc)
                if message not in self.errors and len(self.errors) < _MAX_ERRORS_KEPT:
                    self.errors.append(message)
                if self.failed > self.plan.max_failures_per_level:
                    self.stop.set()  # the level is lost; stop hammering a failing server
                    self._wake_all()
            return
        # From the scheduled time, not the send: a wait for a free sender is part of what a
        # client at this rate would see (coordinated omission otherwise hides it).
        elapsed = time.perf_counter() - due
        with self.cond:
            if measured:
                self.latencies.append(elapsed)
            else:
                self.warm_successes += 1


def _run_rate_level(
    rate: float,
    plan: SweepPlan,
    version: str,
    stats: _ServerStats,
    infer: Callable[[], object],
    release: Callable[[], None],
    is_cancelled: Callable[[], bool],
) -> LevelResult | None:
    """Measure one open-loop level; None when cancelled."""
    level = _RateLevel(rate, plan, infer, release)
    baseline = stats.read()
    try:
        with level.cond:
            level.spawn()
        if not level.wait_idle(is_cancelled):
            return None
        if plan.warmup_seconds > 0:
            level.begin(plan.warmup_seconds, measured=False)
            if not level.wait_done(is_cancelled):
                return None
        before = stats.read(baseline, level.warm_successes)
        started = level.begin(plan.step_seconds, measured=True)
        if not level.wait_done(is_cancelled):
            return None
        stopped_early = level.stop.is_set()
    finally:
        level.close()
        if level.crash is not None:
            raise level.crash
    completed = len(level.latencies)
    after = stats.read(before, completed)
    # At least the window: a rate kept up with completes its requests within it, and its
    # achieved rate then reads as the offered one rather than a little more.
    window_end = started if stopped_early else started + plan.step_seconds
    end = max(level.last_finish, window_end)
    duration = max(end - started, 1e-9)
    return LevelResult(
        concurrency=level.peak_busy,
        duration_s=duration,
        completed=completed,
        failed=level.failed,
        throughput_rps=completed / duration,
        latency=LatencySummary.from_seconds(level.latencies) if completed else None,
        server=server_split(before, after, version),
        errors=list(level.errors),
        offered_rps=rate,
        late=level.late,
        unsent=level.unsent,
    )


def _sweep(
    model: str,
    version: str,
    plan: SweepPlan,
    *,
    infer: Callable[[], object],
    read_stats: StatsReader,
    release: Callable[[], None] = _noop,
    is_cancelled: Callable[[], bool] = _never,
    on_level: Callable[[LevelResult, float], None] = _ignore,
) -> SweepResult:
    """The sweep loop, independent of Triton: ``infer`` sends one request (raising
    ``TritonRequestError``/``TritonUnavailable`` on failure), ``read_stats`` returns a
    statistics response or None, ``release`` runs in each worker thread as it ends."""
    result = SweepResult(model=model, version=version, plan=plan)
    stats = _ServerStats(read_stats, version)
    sweep_start = time.monotonic()
    points = plan.points
    for index, point in enumerate(points):
        if is_cancelled():
            result.stopped = "cancelled"
            break
        elapsed = time.monotonic() - sweep_start
        if elapsed + plan.warmup_seconds + plan.step_seconds > plan.max_total_seconds:
            result.stopped = "time_limit"
            break
        if plan.rates is None:
            level = _run_level(int(point), plan, version, stats, infer, release, is_cancelled)
        else:
            level = _run_rate_level(point, plan, version, stats, infer, release, is_cancelled)
        if level is None:
            result.stopped = "cancelled"
            break
        result.levels.append(level)
        on_level(level, (index + 1) / len(points))
        if level.failed > plan.max_failures_per_level:
            result.stopped = "failures"
            break
        previous = result.levels[-2] if len(result.levels) > 1 else None
        saturated = _saturated(previous, level)
        if plan.stop_on_saturation and saturated:
            result.stopped = "saturated"
            break
    return result


class _ThreadRuntimes:
    """A private ``TritonRuntime`` per worker thread, built from the caller's addresses.

    Private because ``TritonRuntime`` fixes its request timeout at construction and the plan
    has its own; per thread so that each worker has its own connection (as perf_analyzer's
    workers do) and can close it itself when it ends.
    """

    def __init__(self, runtime: TritonRuntime, timeout: float) -> None:
        self._runtime = runtime
        self._timeout = timeout
        self._local = threading.local()

    def get(self) -> TritonRuntime:
        runtime: TritonRuntime | None = getattr(self._local, "runtime", None)
        if runtime is None:
            runtime = self._local.runtime = TritonRuntime(
                self._runtime.http_url,
                self._runtime.grpc_url,
                timeout=self._timeout,
                connection_timeout=self._runtime.connection_timeout,
            )
        return runtime

    def release(self) -> None:
        runtime: TritonRuntime | None = getattr(self._local, "runtime", None)
        self._local.runtime = None
        if runtime is not None:
            runtime.close()


def run_sweep(
    runtime: TritonRuntime,
    model: str,
    version: int | str,
    inputs: dict[str, np.ndarray],
    plan: SweepPlan,
    *,
    protocol: str = "grpc",
    is_cancelled: Callable[[], bool] = _never,
    on_level: Callable[[LevelResult, float], None] = _ignore,
) -> SweepResult:
    """Sweep ``model`` ``version`` with ``inputs`` (one request's tensors) following ``plan``.

    ``protocol="grpc"`` falls back to HTTP when the runtime has no gRPC address.
    ``is_cancelled`` is polled from the calling thread only (every 50 ms), so it may use
    thread-bound resources such as a database connection. ``on_level(level, fraction_done)``
    runs after each measured level, ``fraction_done`` being measured levels / planned levels.
    """
    if protocol not in ("grpc", "http"):
        raise ValueError(f"unknown protocol {protocol!r}; use 'grpc' or 'http'")
    chosen: Protocol = "grpc" if protocol == "grpc" and runtime.grpc_url else "http"
    version = str(version)
    clients = _ThreadRuntimes(runtime, plan.request_timeout)

    def infer() -> object:
        return clients.get().infer(model, inputs, version=version, protocol=chosen)

    def read_stats() -> Mapping[str, Any] | None:
        try:
            return runtime.statistics(model, version)
        except (TritonUnavailable, TritonRequestError):
            return None  # no split for this level, but the client-side numbers still stand

    return _sweep(
        model,
        version,
        plan,
        infer=infer,
        read_stats=read_stats,
        release=clients.release,
        is_cancelled=is_cancelled,
        on_level=on_level,
    )


def measure_rate(
    runtime: TritonRuntime,
    model: str,
    version: int | str,
    inputs: dict[str, np.ndarray],
    rate_rps: float,
    *,
    seconds: float = 3.0,
    warmup_seconds: float = 0.5,
    max_in_flight: int = MAX_CONCURRENCY,
    request_timeout: float = 10.0,
    max_failures: int = 50,
    protocol: str = "grpc",
    is_cancelled: Callable[[], bool] = _never,
) -> LevelResult | None:
    """One open-loop level at ``rate_rps`` (what a tuner asks: "what p99 at this rate?").

    None when cancelled. Raises ValueError for arguments a :class:`SweepPlan` refuses.
    """
    plan = SweepPlan(
        rates=(rate_rps,),
        step_seconds=seconds,
        warmup_seconds=warmup_seconds,
        max_in_flight=max_in_flight,
        request_timeout=request_timeout,
        max_failures_per_level=max_failures,
        # One level: the limit only has to admit it (the level bounds itself).
        max_total_seconds=min(3600.0, warmup_seconds + 2 * seconds + 1.0),
        stop_on_saturation=False,
    )
    result = run_sweep(
        runtime, model, version, inputs, plan, protocol=protocol, is_cancelled=is_cancelled
    )
    return result.levels[0] if result.levels else None

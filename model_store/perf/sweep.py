"""Drive one model version at increasing concurrency and measure each level.

For each concurrency level ``c`` of a :class:`SweepPlan`, ``c`` threads send requests back to
back (closed loop, like ``perf_analyzer --concurrency-range``). A level has two phases:

1. warmup (``warmup_seconds``): requests are sent but their successes are not counted, so
   connection set-up and cold caches do not skew the numbers;
2. measurement (``step_seconds``): every thread waits at a barrier first, so no request is in
   flight when Triton's statistics are read; the window then runs until the deadline and each
   thread finishes the request it has started. Statistics are read again once every thread
   has stopped, so the server-side success delta covers exactly the measured requests.

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

__all__ = ["LevelResult", "SweepPlan", "SweepResult", "best_level", "run_sweep"]

MAX_CONCURRENCY = 64
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

StatsReader = Callable[[], Mapping[str, Any] | None]


def _never() -> bool:
    return False


def _ignore(level: LevelResult, fraction_done: float) -> None:
    return None


def _noop() -> None:
    return None


@dataclass(frozen=True)
class SweepPlan:
    """What to measure. Validated on construction; every field has a sane default."""

    levels: tuple[int, ...] = (1, 2, 4, 8)
    step_seconds: float = 3.0
    warmup_seconds: float = 0.5
    request_timeout: float = 10.0
    max_total_seconds: float = 120.0
    max_failures_per_level: int = 50
    stop_on_saturation: bool = True

    def __post_init__(self) -> None:
        levels = tuple(self.levels)
        object.__setattr__(self, "levels", levels)  # accept a list, keep the plan hashable
        if (
            not levels
            or any(type(c) is not int or not 1 <= c <= MAX_CONCURRENCY for c in levels)
            or any(a >= b for a, b in pairwise(levels))
        ):
            raise ValueError(
                f"levels must be ascending, distinct concurrencies within 1..{MAX_CONCURRENCY}; "
                f"got {levels!r}"
            )
        _check_range("step_seconds", self.step_seconds, 0.0, 600.0, low_inclusive=False)
        _check_range("warmup_seconds", self.warmup_seconds, 0.0, 60.0)
        _check_range("request_timeout", self.request_timeout, 0.0, 600.0, low_inclusive=False)
        _check_range("max_total_seconds", self.max_total_seconds, 0.0, 3600.0, low_inclusive=False)
        if type(self.max_failures_per_level) is not int or self.max_failures_per_level < 0:
            raise ValueError("max_failures_per_level must be an integer >= 0")
        if self.estimated_seconds > self.max_total_seconds:
            raise ValueError(
                f"this plan needs about {self.estimated_seconds:g} s ({len(levels)} levels x "
                f"({self.warmup_seconds:g} s warmup + {self.step_seconds:g} s measurement)), "
                f"more than max_total_seconds={self.max_total_seconds:g}; "
                "use fewer levels or shorter steps"
            )

    @property
    def estimated_seconds(self) -> float:
        """Nominal duration: warmup plus measurement for every level (overheads excluded)."""
        return len(self.levels) * (self.warmup_seconds + self.step_seconds)

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
    """One measured concurrency level. ``failed`` and ``errors`` cover the warmup too: a
    failure is worth reporting whenever it happens; successes of the warmup are not counted."""

    concurrency: int
    duration_s: float
    completed: int
    failed: int
    throughput_rps: float
    latency: LatencySummary | None
    server: ServerSplit | None
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "duration_s": self.duration_s,
            "completed": self.completed,
            "failed": self.failed,
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
    not better). Ties go to the lower concurrency. None when no level completed a request."""
    measured = [(lv, lv.latency.p99_ms) for lv in result.levels if lv.latency and lv.completed]
    if not measured:
        return None
    floor = min(p99 for _, p99 in measured)
    eligible = [lv for lv, p99 in measured if p99 <= 2.0 * floor]
    return max(eligible, key=lambda lv: (lv.throughput_rps, -lv.concurrency))


def _saturated(previous: LevelResult, current: LevelResult) -> bool:
    """More concurrency bought < 5 % throughput while p50 latency grew > 50 %."""
    if previous.latency is None or current.latency is None or previous.throughput_rps <= 0:
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
    for index, concurrency in enumerate(plan.levels):
        if is_cancelled():
            result.stopped = "cancelled"
            break
        elapsed = time.monotonic() - sweep_start
        if elapsed + plan.warmup_seconds + plan.step_seconds > plan.max_total_seconds:
            result.stopped = "time_limit"
            break
        level = _run_level(concurrency, plan, version, stats, infer, release, is_cancelled)
        if level is None:
            result.stopped = "cancelled"
            break
        result.levels.append(level)
        on_level(level, (index + 1) / len(plan.levels))
        if level.failed > plan.max_failures_per_level:
            result.stopped = "failures"
            break
        saturated = len(result.levels) > 1 and _saturated(result.levels[-2], level)
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

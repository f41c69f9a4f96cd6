"""Measuring one level of a sweep: the threads that drive it and the statistics read around it.

Closed loop (:func:`_run_level`: ``c`` threads sending back to back) and open loop
(:func:`_run_rate_level`: a pool of senders keeping a schedule), each with its warmup and
measurement phases as :mod:`model_store.perf.sweep` describes them. Apart from the sweep loop
because this is where the threading is; the loop only walks the levels and decides when to stop.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from model_store.perf.plan import SweepPlan
from model_store.perf.results import LevelResult
from model_store.perf.stats import LatencySummary, server_split, success_count
from model_store.runtime.errors import TritonRequestError, TritonUnavailable

#: How often the calling thread polls ``is_cancelled``: often enough for a prompt cancel,
#: rarely enough that a database-backed check stays cheap.
_POLL_SECONDS = 0.05
#: Triton updates its statistics just after sending a response, so a read right after the
#: last response can miss it; we wait this long at most for the counts to catch up.
_SETTLE_SECONDS = 1.0
_MAX_ERRORS_KEPT = 5

StatsReader = Callable[[], Mapping[str, Any] | None]


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

"""model_store.perf's open loop (fixed request rate) on a fake server: a plain in-process
function that sleeps a known time, no Triton. Assertions are on counts and structure where
possible; the few on time are generous, since this runs on a loaded two-core machine."""

from __future__ import annotations

import json
import math
import threading
import time
from typing import Any

import pytest

from model_store.perf.plan import SweepPlan
from model_store.perf.results import LevelResult, SweepResult, _saturated, best_level
from model_store.perf.stats import LatencySummary
from model_store.perf.sweep import _sweep
from model_store.runtime.errors import TritonUnavailable
from tests.unit.test_perf_stats import stats_response

# --------------------------------------------------------------------------- plan


def test_a_rate_plan_replaces_the_levels() -> None:
    plan = SweepPlan(rates=[10, 20.5], step_seconds=1.0, warmup_seconds=0.5)  # type: ignore[arg-type]
    assert plan.mode == "rate" and plan.levels == () and plan.rates == (10.0, 20.5)
    assert plan.points == (10.0, 20.5) and plan.estimated_seconds == 3.0
    assert plan.max_in_flight == 64
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["mode"] == "rate" and data["rates"] == [10.0, 20.5] and data["levels"] == []
    # Every existing caller is unchanged: closed loop is the default.
    closed = SweepPlan()
    assert closed.mode == "concurrency" and closed.levels == (1, 2, 4, 8) and closed.rates is None
    assert closed.to_dict()["rates"] is None and closed.estimated_seconds == 4 * 3.5


@pytest.mark.parametrize(
    "rates",
    [(), (0,), (-1.0,), (10_001,), (20, 10), (10, 10), (True,), (math.nan,), (math.inf,), ("5",)],
)
def test_a_rate_plan_rejects_bad_rates(rates: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError, match="rates"):
        SweepPlan(rates=rates)


def test_a_plan_is_driven_by_levels_or_rates_not_both() -> None:
    with pytest.raises(ValueError, match="not both"):
        SweepPlan(levels=(1, 2), rates=(10.0,))
    for bad in (0, 65, 2.0):
        with pytest.raises(ValueError, match="max_in_flight"):
            SweepPlan(rates=(10.0,), max_in_flight=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="levels x"):
        SweepPlan(rates=(1.0, 2.0, 3.0), step_seconds=50.0, max_total_seconds=100.0)


# --------------------------------------------------------------------------- rules


def rate_level(offered: float, achieved: float, p99: float) -> LevelResult:
    latency = LatencySummary(10, p99 / 2, p99 / 2, p99, p99, 0.1, p99)
    return LevelResult(1, 1.0, int(achieved), 0, achieved, latency, None, offered_rps=offered)


def test_open_loop_saturation_is_a_missed_rate_or_a_doubled_p99() -> None:
    assert _saturated(None, rate_level(100, 85, 5))  # the first level can be saturated
    assert not _saturated(None, rate_level(100, 95, 5))
    assert _saturated(rate_level(50, 50, 6), rate_level(100, 99, 13))
    assert not _saturated(rate_level(50, 50, 6), rate_level(100, 99, 11))
    # Tripled, but by less than 5 ms: a stall of the host, not saturation.
    assert not _saturated(rate_level(50, 50, 2), rate_level(100, 99, 6))


def test_best_rate_ties_go_to_the_lower_offered_rate() -> None:
    result = SweepResult("m", "1", SweepPlan(rates=(50.0, 100.0)))
    result.levels = [rate_level(50, 50, 5), rate_level(100, 50, 6)]
    assert best_level(result) is result.levels[0]


# --------------------------------------------------------------------------- the loop


class SleepServer:
    """One model version whose every request takes ``latency`` seconds; counts like Triton
    and records the most requests it ever had in flight at once."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.success = 0
        self.releases = 0
        self.error: Exception | None = None

    def infer(self) -> None:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            if self.error is not None:
                raise self.error
            time.sleep(self.latency)
        finally:
            with self.lock:
                self.in_flight -= 1
        with self.lock:
            self.success += 1

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return stats_response(self.success)

    def release(self) -> None:
        with self.lock:
            self.releases += 1


def run(server: SleepServer, plan: SweepPlan, **kwargs: Any) -> SweepResult:
    return _sweep(
        "m", "1", plan, infer=server.infer, read_stats=server.stats, release=server.release,
        **kwargs,
    )  # fmt: skip


def test_a_rate_the_server_keeps_up_with_is_achieved() -> None:
    server = SleepServer(0.002)
    threads = set(threading.enumerate())
    # Not stopping on saturation: this test is about the rates, and a stalled thread on a
    # loaded host could look like a grown p99.
    plan = SweepPlan(
        rates=(50.0, 100.0), step_seconds=1.0, warmup_seconds=0.2, stop_on_saturation=False
    )
    progress: list[float] = []
    result = run(server, plan, on_level=lambda lv, f: progress.append(f))

    assert result.stopped is None and progress == [0.5, 1.0]
    for level, rate in zip(result.levels, (50, 100), strict=True):
        assert level.offered_rps == rate
        # Exactly the scheduled requests, each answered: none dropped, none extra.
        assert level.completed == rate and level.failed == 0 and level.unsent == 0
        # A request is late only when every sender was busy; a 2 ms request at 50-100 rps
        # leaves a sender free (some may be late when the machine stalls a thread: CI's busiest
        # two cores once made 16 of 100 late). A quarter late would be the harness's fault.
        assert level.late <= rate // 4
        assert 0.85 * rate <= level.throughput_rps <= rate + 1e-9
        assert level.duration_s >= plan.step_seconds
        assert level.latency is not None and level.latency.min_ms >= 2.0
        # Triton's window holds exactly the measured requests, not the warmup's.
        assert level.server is not None and level.server.success == level.completed
        assert 1 <= level.concurrency <= plan.max_in_flight
    assert server.success > sum(level.completed for level in result.levels)  # the warmups
    assert server.releases >= 2  # every sender released its client...
    assert not set(threading.enumerate()) - threads  # ...and was joined
    row = json.loads(json.dumps(result.to_dict()))["levels"][0]
    assert row["offered_rps"] == 50 and row["late"] <= 5 and row["unsent"] == 0


def test_a_rate_beyond_the_senders_is_sent_late_and_measured_from_its_time() -> None:
    # One sender, a request every 50 ms, each taking 100 ms: request k is due at 50k ms but
    # can only be sent at >= 100k ms. Measured from the send, every latency would be ~100 ms;
    # measured from the schedule, request k waited 50k ms more (coordinated omission).
    server = SleepServer(0.1)
    plan = SweepPlan(
        rates=(20.0,), step_seconds=0.5, warmup_seconds=0.0, max_in_flight=1,
        stop_on_saturation=True,
    )  # fmt: skip
    result = run(server, plan)

    [level] = result.levels
    assert server.peak == 1  # never more in flight than max_in_flight
    assert level.completed + level.unsent == 10 and level.failed == 0  # none silently dropped
    assert level.completed >= 5
    assert level.late == level.completed - 1  # all but the first found the sender busy
    assert level.latency is not None
    assert level.latency.min_ms >= 100.0
    assert level.latency.max_ms >= 100.0 + 50.0 * (level.completed - 1) * 0.9
    assert level.throughput_rps < 0.9 * 20  # achieved, not offered
    assert result.stopped == "saturated"


def test_senders_grow_to_max_in_flight_and_no_further() -> None:
    server = SleepServer(0.05)  # 4 senders: at most 80 rps; 200 are offered
    threads = set(threading.enumerate())
    plan = SweepPlan(
        rates=(200.0,), step_seconds=0.5, warmup_seconds=0.1, max_in_flight=4,
        stop_on_saturation=False,
    )  # fmt: skip
    result = run(server, plan)

    [level] = result.levels
    assert server.peak == 4 and level.concurrency == 4
    assert server.releases == 4  # exactly max_in_flight senders were started and released
    assert level.completed + level.unsent == 100 and level.late > 0
    assert level.throughput_rps < 0.9 * 200
    assert not set(threading.enumerate()) - threads


def test_cancel_inside_a_rate_level_returns_within_a_request() -> None:
    server = SleepServer(0.2)
    threads = set(threading.enumerate())
    started = time.monotonic()
    plan = SweepPlan(rates=(50.0, 100.0), step_seconds=5.0, warmup_seconds=0.1)
    result = run(server, plan, is_cancelled=lambda: time.monotonic() - started > 0.3)
    assert result.stopped == "cancelled" and result.levels == []
    assert time.monotonic() - started < 0.3 + 0.2 + 0.5  # the poll, one request, slack
    assert not set(threading.enumerate()) - threads
    assert server.in_flight == 0


def test_a_failing_rate_level_stops_early() -> None:
    server = SleepServer(0.001)
    server.error = TritonUnavailable("cannot reach Triton")
    plan = SweepPlan(
        rates=(200.0, 400.0), step_seconds=5.0, warmup_seconds=0.0, max_failures_per_level=10
    )
    started = time.monotonic()
    result = run(server, plan)
    assert time.monotonic() - started < 2.0  # did not keep sending for the whole step
    assert result.stopped == "failures"
    [level] = result.levels
    assert level.failed == 11 and level.completed == 0 and level.latency is None
    assert level.errors == ["cannot reach Triton"]


def test_an_unexpected_sender_error_propagates_after_joining() -> None:
    server = SleepServer(0.001)
    server.error = RuntimeError("bug in the request builder")
    threads = set(threading.enumerate())
    for warmup in (0.0, 0.05):  # in the warmup and in the measurement
        plan = SweepPlan(rates=(100.0,), step_seconds=1.0, warmup_seconds=warmup)
        with pytest.raises(RuntimeError, match="request builder"):
            run(server, plan)
        assert not set(threading.enumerate()) - threads

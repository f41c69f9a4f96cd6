"""model_store.perf: the statistics arithmetic, plan validation and the sweep loop on a fake
server (a plain in-process function, no Triton)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import numpy as np
import pytest

from model_store.perf import levels
from model_store.perf.plan import SweepPlan
from model_store.perf.results import LevelResult, SweepResult, _saturated, best_level
from model_store.perf.stats import LatencySummary, percentile, server_split, success_count
from model_store.perf.sweep import _sweep
from model_store.runtime.errors import TritonRequestError, TritonUnavailable

# --------------------------------------------------------------------------- percentile


@pytest.mark.parametrize("size", [1, 2, 3, 10, 101, 1000])
def test_percentile_matches_numpy_linear(size: int) -> None:
    rng = np.random.default_rng(size)
    values = sorted(rng.exponential(5.0, size).tolist())
    for q in [0, 1, 25, 50, 62.5, 90, 99, 99.9, 100, *rng.uniform(0, 100, 20).tolist()]:
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-12)


def test_percentile_rejects_empty_and_out_of_range() -> None:
    with pytest.raises(ValueError, match="empty"):
        percentile([], 50)
    for q in (-0.1, 100.1, float("nan")):
        with pytest.raises(ValueError, match="within"):
            percentile([1.0, 2.0], q)


def test_latency_summary_converts_seconds_to_ms() -> None:
    summary = LatencySummary.from_seconds([0.004, 0.001, 0.002, 0.003])
    assert summary.count == 4
    assert summary.mean_ms == pytest.approx(2.5)
    assert summary.min_ms == pytest.approx(1.0) and summary.max_ms == pytest.approx(4.0)
    assert summary.p50_ms == pytest.approx(2.5)
    assert summary.p90_ms == pytest.approx(3.7)
    assert summary.p99_ms == pytest.approx(3.97)
    assert json.loads(json.dumps(summary.to_dict()))["count"] == 4
    with pytest.raises(ValueError):
        LatencySummary.from_seconds([])


# --------------------------------------------------------------------------- server split


def stats_response(
    success: int,
    *,
    version: str = "1",
    fail: int = 0,
    inferences: int | None = None,
    executions: int | None = None,
    ns_per_request: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A KServe statistics response (as Triton's HTTP endpoint returns it) for one version."""
    per_request = ns_per_request or {
        "success": 1_000_000,
        "queue": 100_000,
        "compute_input": 50_000,
        "compute_infer": 700_000,
        "compute_output": 20_000,
    }
    inference_stats = {
        phase: {"count": success, "ns": success * ns} for phase, ns in per_request.items()
    }
    inference_stats["fail"] = {"count": fail, "ns": fail * 10_000}
    entry = {
        "name": "m",
        "version": version,
        "last_inference": 0,
        "inference_count": success if inferences is None else inferences,
        "execution_count": success if executions is None else executions,
        "inference_stats": inference_stats,
        "batch_stats": [],
    }
    return {"model_stats": [entry]}


def test_server_split_averages_per_request() -> None:
    before = stats_response(10, fail=1, inferences=10, executions=10)
    after = stats_response(110, fail=3, inferences=110, executions=60)
    split = server_split(before, after, "1")
    assert split is not None
    assert (split.success, split.fail) == (100, 2)
    assert split.request_ms == pytest.approx(1.0)
    assert split.queue_ms == pytest.approx(0.1)
    assert split.compute_input_ms == pytest.approx(0.05)
    assert split.compute_infer_ms == pytest.approx(0.7)
    assert split.compute_output_ms == pytest.approx(0.02)
    assert split.avg_batch == pytest.approx(2.0)  # 100 inferences in 50 executions
    assert json.loads(json.dumps(split.to_dict()))["success"] == 100


def test_server_split_is_none_when_nothing_trustworthy() -> None:
    same = stats_response(5)
    assert server_split(same, same, "1") is None  # no success: backend reports nothing
    assert server_split(stats_response(50), stats_response(20), "1") is None  # restart
    assert server_split(stats_response(5), stats_response(9), "2") is None  # no such version
    assert server_split(None, stats_response(9), "1") is None
    assert server_split({"model_stats": []}, stats_response(9), "1") is None


def test_server_split_finds_the_version_among_several() -> None:
    def two_versions(v1: int, v2: int) -> dict[str, Any]:
        entries = stats_response(v1, version="1")["model_stats"]
        entries += stats_response(v2, version="2")["model_stats"]
        return {"model_stats": entries}

    split = server_split(two_versions(1, 10), two_versions(2, 40), "2")
    assert split is not None and split.success == 30
    assert success_count(two_versions(1, 10), "1") == 1
    assert success_count(two_versions(1, 10), "") is None  # ambiguous without a version
    assert success_count(stats_response(7), "") == 7  # the only entry


# --------------------------------------------------------------------------- plan


def test_plan_accepts_defaults_and_lists() -> None:
    assert SweepPlan().levels == (1, 2, 4, 8)
    plan = SweepPlan(levels=[1, 3], step_seconds=0.5)  # type: ignore[arg-type]
    assert plan.levels == (1, 3)
    assert plan.to_dict()["levels"] == [1, 3]
    hash(plan)


@pytest.mark.parametrize(
    "levels", [(), (0,), (1, 65), (2, 1), (1, 1), (1, 2.0), (True, 2)], ids=str
)
def test_plan_rejects_bad_levels(levels: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError, match="levels must be"):
        SweepPlan(levels=levels)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("step_seconds", 0.0),
        ("step_seconds", float("inf")),
        ("warmup_seconds", -0.1),
        ("warmup_seconds", float("nan")),
        ("request_timeout", 0.0),
        ("max_total_seconds", 5000.0),
        ("max_failures_per_level", -1),
    ],
)
def test_plan_rejects_bad_durations(name: str, value: float) -> None:
    options: dict[str, Any] = {name: value}
    with pytest.raises(ValueError, match=name):
        SweepPlan(**options)


def test_plan_rejects_a_sweep_longer_than_its_budget() -> None:
    with pytest.raises(ValueError, match=r"about 35 s .* max_total_seconds=30"):
        SweepPlan(
            levels=(1, 2, 4, 8, 16), step_seconds=6.0, warmup_seconds=1.0, max_total_seconds=30
        )


@pytest.mark.parametrize(
    ("maximum", "levels"),
    [(1, (1,)), (2, (1, 2)), (6, (1, 2, 4, 6)), (8, (1, 2, 4, 8)), (64, (1, 2, 4, 8, 16, 32, 64))],
)
def test_doubling(maximum: int, levels: tuple[int, ...]) -> None:
    assert SweepPlan.doubling(maximum, step_seconds=1.0).levels == levels


def test_doubling_rejects_out_of_range_and_passes_options() -> None:
    for bad in (0, 65):
        with pytest.raises(ValueError, match="max_concurrency"):
            SweepPlan.doubling(bad)
    plan = SweepPlan.doubling(4, step_seconds=2.0, stop_on_saturation=False)
    assert (plan.step_seconds, plan.stop_on_saturation) == (2.0, False)


# --------------------------------------------------------------------------- rules


def level(concurrency: int, rps: float, p50: float, p99: float | None = None) -> LevelResult:
    latency = LatencySummary(10, p50, p50, p50, p99 or p50, p50, p99 or p50)
    return LevelResult(concurrency, 1.0, int(rps), 0, rps, latency, None)


def test_saturation_needs_both_flat_throughput_and_grown_latency() -> None:
    assert _saturated(level(1, 100, 10), level(2, 104, 16))
    assert not _saturated(level(1, 100, 10), level(2, 106, 16))  # still scaling
    assert not _saturated(level(1, 100, 10), level(2, 101, 14))  # latency held
    no_latency = LevelResult(2, 1.0, 0, 5, 0.0, None, None)
    assert not _saturated(level(1, 100, 10), no_latency)


def test_best_level_is_fastest_within_twice_the_lowest_p99() -> None:
    result = SweepResult("m", "1", SweepPlan())
    assert best_level(result) is None
    result.levels = [level(1, 100, 5, 10), level(2, 180, 6, 19), level(4, 250, 20, 40)]
    assert best_level(result) is result.levels[1]  # 4 is faster but its p99 is 4x the lowest
    result.levels.append(level(8, 180, 6, 12))
    assert best_level(result) is result.levels[1]  # a tie goes to the lower concurrency


# --------------------------------------------------------------------------- sweep loop


class FakeServer:
    """A plain in-process stand-in for one model version that counts requests like Triton."""

    def __init__(
        self, latency: float = 0.002, *, shared: bool = False, thrash: bool = False
    ) -> None:
        self.latency = latency
        # A saturated server: requests in flight share one processor, so each one takes
        # ``latency`` times their number and throughput stays flat whatever the concurrency.
        self.shared = shared or thrash
        # A thrashing one: each takes ``latency`` times their number squared, so throughput
        # falls as concurrency grows, by far more than a loaded machine's scheduling noise.
        self.thrash = thrash
        self.error: Exception | None = None
        self.lock = threading.Lock()
        self.in_flight = 0
        self.calls = 0
        self.success = 0
        self.releases = 0

    def infer(self) -> None:
        with self.lock:
            self.calls += 1
            self.in_flight += 1
            share = self.in_flight if self.shared else 1
            share = share * share if self.thrash else share
        try:
            if self.error is not None:
                raise self.error
            time.sleep(self.latency * share)
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


def run(server: FakeServer, plan: SweepPlan, **kwargs: Any) -> SweepResult:
    return _sweep(
        "m",
        "1",
        plan,
        infer=server.infer,
        read_stats=server.stats,
        release=server.release,
        **kwargs,
    )


def test_sweep_measures_every_level_without_the_warmup() -> None:
    server = FakeServer()
    progress: list[tuple[int, float]] = []
    threads = set(threading.enumerate())
    plan = SweepPlan(levels=(1, 2, 4), step_seconds=0.15, warmup_seconds=0.05)
    result = run(server, plan, on_level=lambda lv, f: progress.append((lv.concurrency, f)))

    assert result.stopped is None
    assert progress == [(1, pytest.approx(1 / 3)), (2, pytest.approx(2 / 3)), (4, 1.0)]
    for lv in result.levels:
        assert lv.server is not None and lv.server.success == lv.completed > 0
        assert lv.failed == 0 and lv.latency is not None
        assert lv.latency.p50_ms >= 2.0
    assert sum(lv.completed for lv in result.levels) < server.success  # warmup not counted
    assert server.releases == 1 + 2 + 4  # every worker thread released its client
    assert not set(threading.enumerate()) - threads
    assert json.loads(json.dumps(result.to_dict()))["plan"]["levels"] == [1, 2, 4]


def test_sweep_stops_at_saturation_and_keeps_the_level() -> None:
    # Thrashing, not merely flat: with flat throughput, a loaded machine's scheduling delays
    # between one client's requests made level 2 look 5 % faster than level 1 now and then.
    plan = SweepPlan(levels=(1, 2, 4), step_seconds=0.25, warmup_seconds=0.02)
    result = run(FakeServer(0.01, thrash=True), plan)
    assert result.stopped == "saturated"
    assert [lv.concurrency for lv in result.levels] == [1, 2]

    plan = SweepPlan(levels=(1, 2), step_seconds=0.1, warmup_seconds=0.0, stop_on_saturation=False)
    result = run(FakeServer(0.005, shared=True), plan)
    assert result.stopped is None and len(result.levels) == 2


def test_sweep_stops_a_failing_level_early() -> None:
    server = FakeServer()
    server.error = TritonUnavailable("cannot reach Triton")
    plan = SweepPlan(levels=(1, 2), step_seconds=5.0, warmup_seconds=0.0, max_failures_per_level=10)
    started = time.monotonic()
    result = run(server, plan)
    assert time.monotonic() - started < 1.0  # did not spin for the whole step
    assert result.stopped == "failures"
    [lv] = result.levels
    assert lv.failed == 11 and lv.completed == 0 and lv.latency is None and lv.server is None
    assert lv.errors == ["cannot reach Triton"]


def test_request_errors_are_counted_not_raised() -> None:
    server = FakeServer()
    server.error = TritonRequestError("bad input", status="400")
    plan = SweepPlan(
        levels=(1,), step_seconds=0.05, warmup_seconds=0.0, max_failures_per_level=10**6
    )
    result = run(server, plan)
    assert result.stopped is None
    assert result.levels[0].failed > 0 and result.levels[0].errors == ["bad input"]


def test_cancel_inside_a_level_returns_promptly_without_it() -> None:
    threads = set(threading.enumerate())
    started = time.monotonic()
    plan = SweepPlan(levels=(1, 4), step_seconds=5.0, warmup_seconds=0.05)
    result = run(FakeServer(), plan, is_cancelled=lambda: time.monotonic() - started > 0.2)
    assert result.stopped == "cancelled" and result.levels == []
    assert time.monotonic() - started < 0.6
    assert not set(threading.enumerate()) - threads


def test_cancel_between_levels_keeps_the_measured_ones() -> None:
    cancelled = threading.Event()
    plan = SweepPlan(levels=(1, 2), step_seconds=0.05, warmup_seconds=0.0)
    result = run(
        FakeServer(), plan, is_cancelled=cancelled.is_set, on_level=lambda lv, f: cancelled.set()
    )
    assert result.stopped == "cancelled"
    assert [lv.concurrency for lv in result.levels] == [1]


def test_time_limit_counts_real_elapsed_time() -> None:
    # Nominally 0.4 s of 0.45 s, but each request takes 0.15 s, so level 1 ends at ~0.3 s.
    plan = SweepPlan(levels=(1, 2), step_seconds=0.2, warmup_seconds=0.0, max_total_seconds=0.45)
    result = run(FakeServer(0.15), plan)
    assert result.stopped == "time_limit"
    assert len(result.levels) == 1 and result.levels[0].duration_s >= 0.2


def test_unexpected_worker_error_propagates_after_joining() -> None:
    server = FakeServer()
    server.error = RuntimeError("bug in the request builder")
    threads = set(threading.enumerate())
    for warmup in (0.0, 0.05):  # crash before and after the barrier
        plan = SweepPlan(levels=(4,), step_seconds=1.0, warmup_seconds=warmup)
        with pytest.raises(RuntimeError, match="request builder"):
            run(server, plan)
        assert not set(threading.enumerate()) - threads


def test_backend_without_statistics_is_waited_for_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Like npu_ge: requests succeed but the statistics never move. Counted, not timed: each
    # settle wait reads the statistics more than once; every other read is a single call.
    monkeypatch.setattr(levels, "_SETTLE_SECONDS", 0.05)
    server = FakeServer()
    frozen = stats_response(0)
    reads = [0]

    def read_stats() -> dict[str, Any]:
        reads[0] += 1
        return frozen

    reads_per_call: list[int] = []
    plain_read = levels._ServerStats.read

    def counted_read(self: levels._ServerStats, *args: Any, **kwargs: Any) -> Any:
        before = reads[0]
        try:
            return plain_read(self, *args, **kwargs)
        finally:
            reads_per_call.append(reads[0] - before)

    monkeypatch.setattr(levels._ServerStats, "read", counted_read)
    plan = SweepPlan(levels=(1, 2, 4), step_seconds=0.05, warmup_seconds=0.02)
    result = _sweep("m", "1", plan, infer=server.infer, read_stats=read_stats)
    assert len(reads_per_call) >= 6, reads_per_call  # before and after each of three levels
    assert [n for n in reads_per_call if n > 1] == [max(reads_per_call)], reads_per_call
    assert result.stopped is None
    assert all(lv.server is None and lv.completed > 0 for lv in result.levels)

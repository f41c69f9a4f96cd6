"""run_sweep against the real embedded Triton: client counts match Triton's own statistics."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from model_store.perf.plan import SweepPlan
from model_store.perf.results import LevelResult, best_level
from model_store.perf.sweep import measure_rate, run_sweep
from tests.fixtures.triton import (
    TritonHandle,
    mlp_config_pbtxt,
    mlp_onnx_bytes,
    wait_for_state,
    write_model,
)

pytestmark = pytest.mark.integration

INPUTS = {"x": np.random.default_rng(5).standard_normal((1, 4)).astype(np.float32)}


@pytest.fixture(scope="module")
def served(embedded_triton: TritonHandle) -> Iterator[str]:
    """One model for the module: each load costs a second or two, and the sweeps only read."""
    runtime = embedded_triton.runtime
    model_name = "perf_sweep_mlp"
    write_model(
        embedded_triton.repository, model_name, {1: mlp_onnx_bytes()}, mlp_config_pbtxt(model_name)
    )
    runtime.load(model_name)
    wait_for_state(runtime, model_name, "READY", version="1")
    yield model_name
    runtime.unload(model_name)


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_each_level_matches_the_server_statistics(
    embedded_triton: TritonHandle, served: str, protocol: str
) -> None:
    plan = SweepPlan(levels=(1, 2), step_seconds=1.0, warmup_seconds=0.2, stop_on_saturation=False)
    progress: list[tuple[int, float]] = []

    def on_level(level: LevelResult, fraction: float) -> None:
        progress.append((level.concurrency, fraction))

    threads_before = set(threading.enumerate())
    result = run_sweep(
        embedded_triton.runtime, served, 1, INPUTS, plan, protocol=protocol, on_level=on_level
    )

    assert result.stopped is None
    assert progress == [(1, 0.5), (2, 1.0)]
    assert [level.concurrency for level in result.levels] == [1, 2]
    for level in result.levels:
        assert level.completed > 0 and level.failed == 0, level.errors
        assert level.duration_s >= plan.step_seconds
        assert level.throughput_rps == pytest.approx(level.completed / level.duration_s)
        assert level.latency is not None and level.latency.count == level.completed
        assert 0 < level.latency.min_ms <= level.latency.p50_ms
        assert level.latency.p50_ms <= level.latency.p90_ms <= level.latency.p99_ms
        assert level.latency.p99_ms <= level.latency.max_ms
        server = level.server
        assert server is not None
        # The strong check: the statistics window holds exactly the measured requests, no
        # warmup request and none of another level.
        assert server.success == level.completed
        assert server.fail == 0
        assert server.compute_infer_ms > 0
        assert server.avg_batch is not None and server.avg_batch >= 1.0
        assert server.request_ms < level.latency.max_ms
    assert best_level(result) in result.levels
    assert json.loads(json.dumps(result.to_dict()))["levels"][1]["concurrency"] == 2
    assert not set(threading.enumerate()) - threads_before


def test_cancel_stops_within_a_request(embedded_triton: TritonHandle, served: str) -> None:
    plan = SweepPlan(levels=(1, 2), step_seconds=3.0, warmup_seconds=0.2)
    threads_before = set(threading.enumerate())
    started = time.monotonic()

    def is_cancelled() -> bool:
        return time.monotonic() - started > 0.3

    result = run_sweep(
        embedded_triton.runtime, served, "1", INPUTS, plan, is_cancelled=is_cancelled
    )
    elapsed = time.monotonic() - started

    assert result.stopped == "cancelled"
    assert result.levels == []  # the first level was cut short, so it is not a measurement
    assert elapsed < 1.0
    assert not set(threading.enumerate()) - threads_before


def test_a_rate_sweep_sends_the_schedule_and_matches_the_server(
    embedded_triton: TritonHandle, served: str
) -> None:
    # Open loop at 20 and 50 requests per second for 2 s each: every scheduled request is sent
    # and answered (the MLP takes well under a millisecond), and Triton counts exactly them.
    plan = SweepPlan(
        rates=(20.0, 50.0), step_seconds=2.0, warmup_seconds=0.3, max_in_flight=8,
        stop_on_saturation=False,
    )  # fmt: skip
    threads_before = set(threading.enumerate())
    result = run_sweep(embedded_triton.runtime, served, 1, INPUTS, plan)

    assert result.stopped is None
    assert [level.offered_rps for level in result.levels] == [20.0, 50.0]
    for level, scheduled in zip(result.levels, (40, 100), strict=True):
        assert level.completed == scheduled and level.failed == 0, level.errors
        # Late: no free sender at its slot (max_in_flight busy). On an idle machine almost none;
        # CI's busiest two cores once made 13 of 100 late. A quarter late would mean the
        # harness, not the machine, falls behind.
        assert level.unsent == 0 and level.late <= scheduled // 4
        assert 0.9 * level.offered_rps <= level.throughput_rps <= level.offered_rps  # type: ignore[operator]
        assert 1 <= level.concurrency <= plan.max_in_flight
        assert level.latency is not None and level.latency.count == scheduled
        assert level.server is not None and level.server.success == level.completed
    data = json.loads(json.dumps(result.to_dict()))
    assert data["plan"]["mode"] == "rate" and data["levels"][1]["offered_rps"] == 50.0
    assert not set(threading.enumerate()) - threads_before

    one = measure_rate(
        embedded_triton.runtime, served, "1", INPUTS, 30.0, seconds=1.0, warmup_seconds=0.2
    )
    assert one is not None and one.offered_rps == 30.0
    assert one.completed == 30 and one.failed == 0 and one.unsent == 0
    assert not set(threading.enumerate()) - threads_before

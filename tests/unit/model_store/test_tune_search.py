"""The config search, driven by a synthetic model of performance and a virtual clock.

Real trials (a real Triton, real load) are tested in tests/integration/test_tuning.py; here the
search's decisions are checked exactly: what it tries, in what order, what it skips, when it
stops and what it picks."""

from __future__ import annotations

from typing import Any

import pytest

from model_store.perf.tune import (
    Measurement,
    Objective,
    grid_size,
    pick_load,
    search,
    standard_dimensions,
)

SERVING = {
    "instance_count": 1,
    "max_batch_size": 8,
    "dynamic_batching": True,
    "preferred_batch_sizes": [],
    "max_queue_delay_us": 100,
}
OPTION_NAMES = list(SERVING)


class Machine:
    """Throughput grows with instances up to 2 cores and with batching; latency grows with
    batch size and queue delay. Each trial takes 10 virtual seconds."""

    def __init__(self) -> None:
        self.now = 0.0
        self.measured: list[dict[str, Any]] = []

    def clock(self) -> float:
        return self.now

    def measure(self, changes: dict[str, Any]) -> Measurement:
        self.now += 10.0
        self.measured.append(changes)
        o = {**SERVING, **changes}
        batch = o["max_batch_size"] if o["dynamic_batching"] else 1
        rps = 100.0 * min(o["instance_count"], 2) * (1 + 0.1 * min(batch, 16) ** 0.5)
        p99 = 8.0 + o["max_queue_delay_us"] / 1000.0 + 0.6 * batch
        return Measurement(rps, p99 / 2, p99, 4.0)


def run(objective: Objective, machine: Machine, **kwargs: Any):  # type: ignore[no-untyped-def]
    dims = standard_dimensions(SERVING, option_names=OPTION_NAMES)
    return search(objective, SERVING, dims, measure=machine.measure, clock=machine.clock, **kwargs)


def test_the_serving_config_comes_first_and_the_winner_beats_it() -> None:
    machine = Machine()
    result = run(Objective("throughput", p99_ms=20.0), machine, budget_s=600)
    assert result.trials[0].changes == {} and result.trials[0].label == "serving config"
    best = result.trials[result.best]
    # Two instances (more buy nothing on two cores), the biggest batch whose p99 fits 20 ms.
    assert best.changes == {"instance_count": 2, "max_batch_size": 16}
    assert best.score > result.trials[0].score * 1.5
    assert result.stopped is None
    # Far fewer trials than trying everything, and none measured twice.
    dims = standard_dimensions(SERVING, option_names=OPTION_NAMES)
    assert len(result.trials) < grid_size(dims) / 4
    keys = [tuple(sorted(t.changes.items(), key=str)) for t in result.trials]
    assert len(keys) == len(set(map(str, keys)))


def test_a_config_that_would_not_fit_is_skipped_not_loaded() -> None:
    machine = Machine()

    def fits(options: dict[str, Any]) -> str | None:
        return "needs 9 GiB, 4 GiB free" if options["instance_count"] >= 2 else None

    result = run(Objective("throughput", p99_ms=20.0), machine, budget_s=600, fits=fits)
    skipped = [t for t in result.trials if t.state == "skipped"]
    assert [t.changes for t in skipped] == [{"instance_count": 2}]
    assert skipped[0].reason == "needs 9 GiB, 4 GiB free"
    assert all(m.get("instance_count", 1) == 1 for m in machine.measured)


def test_the_budget_stops_the_search_before_a_trial_would_overrun_it() -> None:
    machine = Machine()
    result = run(Objective("throughput", p99_ms=20.0), machine, budget_s=35)
    assert result.stopped == "budget"
    assert len(machine.measured) == 3  # 30 s used; a fourth 10 s trial would pass 35 s
    assert result.best is not None


def test_cancel_stops_between_trials() -> None:
    machine = Machine()
    result = run(
        Objective("throughput", p99_ms=20.0),
        machine,
        budget_s=600,
        is_cancelled=lambda: len(machine.measured) >= 2,
    )
    assert result.stopped == "cancelled" and len(result.trials) == 2


def test_a_trial_that_fails_to_load_is_recorded_and_the_search_goes_on() -> None:
    machine = Machine()
    real = machine.measure

    def measure(changes: dict[str, Any]) -> Measurement:
        if changes.get("instance_count") == 2:
            raise RuntimeError("Triton: failed to load '_trial-mlp-1a2b3c4d'")
        return real(changes)

    result = search(
        Objective("throughput", p99_ms=20.0), SERVING,
        standard_dimensions(SERVING, option_names=OPTION_NAMES),
        measure=measure, clock=machine.clock, budget_s=600,
    )  # fmt: skip
    failed = [t for t in result.trials if t.state == "failed"]
    assert failed[0].reason.startswith("Triton: failed to load")
    assert any(t.changes.get("max_batch_size") == 16 for t in result.trials)


def test_no_config_within_budget_means_no_winner() -> None:
    result = run(Objective("throughput", p99_ms=1.0), Machine(), budget_s=600)
    assert result.best is None
    assert all("over the 1 ms budget" in t.reason for t in result.trials)


def test_latency_objective_prefers_the_lowest_p99_that_sustains_the_rate() -> None:
    result = run(Objective("latency", rate_rps=150.0), Machine(), budget_s=600)
    best = result.trials[result.best]
    # No batching at all is the lowest p99; one instance cannot sustain 150 rps then.
    assert best.changes == {"instance_count": 2, "dynamic_batching": False}


def test_a_model_without_a_batch_axis_searches_instances_only() -> None:
    fixed = {**SERVING, "max_batch_size": 0, "dynamic_batching": False}
    dims = standard_dimensions(fixed, option_names=OPTION_NAMES)
    assert [d.name for d in dims] == ["instances", "queue delay"]
    assert not dims[1].applies(fixed)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "throughput"}, "needs p99_ms"),
        ({"kind": "latency", "rate_rps": -1}, "needs rate_rps"),
        ({"kind": "fastest"}, "unknown objective"),
    ],
)
def test_objectives_are_checked(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Objective(**kwargs)


def test_pick_load_takes_the_fastest_level_within_the_budget() -> None:
    def level(concurrency: int, rps: float, p99: float) -> dict[str, Any]:
        latency = {"p50_ms": p99 / 2, "p99_ms": p99}
        return {"concurrency": concurrency, "throughput_rps": rps, "failed": 0, "latency": latency}

    levels = [level(1, 90.0, 9), level(2, 150.0, 14), level(4, 160.0, 40)]
    picked = pick_load(Objective("throughput", p99_ms=20.0), levels)
    assert (picked.throughput_rps, picked.load, picked.p99_ms) == (150.0, 2.0, 14)
    over = pick_load(Objective("throughput", p99_ms=5.0), levels)
    assert over.p99_ms == 9  # the best it could do, which then scores nothing


def test_the_grid_tries_every_distinct_config_once_and_agrees_with_the_search() -> None:
    from model_store.perf.tune import grid

    dims = standard_dimensions(
        SERVING, option_names=OPTION_NAMES, batch_sizes=(8, 16), queue_delays_us=(100, 1000)
    )
    machine = Machine()
    everything = grid(
        Objective("throughput", p99_ms=20.0), SERVING, dims,
        measure=machine.measure, clock=machine.clock, budget_s=10_000,
    )  # fmt: skip
    # 4 instance counts x (batcher off, or on at 8 or 16 with 2 delays each) = 20 configs.
    assert len(everything.trials) == 20 and everything.stopped is None
    assert everything.trials[0].label == "serving config"
    searched = search(
        Objective("throughput", p99_ms=20.0), SERVING, dims,
        measure=Machine().measure, clock=Machine().clock, budget_s=10_000,
    )  # fmt: skip
    best_grid = everything.trials[everything.best]
    best_search = searched.trials[searched.best]
    assert best_search.score >= best_grid.score * (1 - 0.03)
    assert len(searched.trials) < len(everything.trials)

"""The canary's decisions (model_store/canary.py), one rule at a time."""

from __future__ import annotations

import random

import pytest

from model_store.canary import (
    BUCKETS,
    Gates,
    Side,
    Verdict,
    bucket_ms,
    bucket_of,
    decide,
    plan_problems,
    quantile,
)

GATES = Gates(max_error_rate=0.01, max_p99_ratio=1.5, min_requests=50)


def side(version: int, latencies_ms: list[float], errors: int = 0) -> Side:
    buckets: dict[int, int] = {}
    for ms in latencies_ms:
        buckets[bucket_of(ms)] = buckets.get(bucket_of(ms), 0) + 1
    return Side(version, len(latencies_ms) + errors, errors, buckets)


def steady(ms: float, n: int, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [ms * rng.uniform(0.9, 1.1) for _ in range(n)]


# -- the histogram ------------------------------------------------------------------------------


@pytest.mark.parametrize("ms", [0.08, 0.5, 3.3, 8.6, 41.2, 250.0, 9000.0])
def test_a_quantile_from_the_buckets_is_within_five_percent(ms: float) -> None:
    assert abs(bucket_ms(bucket_of(ms)) - ms) / ms < 0.05


def test_latencies_outside_the_range_land_in_the_end_buckets() -> None:
    assert bucket_of(0.0) == 0 and bucket_of(-1.0) == 0 and bucket_of(float("nan")) == 0
    assert bucket_of(1e12) == BUCKETS - 1


def test_quantiles_of_a_known_spread() -> None:
    latencies = [1.0] * 98 + [100.0] * 2  # 2% slow
    buckets = side(1, latencies).latency
    assert quantile(buckets, 0.5) == pytest.approx(1.0, rel=0.05)
    assert quantile(buckets, 0.99) == pytest.approx(100.0, rel=0.05)
    assert quantile({}, 0.99) is None


# -- the rules ----------------------------------------------------------------------------------


def test_too_few_requests_decide_nothing_even_when_they_look_bad() -> None:
    candidate = side(3, steady(40.0, 10), errors=5)  # 33% errors, 5x slower, but 15 requests
    serving = side(2, steady(8.0, 500))
    mid = decide(candidate, serving, GATES, step_over=False)
    assert mid.verdict is Verdict.WAIT
    end = decide(candidate, serving, GATES, step_over=True)
    assert end.verdict is Verdict.EXTEND and end.gate == "traffic"
    assert "each needs 50" in str(end.reason) and "the step goes on" in str(end.reason)


def test_too_few_requests_on_the_serving_side_extend_the_step_too() -> None:
    end = decide(side(3, steady(8.0, 200)), side(2, steady(8.0, 20)), GATES, step_over=True)
    assert end.verdict is Verdict.EXTEND


def test_a_burst_of_errors_fails_at_once_mid_step() -> None:
    candidate = side(3, steady(8.0, 90), errors=10)  # 10% errors
    decision = decide(candidate, side(2, steady(8.0, 900)), GATES, step_over=False)
    assert decision.verdict is Verdict.FAIL and decision.gate == "errors"
    assert str(decision.reason) == ("10 of v3's 100 requests failed (10%), above the limit of 1%")
    assert decision.numbers["candidate"]["errors"] == 10


def test_errors_at_the_limit_pass() -> None:
    candidate = side(3, steady(8.0, 99), errors=1)  # exactly 1%
    assert decide(candidate, side(2, steady(8.0, 900)), GATES, step_over=True).verdict is (
        Verdict.PASS
    )


def test_p99_just_over_the_limit_fails_naming_latency() -> None:
    serving = side(2, [8.6] * 500)
    candidate = side(3, [8.6] * 90 + [8.6 * 1.5 * 1.15] * 10)  # p99 15% over 1.5x
    decision = decide(candidate, serving, GATES, step_over=True)
    assert decision.verdict is Verdict.FAIL and decision.gate == "latency"
    assert "x v2's" in str(decision.reason) and str(decision.reason).endswith("limit 1.5x")
    assert decision.numbers["p99_ratio"] > 1.5


def test_p99_just_under_the_limit_passes() -> None:
    serving = side(2, [8.6] * 500)
    candidate = side(3, [8.6] * 90 + [8.6 * 1.5 * 0.85] * 10)
    assert decide(candidate, serving, GATES, step_over=True).verdict is Verdict.PASS


def test_a_slow_candidate_is_named_with_both_p99s() -> None:
    decision = decide(side(3, steady(41.2, 200)), side(2, steady(8.6, 800)), GATES, step_over=True)
    assert decision.verdict is Verdict.FAIL
    reason = str(decision.reason)
    assert reason.startswith("p99 ") and "v2's" in reason and "limit 1.5x" in reason


def test_a_faster_candidate_passes_at_the_end_of_the_step_only() -> None:
    candidate, serving = side(3, steady(4.0, 200)), side(2, steady(8.6, 800))
    assert decide(candidate, serving, GATES, step_over=False).verdict is Verdict.WAIT
    decision = decide(candidate, serving, GATES, step_over=True)
    assert decision.verdict is Verdict.PASS and decision.numbers["p99_ratio"] < 1
    assert "held every gate" in str(decision.reason)


def test_a_candidate_that_only_fails_is_caught_by_the_error_gate() -> None:
    candidate = Side(3, requests=60, errors=60)  # no answer at all, so no latency
    decision = decide(candidate, side(2, steady(8.0, 600)), GATES, step_over=False)
    assert decision.verdict is Verdict.FAIL and decision.gate == "errors"


# -- the plan -----------------------------------------------------------------------------------


def test_a_good_plan_has_no_problems() -> None:
    assert plan_problems([10, 50, 100], 60, GATES) == []


@pytest.mark.parametrize(
    ("steps", "seconds", "gates", "needle"),
    [
        ([50, 10, 100], 60, GATES, "increase"),
        ([10, 10, 100], 60, GATES, "increase"),
        ([0, 50, 100], 60, GATES, "between 1 and 100"),
        ([10, 50, 101], 60, GATES, "between 1 and 100"),
        ([10, 50], 60, GATES, "must be 100"),
        ([100], 60, GATES, "at least one step"),
        ([], 60, GATES, "whole percentages"),
        (["10", 100], 60, GATES, "whole percentages"),
        ([10.5, 100], 60, GATES, "whole percentages"),
        ([10, 100], 4, GATES, "step_seconds"),
        ([10, 100], True, GATES, "step_seconds"),
        ([10, 100], 60, Gates(1.5, 1.5), "max_error_rate"),
        ([10, 100], 60, Gates(-0.1, 1.5), "max_error_rate"),
        ([10, 100], 60, Gates(0.01, 1.0), "max_p99_ratio"),
        ([10, 100], 60, Gates(0.01, float("inf")), "max_p99_ratio"),
        ([10, 100], 60, Gates(0.01, 1.5, 0), "min_requests"),
    ],
)
def test_a_bad_plan_says_why(steps, seconds, gates, needle) -> None:
    problems = [str(p) for p in plan_problems(steps, seconds, gates)]
    assert any(needle in p for p in problems), problems

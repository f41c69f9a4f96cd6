"""The time series' maths (points from scrapes, downsampling) and the advice rules; no Django.

``real_*.prom`` were recorded from the embedded Triton 2.51 (tests/fixtures/triton.py's MLP,
dynamic batching with a 2 ms queue delay): before any request, after 25 inferences, and after
a restart of tritonserver followed by 7 inferences.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from model_store.runtime.advice import ServingConfig, advise
from model_store.runtime.metrics import parse_scrape
from model_store.runtime.series import (
    COUNT_FIELDS,
    SUM_FIELDS,
    Point,
    bucket_start,
    downsample,
    merge_versions,
    points_between,
    scrape_from_json,
    scrape_to_json,
)

FIXTURES = Path(__file__).resolve().parent / "metrics"
KEY = ("mlp", "1")


def recorded(name: str, at: float):  # type: ignore[no-untyped-def]
    return parse_scrape((FIXTURES / f"real_{name}.prom").read_text(), at=at)


# --------------------------------------------------------------------------- points from scrapes


def test_recorded_scrapes_give_the_exact_count_and_positive_latencies() -> None:
    points, resets = points_between(recorded("before", 100.0), recorded("after", 110.0))
    (point,) = [p for p in points if (p.model, p.version) == KEY]
    assert resets == []
    assert (point.start, point.seconds) == (100.0, 10.0)
    assert point.success == 25 and point.failures == 0
    assert point.inferences == 25 and point.executions == 25
    assert point.requests == 25
    rates = point.rates()
    assert rates["requests_per_s"] == pytest.approx(2.5)
    assert rates["avg_batch"] == 1.0
    for key in ("request_ms", "queue_ms", "compute_input_ms", "compute_infer_ms"):
        assert rates[key] is not None and rates[key] > 0, key
    parts = sum(rates[k] or 0 for k in ("queue_ms", "compute_input_ms", "compute_infer_ms"))
    assert parts + (rates["compute_output_ms"] or 0) <= (rates["request_ms"] or 0)
    assert point.pending == 0


def test_a_triton_restart_counts_from_zero_and_nothing_goes_negative() -> None:
    points, resets = points_between(recorded("after", 110.0), recorded("restarted", 140.0))
    (point,) = [p for p in points if (p.model, p.version) == KEY]
    assert resets == [KEY]
    assert point.success == 7 and point.inferences == 7 and point.seconds == 30.0
    for name in (*COUNT_FIELDS, *SUM_FIELDS):
        assert getattr(point, name) >= 0, name
    assert point.rates()["queue_ms"] is not None and point.rates()["queue_ms"] > 0


def test_points_need_scrapes_in_time_order() -> None:
    scrape = recorded("before", 5.0)
    with pytest.raises(ValueError, match="time order"):
        points_between(scrape, scrape)


def test_a_stored_scrape_round_trips_through_json() -> None:
    scrape = recorded("after", 12.5)
    again = scrape_from_json(scrape_to_json(scrape))
    assert again == scrape
    with pytest.raises(ValueError):
        scrape_from_json({"at": 1, "series": [["m"]]})


# --------------------------------------------------------------------------- downsampling


def _random_points(count: int, seed: int = 1) -> list[Point]:
    rng = random.Random(seed)
    points = []
    t = 1_700_000_003.0
    for _ in range(count):
        dt = rng.uniform(8, 12)
        for version in ("1", "2"):
            success = rng.randint(0, 50)
            points.append(
                Point(
                    "m",
                    version,
                    t,
                    dt,
                    success=success,
                    failures=rng.randint(0, 2),
                    inferences=success * 2,
                    executions=success,
                    queue_us=success * rng.uniform(100, 900),
                    compute_infer_us=success * rng.uniform(1000, 3000),
                    pending=rng.choice([None, 0.0, 3.0]),
                    client_requests=rng.randint(0, 3),
                )
            )
        t += dt
    return points


def _sums(points: list[Point]) -> dict[str, float]:
    return {name: sum(getattr(p, name) for p in points) for name in (*COUNT_FIELDS, *SUM_FIELDS)}


def test_downsampling_keeps_every_sum_and_second() -> None:
    raw = _random_points(400)
    minutes = downsample(raw, 60)
    tens = downsample(minutes, 600)
    for coarse in (minutes, tens):
        assert _sums(coarse) == pytest.approx(_sums(raw))
        assert sum(p.seconds for p in coarse) == pytest.approx(sum(p.seconds for p in raw))
    assert all(p.start % 60 == 0 for p in minutes) and all(p.start % 600 == 0 for p in tens)
    # Two steps give what one step gives: roll-ups of roll-ups are exact.
    direct = downsample(raw, 600)
    assert [(p.version, p.start, p.success) for p in tens] == [
        (p.version, p.start, p.success) for p in direct
    ]
    assert [p.queue_us for p in tens] == pytest.approx([p.queue_us for p in direct])


def test_a_bucket_rate_is_the_rate_of_its_raw_points_together() -> None:
    raw = [p for p in _random_points(30) if p.version == "1"]
    bucket = downsample(raw, 600)[0]
    inside = [p for p in raw if bucket_start(p.start, 600) == bucket.start]
    assert bucket.rates()["requests_per_s"] == pytest.approx(
        sum(p.requests for p in inside) / sum(p.seconds for p in inside)
    )
    pendings = [p.pending for p in inside if p.pending is not None]
    assert bucket.pending == (max(pendings) if pendings else None)
    with pytest.raises(ValueError):
        downsample(raw, 0)


def test_versions_side_by_side_share_the_window() -> None:
    a = Point("m", "1", 0.0, 10.0, success=10)
    b = Point("m", "2", 0.0, 10.0, success=30)
    merged = merge_versions([a, b], model="m")
    assert merged is not None
    assert merged.success == 40 and merged.seconds == 10.0
    assert merged.rates()["requests_per_s"] == 4.0
    assert merge_versions([], model="m") is None


def test_busy_fraction_divides_batched_compute_by_the_batch() -> None:
    # 100 executions of batch 4 in 10 s, 20 ms each (Triton adds 20 ms to each of 4 requests).
    point = Point("m", "1", 0, 10.0, success=400, inferences=400, executions=100,
                  compute_infer_us=400 * 20_000)  # fmt: skip
    assert point.busy_fraction(instances=1) == pytest.approx(0.2)
    assert point.busy_fraction(instances=2) == pytest.approx(0.1)
    assert Point("m", "1", 0, 10.0).busy_fraction(1) is None


# --------------------------------------------------------------------------- advice


def window(success: int, queue_ms: float, compute_ms: float, **kw: float) -> Point:
    seconds = kw.pop("seconds", 300.0)
    batch = kw.pop("batch", 1.0)
    return Point(
        "m", "1", 0.0, seconds, success=success, inferences=int(success),
        executions=max(1, int(success / batch)), queue_us=success * queue_ms * 1000,
        compute_infer_us=success * compute_ms * 1000, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def codes(advice: list) -> list[str]:  # type: ignore[type-arg]
    return [a.code for a in advice]


def test_queue_much_longer_than_compute_means_near_capacity() -> None:
    recent = window(3000, queue_ms=30.0, compute_ms=5.0, pending=7.0)
    plain = ServingConfig(max_batch_size=8, instance_count=1)
    advice = advise(target="onnxruntime", total=recent, recent=recent, config=plain,
                    range_label="the last hour")  # fmt: skip
    assert codes(advice) == ["near_capacity"]
    (warning,) = advice
    assert warning.level == "warning"
    assert "30.0 ms" in warning.message and "5.00 ms" in warning.message
    assert "instance_group count, now 1" in warning.message
    assert "enable dynamic batching" in warning.message
    assert "up to 7 requests were waiting" in warning.message
    batched = replace(plain, dynamic_batching=True)
    message = advise(target="onnxruntime", total=recent, recent=recent, config=batched,
                     range_label="x")[0].message  # fmt: skip
    assert "raise max_batch_size (now 8)" in message


def test_the_batchers_own_delay_is_not_a_capacity_problem() -> None:
    # The recorded MLP: 2 ms max_queue_delay, ~2.2 ms queue, ~3 ms compute, idle.
    recent = window(300, queue_ms=2.2, compute_ms=0.3, seconds=300)
    config = ServingConfig(8, 1, dynamic_batching=True, max_queue_delay_us=2000)
    advice = advise(target="onnxruntime", total=recent, recent=recent, config=config,
                    range_label="x")  # fmt: skip
    assert "near_capacity" not in codes(advice)
    assert codes(advice) == ["batching_delay", "headroom"]
    assert "2000 µs" in advice[0].message
    # Without batching, the same numbers are a queue of its own: near capacity.
    unbatched = advise(target="onnxruntime", total=recent, recent=recent,
                       config=ServingConfig(8, 1), range_label="x")  # fmt: skip
    assert codes(unbatched) == ["near_capacity"]


def test_busy_with_batches_of_one_suggests_a_longer_queue_delay() -> None:
    recent = window(60_000, queue_ms=0.5, compute_ms=4.0, seconds=300, batch=1.0)
    config = ServingConfig(8, 1, dynamic_batching=True, max_queue_delay_us=100)
    advice = advise(target="onnxruntime", total=recent, recent=recent, config=config,
                    range_label="x")  # fmt: skip
    assert "batching_idle" in codes(advice)
    assert "max_queue_delay_microseconds (now 100)" in advice[0].message


def test_failures_are_reported_with_their_rate_and_share() -> None:
    total = Point("m", "1", 0.0, 100.0, success=90, failures=10)
    advice = advise(target="onnxruntime", total=total, recent=None, config=None,
                    range_label="the last hour")  # fmt: skip
    assert codes(advice) == ["failures", "few_requests"]
    assert "10 requests failed in the last hour (10.0% of 100, 0.10/s)" in advice[0].message


def test_npu_ge_says_it_has_no_statistics_and_reads_the_hubs_own_calls() -> None:
    total = Point("m", "1", 0.0, 60.0, client_requests=20, client_failures=2)
    advice = advise(target="npu_ge", total=total, recent=total, config=None, range_label="x")
    assert codes(advice) == ["no_statistics", "failures"]
    assert "reports no statistics" in advice[0].message
    assert "of the dashboard's own calls" in advice[1].message
    quiet = advise(target="npu_ge", total=None, recent=None, config=None, range_label="x")
    assert codes(quiet) == ["no_statistics", "no_traffic"]


def test_no_traffic_and_plenty_of_headroom() -> None:
    idle = Point("m", "1", 0.0, 3600.0)
    assert codes(advise(target="onnxruntime", total=idle, recent=idle, config=None,
                        range_label="the last hour")) == ["no_traffic"]  # fmt: skip
    easy = window(600, queue_ms=0.05, compute_ms=2.0)
    advice = advise(target="onnxruntime", total=easy, recent=easy, config=None, range_label="x")
    assert codes(advice) == ["headroom"] and advice[0].level == "ok"
    few = window(5, queue_ms=50.0, compute_ms=1.0)  # too few requests to judge latency
    assert codes(advise(target="onnxruntime", total=few, recent=few, config=None,
                        range_label="x")) == ["few_requests"]  # fmt: skip

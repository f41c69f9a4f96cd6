"""parse_scrape / rates on hand-written Triton metrics texts (no server needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_store.runtime.metrics import (
    MetricsParseError,
    Rates,
    Scrape,
    parse_scrape,
    rates,
)
from tests.fixtures.metrics_text import GPU_CPU, render

FIXTURES = Path(__file__).resolve().parent / "metrics"
BEFORE = (FIXTURES / "before.prom").read_text()

RESNET_V1_BEFORE = {
    "success": 100,
    "failure": 3,
    "inference_count": 400,
    "exec_count": 50,
    "pending": 0,
    "request_us": 500_000,
    "queue_us": 100_000,
    "compute_input_us": 10_000,
    "compute_infer_us": 300_000,
    "compute_output_us": 5_000,
}
# 200 successes + 3 failures in 10 s; 800 inferences in 100 executions; 10 ms per request of
# which 2 ms queue, 0.1 ms input, 6 ms infer, 0.2 ms output; 4 requests pending at the end.
RESNET_V1_AFTER = {
    "success": 300,
    "failure": 6,
    "inference_count": 1200,
    "exec_count": 150,
    "pending": 4,
    "request_us": 2_500_000,
    "queue_us": 500_000,
    "compute_input_us": 30_000,
    "compute_infer_us": 1_500_000,
    "compute_output_us": 45_000,
}
RESNET_V2 = {  # same in both scrapes: no traffic
    "success": 10,
    "failure": 0,
    "inference_count": 10,
    "exec_count": 10,
    "pending": 0,
    "request_us": 20_000,
    "queue_us": 1_000,
    "compute_input_us": 1_000,
    "compute_infer_us": 15_000,
    "compute_output_us": 1_000,
}
BERT_V3 = dict.fromkeys(RESNET_V2, 0.0)


def _after() -> Scrape:
    text = render(
        {("resnet", "1"): RESNET_V1_AFTER, ("resnet", "2"): RESNET_V2, ("bert", "3"): BERT_V3}
    )
    return parse_scrape(text, at=110.0)


# --------------------------------------------------------------------------- parse


def test_parse_keeps_triton_model_families_and_sums_failure_reasons() -> None:
    scrape = parse_scrape(BEFORE, at=100.0)
    assert scrape.at == 100.0
    assert set(scrape.series) == {("resnet", "1"), ("resnet", "2"), ("bert", "3")}
    v1 = scrape.series[("resnet", "1")]
    assert v1.get("success") == 100
    assert v1.get("failure") == 3  # REJECTED 1 + BACKEND 2 + zeros
    assert v1.get("inference_count") == 400
    assert v1.get("exec_count") == 50
    assert v1.get("request_us") == 500_000
    assert v1.get("compute_output_us") == 5_000
    assert v1.pending == 0
    assert scrape.series[("resnet", "2")].get("compute_infer_us") == 15_000


def test_parse_ignores_gpu_cpu_and_unknown_families() -> None:
    scrape = parse_scrape(GPU_CPU + "# TYPE something_else counter\nsomething_else 3\n", at=1.0)
    assert scrape.series == {}


def test_parse_accepts_failure_without_reason_label() -> None:
    text = render({("m", "1"): {"success": 1, "failure": 7}}, failure_reasons=False)
    assert parse_scrape(text, at=0).series[("m", "1")].get("failure") == 7


def test_missing_latency_families_are_absent_not_zero() -> None:
    text = render({("m", "1"): {"success": 5, "inference_count": 5, "exec_count": 5}})
    series = parse_scrape(text, at=0).series[("m", "1")]
    assert series.get("request_us") is None
    assert series.pending is None


@pytest.mark.parametrize(
    "text",
    [
        'nv_inference_count{model="m",version="1" 3\n',
        "this is not prometheus text\n",
        'nv_inference_count{model="m",version="1"} three\n',
        'nv_inference_count{model="m",version="1"} -4\n',
        'nv_inference_count{model="m",version="1"} NaN\n',
        'nv_inference_count{model="m",version="1"} 1\n'
        'nv_inference_count{model="m",version="1"} 2\n',
    ],
    ids=["unclosed-brace", "prose", "non-number", "negative", "nan", "duplicate"],
)
def test_malformed_text_raises_metrics_parse_error(text: str) -> None:
    with pytest.raises(MetricsParseError):
        parse_scrape(text, at=0)
    assert issubclass(MetricsParseError, ValueError)


# --------------------------------------------------------------------------- rates


def test_rates_for_a_known_number_of_requests() -> None:
    result = rates(parse_scrape(BEFORE, at=100.0), _after())
    r = result[("resnet", "1")]
    assert r.requests_per_s == pytest.approx(20.3)  # (200 + 3) / 10 s
    assert r.failures_per_s == pytest.approx(0.3)
    assert r.inferences_per_s == pytest.approx(80.0)
    assert r.avg_batch == pytest.approx(8.0)
    assert r.avg_request_ms == pytest.approx(10.0)
    assert r.avg_queue_ms == pytest.approx(2.0)
    assert r.avg_compute_input_ms == pytest.approx(0.1)
    assert r.avg_compute_infer_ms == pytest.approx(6.0)
    assert r.avg_compute_output_ms == pytest.approx(0.2)
    assert r.pending == 4
    assert r.reset is False


@pytest.mark.parametrize("key", [("resnet", "2"), ("bert", "3")])
def test_zero_traffic_gives_zero_rates_and_no_latencies(key: tuple[str, str]) -> None:
    r = rates(parse_scrape(BEFORE, at=100.0), _after())[key]
    assert r == Rates(
        requests_per_s=0.0,
        inferences_per_s=0.0,
        failures_per_s=0.0,
        avg_batch=None,
        avg_request_ms=None,
        avg_queue_ms=None,
        avg_compute_input_ms=None,
        avg_compute_infer_ms=None,
        avg_compute_output_ms=None,
        pending=0,
    )


def test_counter_reset_uses_current_values_as_the_delta() -> None:
    # Triton restarted between the scrapes: since then 5 requests, 5 inferences in 5 runs.
    restarted = {
        "success": 5,
        "failure": 0,
        "inference_count": 5,
        "exec_count": 5,
        "pending": 1,
        "request_us": 50_000,  # 10 ms each
        "queue_us": 5_000,
        "compute_input_us": 500,
        "compute_infer_us": 40_000,
        "compute_output_us": 500,
    }
    prev = parse_scrape(BEFORE, at=100.0)
    cur = parse_scrape(render({("resnet", "1"): restarted}), at=105.0)
    r = rates(prev, cur)[("resnet", "1")]
    assert r.reset is True
    assert r.requests_per_s == pytest.approx(1.0)
    assert r.inferences_per_s == pytest.approx(1.0)
    assert r.failures_per_s == 0.0
    assert r.avg_batch == pytest.approx(1.0)
    assert r.avg_request_ms == pytest.approx(10.0)
    assert r.avg_queue_ms == pytest.approx(1.0)
    assert r.avg_compute_infer_ms == pytest.approx(8.0)
    assert r.pending == 1


def test_reset_of_a_single_counter_resets_the_whole_series() -> None:
    # Only the failure counter went down (reason labels vanished with a restart): no value
    # of the series may come out negative.
    prev = parse_scrape(render({("m", "1"): {"success": 10, "failure": 9}}), at=0.0)
    cur = parse_scrape(render({("m", "1"): {"success": 12, "failure": 1}}), at=2.0)
    r = rates(prev, cur)[("m", "1")]
    assert r.reset is True
    assert r.requests_per_s == pytest.approx(6.5)  # (12 + 1) / 2
    assert r.failures_per_s == pytest.approx(0.5)


def test_new_series_counts_from_zero_and_vanished_series_is_dropped() -> None:
    prev = parse_scrape(BEFORE, at=100.0)
    cur_series = {
        ("resnet", "1"): RESNET_V1_AFTER,
        ("new", "1"): {"success": 4, "inference_count": 8, "exec_count": 2, "request_us": 8_000},
    }
    result = rates(prev, parse_scrape(render(cur_series), at=102.0))
    assert set(result) == {("resnet", "1"), ("new", "1")}  # resnet/2 and bert/3 unloaded
    new = result[("new", "1")]
    assert new.requests_per_s == pytest.approx(2.0)
    assert new.avg_batch == pytest.approx(4.0)
    assert new.avg_request_ms == pytest.approx(2.0)
    assert new.avg_queue_ms is None  # family not exported
    assert new.pending is None


def test_rates_need_scrapes_in_time_order() -> None:
    scrape = parse_scrape(BEFORE, at=100.0)
    with pytest.raises(ValueError, match="time order"):
        rates(scrape, scrape)

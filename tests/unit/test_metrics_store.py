"""The metrics store (scrapes recorded from the real Triton fed in), its API, tab and sparklines.

Timestamps are "now" minus a little, so that pages, which read the clock, see the points.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from django.db.models import Count, Min, Sum

from model_store.runtime.series import MINUTE, RAW, TEN_MINUTES, TIERS
from tests.fixtures.metrics_text import render
from tests.fixtures.openapi import inline
from webapp.ops import metrics_read, metrics_store
from webapp.ops.metrics_read import model_metrics
from webapp.ops.metrics_store import flush_client_calls, record_client_call, scrape_and_store
from webapp.ops.models import ClientTally, MetricPoint
from webapp.registry.catalogue.models import Model, Version

FIXTURES = Path(__file__).resolve().parent / "metrics"
pytestmark = pytest.mark.django_db


def recorded(name: str) -> str:
    return (FIXTURES / f"real_{name}.prom").read_text()


@pytest.fixture
def t0() -> float:
    # Calls counted by an earlier test in this process must not reach this one.
    metrics_store._take_pending()
    ClientTally.objects.all().delete()
    # 5 s into a 10-minute span, 10-20 minutes ago: the few seconds a test moves the clock
    # never finish a minute, so no roll-up row appears beside the raw ones by chance.
    earlier = time.time() - 600
    return earlier - earlier % 600 + 5


@pytest.fixture
def mlp(db) -> Model:  # type: ignore[no-untyped-def]
    model = Model.objects.create(name="mlp", serving_version=1)
    Version.objects.create(
        model=model,
        number=1,
        source_filename="m.onnx",
        source_sha256="0" * 64,
        source_size=1,
        config_pbtxt='name: "mlp"\nbackend: "onnxruntime"\nmax_batch_size: 8\n'
        "dynamic_batching { max_queue_delay_microseconds: 2000 }\n"
        "instance_group [ { kind: KIND_CPU, count: 1 } ]\n",
    )
    return model


def stored(model: str = "mlp", tier: int = RAW) -> dict[str, int]:
    return MetricPoint.objects.filter(model_name=model, tier=tier).aggregate(
        success=Sum("success"), failures=Sum("failures"), rows=Count("id")
    )


# --------------------------------------------------------------------------- scraping


def test_known_inferences_are_stored_exactly_and_a_restart_goes_not_negative(t0, mlp) -> None:
    first = scrape_and_store(text=recorded("before"), now=t0)
    assert first.stored == 0 and "baseline" in first.skipped
    assert scrape_and_store(text=recorded("after"), now=t0 + 10).stored == 1
    assert stored()["success"] == 25
    restarted = scrape_and_store(text=recorded("restarted"), now=t0 + 20)
    assert restarted.resets == [("mlp", "1")]
    assert stored() == {"success": 32, "failures": 0, "rows": 2}
    for row in MetricPoint.objects.all():
        for field in ("success", "inferences", "executions", "queue_us", "compute_infer_us"):
            assert getattr(row, field) >= 0
    data = model_metrics(mlp, "1h", now=t0 + 25)
    assert [p["requests"] for p in data["points"]] == [25, 7]
    assert data["totals"]["requests"] == 32
    assert data["latest"]["requests"] == 7 and data["latest"]["version"] == "1"
    assert all(p["queue_ms"] > 0 and p["compute_infer_ms"] > 0 for p in data["points"])
    # The recorded queue time is the batcher's 2 ms delay, not a capacity problem.
    assert "near_capacity" not in [a["code"] for a in data["advice"]]


def test_a_scrape_older_than_the_stored_one_is_dropped(t0, mlp) -> None:
    scrape_and_store(text=recorded("before"), now=t0)
    scrape_and_store(text=recorded("after"), now=t0 + 10)
    late = scrape_and_store(text=recorded("after"), now=t0 + 5)
    assert late.skipped == "out of order" and stored()["rows"] == 1


def _counters(n: int) -> dict[str, float]:
    return {
        "success": 3 * n, "failure": 0, "inference_count": 6 * n, "exec_count": 3 * n,
        "pending": n % 4, "request_us": 3000 * n, "queue_us": 600 * n,
        "compute_input_us": 30 * n, "compute_infer_us": 1500 * n, "compute_output_us": 30 * n,
    }  # fmt: skip


def test_roll_ups_keep_every_request_and_retention_bounds_the_rows(mlp) -> None:
    start = MINUTE * 10 * (int(time.time()) // 600) - 26 * 3600  # a 10-minute boundary
    step = 30
    count = 130  # 65 minutes of scrapes, every 30 s
    for n in range(count):
        scrape_and_store(text=render({("mlp", "1"): _counters(n)}), now=start + n * step)
    total = 3 * (count - 1)
    raw, minute, ten = stored(tier=RAW), stored(tier=MINUTE), stored(tier=TEN_MINUTES)
    # Each tier holds all requests up to where the roll-ups have reached; none twice.
    state = metrics_store._state()
    assert state is not None
    assert raw["rows"] == 3600 // step  # raw points are kept for an hour only
    tail = MetricPoint.objects.filter(tier=RAW, start__gte=state.minute_done)
    assert minute["success"] + tail.aggregate(s=Sum("success"))["s"] == total
    assert minute["rows"] == 64 and ten["rows"] == 6  # the 65th minute is still raw
    data = model_metrics(mlp, "6h", now=start + count * step)
    assert data["totals"]["requests"] == total  # 1-minute rows + the raw tail
    assert data["tier"] == 60 and len(data["points"]) == 65
    week = model_metrics(mlp, "7d", now=start + count * step)
    assert week["totals"]["requests"] == total and len(week["points"]) == 7

    # Eight days later: each tier keeps only its own window.
    later = start + 8 * 86400
    scrape_and_store(text=render({("mlp", "1"): _counters(count + 5)}), now=later)
    scrape_and_store(text=render({("mlp", "1"): _counters(count + 6)}), now=later + 10)
    for tier in TIERS:
        oldest = MetricPoint.objects.filter(tier=tier.width).aggregate(m=Min("start"))["m"]
        if oldest is not None:
            assert oldest.timestamp() >= later + 10 - tier.keep, tier
    assert MetricPoint.objects.filter(tier=RAW).count() <= 3


def test_client_calls_are_folded_into_the_next_point(t0, mlp) -> None:
    scrape_and_store(text=recorded("before"), now=t0)
    for ms in (2.0, 4.0):
        record_client_call("mlp", 1, ms, ok=True)
    record_client_call("mlp", 1, 0.0, ok=False)
    record_client_call("gone", 3, 5.0, ok=True)  # a version Triton does not report
    assert flush_client_calls() == 2 and ClientTally.objects.count() == 2
    scrape_and_store(text=recorded("after"), now=t0 + 10)
    assert not ClientTally.objects.exists()
    row = MetricPoint.objects.get(model_name="mlp", version="1")
    assert (row.client_requests, row.client_failures, row.client_latency_ms) == (3, 1, 6.0)
    assert row.success == 25
    gone = MetricPoint.objects.get(model_name="gone")
    assert (gone.version, gone.client_requests, gone.success) == ("3", 1, 0)
    latest = model_metrics(mlp, "1h", now=t0 + 15)["latest"]
    assert latest["client_latency_ms"] == 3.0 and latest["client_requests_per_s"] == 0.3


def test_counting_a_call_costs_microseconds() -> None:
    calls = 20_000
    started = time.perf_counter()
    for _ in range(calls):
        record_client_call("bench", 1, 1.5, ok=True)
    per_call_us = (time.perf_counter() - started) / calls * 1e6
    taken = metrics_store._take_pending()  # nothing reaches the database
    assert taken[("bench", "1")][0] == calls
    assert per_call_us < 20, per_call_us  # the infer path's budget is 200 µs


def test_the_task_reports_an_unreachable_triton_without_raising(settings) -> None:
    from workers.tasks.metrics import scrape

    settings.TRITON_METRICS_URL = "127.0.0.1:9"
    result = scrape.apply().get()
    assert result["stored"] == 0 and "127.0.0.1:9" in result["nodes"]["local"]["skipped"]


# --------------------------------------------------------------------------- API and pages


def test_the_api_answers_the_series_and_refuses_bad_ranges(api, t0, mlp) -> None:
    scrape_and_store(text=recorded("before"), now=t0)
    scrape_and_store(text=recorded("after"), now=t0 + 10)
    body = api("get", "/api/v1/models/mlp/metrics").json()
    assert body["model"] == "mlp" and body["range"] == "1h" and body["tier"] == 0
    assert body["statistics"] == "triton" and body["versions"] == ["1"]
    (point,) = body["points"]
    assert point["requests"] == 25 and point["requests_per_s"] == pytest.approx(2.5)
    assert set(point) >= {
        "t", "version", "requests_per_s", "inferences_per_s", "failures_per_s", "avg_batch",
        "queue_ms", "compute_input_ms", "compute_infer_ms", "compute_output_ms", "pending",
        "client_requests_per_s", "client_latency_ms",
    }  # fmt: skip
    assert {a["level"] for a in body["advice"]} <= {"ok", "info", "warning"}
    assert api("get", "/api/v1/models/mlp/metrics?range=24h").json()["totals"]["requests"] == 25
    bad = api("get", "/api/v1/models/mlp/metrics?range=2y")
    assert bad.status_code == 400 and "1h, 6h, 24h, 7d" in bad.json()["error"]
    assert api("get", "/api/v1/models/nobody/metrics").status_code == 404
    schema = api("get", "/api/v1/schema").json()
    operation = schema["paths"]["/api/v1/models/{name}/metrics"]["get"]
    documented = inline(
        schema, operation["responses"]["200"]["content"]["application/json"]["schema"]
    )
    assert set(body) <= set(documented["properties"])
    assert set(point) <= set(documented["properties"]["points"]["items"]["properties"])


def test_npu_ge_models_say_where_their_numbers_come_from(api, operator_client, t0) -> None:
    Model.objects.create(name="ge", target="npu_ge")
    scrape_and_store(text=recorded("before"), now=t0)
    record_client_call("ge", 1, 8.0, ok=True)
    flush_client_calls()
    scrape_and_store(text=recorded("after"), now=t0 + 10)
    body = api("get", "/api/v1/models/ge/metrics").json()
    assert body["statistics"] == "none (npu_ge)"
    assert body["advice"][0]["code"] == "no_statistics"
    assert body["totals"]["client_requests"] == 1
    page = operator_client.get("/models/ge/metrics/").content.decode()
    assert "reports no statistics" in page and 'data-statistics="none"' in page
    assert "Dashboard calls" in page


def test_the_metrics_tab_renders_numbers_charts_and_a_live_summary(
    operator_client, t0, mlp
) -> None:
    scrape_and_store(text=recorded("before"), now=t0)
    scrape_and_store(text=recorded("after"), now=t0 + 10)
    page = operator_client.get("/models/mlp/metrics/").content.decode()
    assert 'aria-current="page">Metrics</a>' in page
    for chart in ("chart-throughput", "chart-latency", "chart-failures", "chart-pending"):
        assert f'id="{chart}"' in page
    assert 'data-total-requests="25"' in page
    assert "uPlot.iife.min.js" in page and "cdn" not in page.lower()
    assert 'data-live-topic="metrics"' in page
    data = json.loads(page.split('id="metrics-data" type="application/json">')[1].split("<")[0])
    assert data["totals"]["requests"] == 25
    partial = operator_client.get(
        "/models/mlp/metrics/?range=6h&part=summary", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "<html" not in partial and 'data-metric="total_requests">25<' in partial
    assert "the last 6 hours" in partial
    # An unknown range falls back to the last hour rather than failing.
    assert operator_client.get("/models/mlp/metrics/?range=nope").status_code == 200


def test_the_models_list_shows_a_throughput_sparkline(operator_client, t0, mlp) -> None:
    Model.objects.create(name="quiet")
    scrape_and_store(text=recorded("before"), now=t0)
    scrape_and_store(text=recorded("after"), now=t0 + 10)
    scrape_and_store(text=recorded("after"), now=t0 + 80)
    page = operator_client.get("/models/").content.decode()
    assert "Throughput (1 h)" in page
    assert page.count("<polyline") == 1  # mlp only; quiet has no data
    assert "no data" in page
    assert 'data-live-topic="models metrics"' in page
    sparks = metrics_read.sparklines([mlp], now=t0 + 85)
    assert sparks["mlp"].latest == 0.0  # the newest interval (70 s long) had no requests
    assert sparks["mlp"].peak > 0

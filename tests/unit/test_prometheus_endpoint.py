"""GET /metrics: the collector's figures match the database rows, and who may read them."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
import redis
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.users import token_for
from webapp.ops import prometheus
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Job


def scrape(client: Client, **headers: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


@pytest.fixture(autouse=True)
def quiet_services(settings) -> None:
    settings.TRITON_URL = "127.0.0.1:9"  # nothing listens: Triton is down
    settings.REDIS_URL = ""
    settings.METRICS_PUBLIC = False


def _job(model: Model, kind: str, state: str, seconds: float | None, *, ago: float = 60) -> Job:
    finished = timezone.now() - timedelta(seconds=ago)
    started = finished - timedelta(seconds=seconds) if seconds is not None else None
    return Job.objects.create(
        kind=kind,
        model=model,
        state=state,
        started=started,
        finished=finished if seconds is not None else None,
    )


@pytest.fixture
def rows(db: None) -> None:
    a = Model.objects.create(name="a", serving_version=1)
    b = Model.objects.create(name="b")
    for number, status in [(1, "ready"), (2, "ready"), (3, "failed")]:
        Version.objects.create(
            model=a, number=number, status=status, source_filename="m.onnx",
            source_sha256="0" * 64, source_size=1,
        )  # fmt: skip
    Version.objects.create(
        model=b, number=1, status="compiling", source_filename="m.onnx",
        source_sha256="1" * 64, source_size=1,
    )  # fmt: skip
    _job(a, "compile", "succeeded", 30)
    _job(a, "compile", "succeeded", 90)
    _job(a, "compile", "failed", 4000)
    _job(a, "compile", "succeeded", 10, ago=2 * 86400)  # finished before the 24 h window
    _job(b, "compile", "running", None)
    _job(b, "compile", "queued", None)
    _job(a, "serve", "succeeded", 1.5)
    _job(a, "serve", "failed", 12)
    _job(a, "rollback", "succeeded", 0.8)


def test_job_counts_by_kind_and_state(viewer_client: Client, rows: None) -> None:
    s = scrape(viewer_client)
    assert value(s, "hub_jobs", kind="compile", state="succeeded") == 3
    assert value(s, "hub_jobs", kind="compile", state="failed") == 1
    assert value(s, "hub_jobs", kind="compile", state="running") == 1
    assert value(s, "hub_jobs", kind="compile", state="queued") == 1
    assert value(s, "hub_jobs", kind="serve", state="failed") == 1
    # every kind x state is there, zeros included, so series never vanish
    assert value(s, "hub_jobs", kind="sweep", state="cancelled") == 0
    assert sum(v for (n, _), v in s.items() if n == "hub_jobs") == Job.objects.count()


def test_job_durations_of_the_last_day(viewer_client: Client, rows: None) -> None:
    s = scrape(viewer_client)
    assert value(s, "hub_job_duration_seconds_count", kind="compile") == 3  # not the 2-day-old
    assert value(s, "hub_job_duration_seconds_sum", kind="compile") == pytest.approx(4120, abs=1)
    assert value(s, "hub_job_duration_seconds_bucket", kind="compile", le="60.0") == 1
    assert value(s, "hub_job_duration_seconds_bucket", kind="compile", le="120.0") == 2
    assert value(s, "hub_job_duration_seconds_bucket", kind="compile", le="+Inf") == 3
    assert value(s, "hub_job_duration_seconds_count", kind="sweep") == 0


def test_switch_durations_by_outcome(viewer_client: Client, rows: None) -> None:
    s = scrape(viewer_client)
    count = "hub_switch_duration_seconds_count"
    assert value(s, count, kind="serve", outcome="succeeded") == 1
    assert value(s, count, kind="serve", outcome="failed") == 1
    assert value(s, count, kind="rollback", outcome="succeeded") == 1
    assert value(
        s, "hub_switch_duration_seconds_sum", kind="serve", outcome="failed"
    ) == pytest.approx(12, abs=0.01)
    assert (
        value(s, "hub_switch_duration_seconds_bucket", kind="serve", outcome="succeeded", le="2.0")
        == 1
    )


def test_models_and_versions(viewer_client: Client, rows: None) -> None:
    s = scrape(viewer_client)
    assert value(s, "hub_models_total") == 2
    assert value(s, "hub_models_serving") == 1
    assert value(s, "hub_versions", status="ready") == 2
    assert value(s, "hub_versions", status="failed") == 1
    assert value(s, "hub_versions", status="compiling") == 1
    assert value(s, "hub_versions", status="cancelled") == 0


def test_without_redis_the_queue_series_are_absent_and_triton_is_down(
    viewer_client: Client, db: None
) -> None:
    s = scrape(viewer_client)
    names = {name for name, _ in s}
    assert "hub_celery_queue_depth" not in names
    assert "hub_metrics_scrape_errors_total" not in names
    assert value(s, "hub_triton_up") == 0
    assert value(s, "hub_collect_ok", part="jobs") == 1
    assert value(s, "hub_metrics_collect_seconds") < 1


class FakePipeline:
    def __init__(self, data: dict[str, Any], fail: bool) -> None:
        self.data, self.fail, self.calls = data, fail, []

    def llen(self, key: str) -> None:
        self.calls.append(len(self.data.get(key, [])))

    def get(self, key: str) -> None:
        self.calls.append(self.data.get(key))

    def execute(self) -> list[Any]:
        if self.fail:
            raise redis.ConnectionError("Connection refused")
        return self.calls


class FakeRedis:
    def __init__(self, data: dict[str, Any], fail: bool = False) -> None:
        self.data, self.fail = data, fail

    def pipeline(self, transaction: bool = True) -> FakePipeline:
        return FakePipeline(self.data, self.fail)


def test_queue_depth_and_triton_scrape_hook_from_redis(
    viewer_client: Client, db: None, settings, monkeypatch
) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    data = {
        "celery": ["t1", "t2", "t3"],
        prometheus.SCRAPE_ERRORS_KEY: b"7",
        prometheus.LAST_SCRAPE_KEY: b"1700000000.5",
    }
    monkeypatch.setattr(prometheus, "_redis_client", lambda url: FakeRedis(data))
    s = scrape(viewer_client)
    assert value(s, "hub_redis_up") == 1
    assert value(s, "hub_celery_queue_depth", queue="celery") == 3
    assert value(s, "hub_metrics_scrape_errors_total") == 7
    assert value(s, "hub_metrics_last_scrape_timestamp_seconds") == 1700000000.5


def test_redis_down_is_a_series_not_an_error(
    viewer_client: Client, db: None, settings, monkeypatch
) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    monkeypatch.setattr(prometheus, "_redis_client", lambda url: FakeRedis({}, fail=True))
    s = scrape(viewer_client)
    assert value(s, "hub_redis_up") == 0
    assert ("hub_celery_queue_depth", (("queue", "celery"),)) not in s
    assert value(s, "hub_models_total") == 0


def test_a_broken_part_is_reported_and_the_rest_still_shows(
    viewer_client: Client, db: None, monkeypatch
) -> None:
    def broken(self: object) -> list[object]:
        raise RuntimeError("boom")

    monkeypatch.setattr(prometheus.HubCollector, "_registry", broken)
    s = scrape(viewer_client)
    assert value(s, "hub_collect_ok", part="registry") == 0
    assert value(s, "hub_collect_ok", part="jobs") == 1
    assert ("hub_models_total", ()) not in s


def test_note_triton_scrape_writes_the_documented_keys(settings, monkeypatch) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    calls: list[tuple[str, ...]] = []

    class Client_:
        def set(self, key: str, value: str) -> None:
            calls.append(("set", key, value))

        def incr(self, key: str) -> None:
            calls.append(("incr", key))

    monkeypatch.setattr(prometheus, "_redis_client", lambda url: Client_())
    prometheus.note_triton_scrape(True, at=12.5)
    prometheus.note_triton_scrape(False)
    assert calls == [
        ("set", "hub:metrics:last_scrape_ts", "12.5"),
        ("incr", "hub:metrics:scrape_errors"),
    ]


def test_triton_up_when_ready_answers_200(viewer_client: Client, db: None, settings) -> None:
    class Ready(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/v2/health/ready" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Ready)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        settings.TRITON_URL = f"127.0.0.1:{server.server_address[1]}"
        assert value(scrape(viewer_client), "hub_triton_up") == 1
    finally:
        server.shutdown()
        server.server_close()


# --- who may read it ---------------------------------------------------------------------


def test_anonymous_scrapes_get_a_plain_401(client: Client, db: None) -> None:
    response = client.get("/metrics")
    assert response.status_code == 401
    assert response["Content-Type"].startswith("text/plain")
    assert "apitoken" in response.content.decode()
    assert response["WWW-Authenticate"].startswith("Token")


@pytest.mark.parametrize("scheme", ["Token", "Bearer"])
def test_an_api_token_may_scrape(client: Client, viewer, scheme: str) -> None:
    headers = {"HTTP_AUTHORIZATION": f"{scheme} {token_for(viewer)}"}
    assert value(scrape(client, **headers), "hub_models_total") == 0


def test_a_bad_token_is_refused_even_when_public(client: Client, db: None, settings) -> None:
    settings.METRICS_PUBLIC = True
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer nope").status_code == 401


def test_metrics_public_lets_anonymous_scrapers_in(client: Client, db: None, settings) -> None:
    settings.METRICS_PUBLIC = True
    assert value(scrape(client), "hub_models_total") == 0


def test_only_get(viewer_client: Client) -> None:
    assert viewer_client.post("/metrics").status_code == 405


def test_a_scrape_is_quick(viewer_client: Client, rows: None) -> None:
    viewer_client.get("/metrics")  # warm up imports and connections
    began = time.perf_counter()
    scrape(viewer_client)
    assert time.perf_counter() - began < 0.5  # ~10 ms here; generous for slow CI machines


def test_openmetrics_when_the_scraper_asks_for_it(viewer_client: Client, rows: None) -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse

    response = viewer_client.get(
        "/metrics", HTTP_ACCEPT="application/openmetrics-text;version=1.0.0,text/plain;q=0.5"
    )
    assert response["Content-Type"].startswith("application/openmetrics-text")
    text = response.content.decode()
    assert text.rstrip().endswith("# EOF")
    names = {f.name for f in om_parse(text)}
    assert {"hub_jobs", "hub_job_duration_seconds", "hub_switch_duration_seconds"} <= names

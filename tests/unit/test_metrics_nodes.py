"""Metrics per node: each node's Triton scraped on its own, read per node and summed.

Scrapes are fed in as text (recorded from the real Triton, or written by
``tests.fixtures.metrics_text.render``) except where the fetching itself is the subject:
there a tiny HTTP server on 127.0.0.1 plays a node's metrics endpoint.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.models import Sum
from django.utils import timezone

from model_store.runtime.errors import TritonRequestError, TritonUnavailable
from model_store.runtime.metrics_fetch import MetricsURLRefused, fetch_metrics_text, metrics_url
from model_store.runtime.series import MINUTE, RAW
from tests.fixtures.metrics_text import render
from tests.fixtures.nodes import report
from webapp.nodes.models import HostReport, Node
from webapp.ops import metrics_store
from webapp.ops.metrics_read import model_metrics, node_request_rates, sparklines
from webapp.ops.metrics_store import remote_scrape_targets, scrape_and_store
from webapp.ops.models import ClientTally, MetricPoint, MetricsState
from webapp.registry.catalogue.models import Model

FIXTURES = Path(__file__).resolve().parent / "metrics"
pytestmark = pytest.mark.django_db


def recorded(name: str) -> str:
    return (FIXTURES / f"real_{name}.prom").read_text()


def counters(n: int, per: int = 3) -> dict[str, float]:
    """Counters after ``n`` rounds of ``per`` requests (2 inferences each, 1 ms per request)."""
    return {
        "success": per * n, "failure": 0, "inference_count": 2 * per * n,
        "exec_count": per * n, "pending": 1, "request_us": 1000 * per * n,
        "queue_us": 100 * per * n, "compute_input_us": 10 * per * n,
        "compute_infer_us": 800 * per * n, "compute_output_us": 10 * per * n,
    }  # fmt: skip


@pytest.fixture
def t0() -> float:
    metrics_store._take_pending()
    ClientTally.objects.all().delete()
    earlier = time.time() - 600  # 5 s into a 10-minute span, 10-20 minutes ago
    return earlier - earlier % 600 + 5


@pytest.fixture
def mlp(db) -> Model:  # type: ignore[no-untyped-def]
    return Model.objects.create(name="mlp")


def add_node(name: str, *, metrics: str = "10.0.0.2:8002", age_s: float = 0.0) -> Node:
    """A node that reported ``age_s`` ago (by the hub's clock)."""
    node = Node.objects.create(name=name, triton={"http": "h:1", "grpc": "h:2", "metrics": metrics})
    HostReport.objects.create(node=name, made_at=timezone.now(), data=report(name))
    received = timezone.now() - timedelta(seconds=age_s)
    HostReport.objects.filter(node=name).update(received=received)
    return node


def two_nodes_serving(t0: float, lag: float = 4) -> None:
    """``local`` serves 3 requests per 10 s, ``b`` 5 per 10 s, b scraping ``lag`` s later."""
    for n in range(4):
        scrape_and_store(text=render({("mlp", "1"): counters(n, 3)}), now=t0 + 10 * n)
        scrape_and_store(
            node="b", text=render({("mlp", "1"): counters(n, 5)}), now=t0 + lag + 10 * n
        )


def raw_success(node: str) -> int:
    rows = MetricPoint.objects.filter(node=node, tier=RAW)
    return int(rows.aggregate(s=Sum("success"))["s"] or 0)


# --------------------------------------------------------------------------- storing


def test_two_nodes_are_stored_apart_and_diffed_against_their_own_scrapes(t0, mlp) -> None:
    two_nodes_serving(t0)
    assert raw_success("local") == 9 and raw_success("b") == 15
    keys = set(MetricsState.objects.values_list("key", flat=True))
    assert keys == {"node:local", "node:b"}
    # b's counters are never diffed against local's (that would be a reset, stored as 15+).
    assert set(MetricPoint.objects.filter(node="b").values_list("success", flat=True)) == {5}


def test_the_sum_adds_up_and_each_node_reads_alone(t0, mlp) -> None:
    two_nodes_serving(t0)
    now = t0 + 35
    both = model_metrics(mlp, "1h", now=now)
    local = model_metrics(mlp, "1h", node="local", now=now)
    b = model_metrics(mlp, "1h", node="b", now=now)
    assert both["nodes"] == ["b", "local"] and b["nodes"] == ["b", "local"]
    assert (both["node"], b["node"]) == (None, "b")
    assert local["totals"]["requests"] == 9 and b["totals"]["requests"] == 15
    assert both["totals"]["requests"] == 24
    assert [p["requests_per_s"] for p in b["points"]] == [0.5, 0.5, 0.5]
    # Points of the same version and bucket add up: 0.3 + 0.5 requests/s, latency unchanged.
    assert [round(p["requests_per_s"], 6) for p in both["points"]] == [0.8, 0.8, 0.8]
    assert all(p["request_ms"] == pytest.approx(1.0) for p in both["points"])
    assert both["latest"]["requests_per_s"] == pytest.approx(0.8)
    assert both["latest"]["pending"] == 2  # one waiting on each node
    assert model_metrics(mlp, "6h", now=now)["totals"]["requests"] == 24
    nobody = model_metrics(mlp, "1h", node="c", now=now)
    assert nobody["points"] == [] and nobody["totals"]["requests"] == 0
    # The models list stays the total.
    assert sparklines([mlp], now=now)["mlp"].latest == pytest.approx(0.8)


def test_now_adds_each_node_s_newest_interval_whatever_their_phase(t0, mlp) -> None:
    two_nodes_serving(t0, lag=7)  # b's newest interval starts in the next 10 s of the grid
    now = t0 + 38
    assert model_metrics(mlp, "1h", now=now)["latest"]["requests_per_s"] == pytest.approx(0.8)
    assert sparklines([mlp], now=now)["mlp"].latest == pytest.approx(0.8)
    points = model_metrics(mlp, "1h", now=now)["points"]
    assert sum(p["requests"] for p in points) == 24


def test_a_node_that_stopped_adds_nothing_to_now(t0, mlp) -> None:
    two_nodes_serving(t0)
    for n in range(4, 12):  # local goes on for 80 s more; b is not scraped again
        scrape_and_store(text=render({("mlp", "1"): counters(n, 3)}), now=t0 + 10 * n)
    latest = model_metrics(mlp, "1h", now=t0 + 115)["latest"]
    assert latest["requests_per_s"] == pytest.approx(0.3)


def test_roll_ups_and_pruning_are_per_node(mlp) -> None:
    start = 600 * (int(time.time()) // 600) - 3 * 3600  # a 10-minute boundary, 3 h ago
    for n in range(13):  # 2 minutes of local's scrapes, every 10 s
        scrape_and_store(text=render({("mlp", "1"): counters(n, 3)}), now=start + 10 * n)
    # b starts later and has not finished a minute: nothing of it is rolled up.
    scrape_and_store(node="b", text=render({("mlp", "1"): counters(0, 5)}), now=start + 125)
    scrape_and_store(node="b", text=render({("mlp", "1"): counters(1, 5)}), now=start + 135)
    minute = MetricPoint.objects.filter(tier=MINUTE)
    assert set(minute.values_list("node", flat=True)) == {"local"}
    assert minute.aggregate(s=Sum("success"))["s"] == 36  # 2 finished minutes x 6 x 3
    b_state = MetricsState.objects.get(key="node:b")
    local_state = MetricsState.objects.get(key="node:local")
    assert b_state.minute_done is not None and local_state.minute_done is not None
    assert b_state.minute_done.timestamp() == start + 120
    # A day later local prunes its old raw rows; b's rows are b's to prune.
    later = start + 86400
    scrape_and_store(text=render({("mlp", "1"): counters(20, 3)}), now=later)
    assert not MetricPoint.objects.filter(
        node="local", tier=RAW, start__lt=metrics_store.utc_datetime(later - 3600)
    ).exists()
    assert MetricPoint.objects.filter(node="b", tier=RAW).count() == 1


def test_client_calls_stay_local(t0, mlp) -> None:
    scrape_and_store(text=recorded("before"), now=t0)
    scrape_and_store(node="b", text=recorded("before"), now=t0 + 1)
    metrics_store.record_client_call("mlp", 1, 2.0, ok=True)
    metrics_store.flush_client_calls()
    scrape_and_store(node="b", text=recorded("after"), now=t0 + 11)
    assert ClientTally.objects.count() == 1  # b's scrape leaves them for local's
    scrape_and_store(text=recorded("after"), now=t0 + 10)
    assert not ClientTally.objects.exists()
    rows = MetricPoint.objects.filter(client_requests__gt=0)
    assert list(rows.values_list("node", flat=True)) == ["local"]


# --------------------------------------------------------------------------- which nodes


def test_down_nodes_are_not_scraped_and_draining_ones_are(settings) -> None:
    settings.HOST_PROBE_SECONDS = 30
    add_node("up-1")
    add_node("gone", age_s=600)
    add_node("drained")
    Node.objects.filter(name="drained").update(draining=True)
    add_node("quiet", metrics="")
    Node.objects.create(name="never")  # registered, never reported
    targets = dict(remote_scrape_targets())
    assert targets == {"up-1": "10.0.0.2:8002", "drained": "10.0.0.2:8002"}


class _Endpoint(http.server.BaseHTTPRequestHandler):
    body = b""
    status = 200
    location = ""

    def do_GET(self) -> None:
        self.send_response(self.status)
        if self.location:
            self.send_header("Location", self.location)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[tuple[str, type[_Endpoint]]]:
    handler = type("Handler", (_Endpoint,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_an_unreachable_node_does_not_stop_the_others(settings, endpoint, mlp) -> None:
    from workers.tasks.metrics import scrape

    address, handler = endpoint
    handler.body = render({("mlp", "1"): counters(1, 5)}).encode()
    settings.TRITON_METRICS_URL = "127.0.0.1:9"  # local's Triton is not running either
    add_node("a-dead", metrics="127.0.0.1:9")
    add_node("b", metrics=address)
    add_node("c-hostile", metrics="file:///etc/passwd")
    result = scrape.apply().get()
    nodes = result["nodes"]
    assert set(nodes) == {"local", "a-dead", "b", "c-hostile"}
    assert nodes["local"]["failed"] and nodes["a-dead"]["failed"]
    assert "only http and https" in nodes["c-hostile"]["skipped"]
    assert "baseline" in nodes["b"]["skipped"] and not nodes["b"].get("failed")
    handler.body = render({("mlp", "1"): counters(2, 5)}).encode()
    time.sleep(0.01)
    assert scrape.apply().get()["nodes"]["b"]["stored"] == 1
    assert raw_success("b") == 5


def test_fetching_a_node_s_metrics_is_bounded(endpoint) -> None:
    address, handler = endpoint
    handler.body = b"x" * 2048
    assert fetch_metrics_text(address, max_bytes=4096) == "x" * 2048
    with pytest.raises(MetricsURLRefused, match="over 1000 bytes"):
        fetch_metrics_text(address, max_bytes=1000)
    handler.status, handler.location = 302, "http://169.254.169.254/"
    with pytest.raises(TritonRequestError, match="HTTP 302"):  # redirects are not followed
        fetch_metrics_text(address)
    for refused in ("file:///etc/passwd", "ftp://h/metrics", "gopher://h:70", "http://"):
        with pytest.raises(MetricsURLRefused):
            fetch_metrics_text(refused)
    with pytest.raises(TritonUnavailable):
        fetch_metrics_text("127.0.0.1:9", timeout=1.0)
    assert metrics_url("10.0.0.2:8002") == "http://10.0.0.2:8002/metrics"
    assert metrics_url("https://h:8443/") == "https://h:8443/metrics"
    assert metrics_url("http://h:1/custom") == "http://h:1/custom"


# --------------------------------------------------------------------------- API and pages


def test_the_api_reads_one_node_or_all_and_404s_an_unknown_one(api, t0, mlp) -> None:
    add_node("b")
    two_nodes_serving(t0)
    both = api("get", "/api/v1/models/mlp/metrics").json()
    assert both["totals"]["requests"] == 24 and both["nodes"] == ["b", "local"]
    assert both["node"] is None
    b = api("get", "/api/v1/models/mlp/metrics?node=b").json()
    assert b["totals"]["requests"] == 15 and b["node"] == "b"
    unknown = api("get", "/api/v1/models/mlp/metrics?node=zz")
    assert unknown.status_code == 404 and unknown.json()["code"] == "not_found"
    assert api("get", "/api/v1/models/mlp/metrics?node=../x").status_code == 400
    schema = api("get", "/api/v1/schema").json()
    parameters = schema["paths"]["/api/v1/models/{name}/metrics"]["get"]["parameters"]
    assert "node" in {p["name"] for p in parameters}


def test_the_metrics_tab_offers_a_node_picker_with_two_nodes(operator_client, t0, mlp) -> None:
    scrape_and_store(text=recorded("before"), now=t0)
    scrape_and_store(text=recorded("after"), now=t0 + 10)
    page = operator_client.get("/models/mlp/metrics/").content.decode()
    assert 'aria-label="Node"' not in page  # one node: nothing to pick
    two_nodes_serving(t0 + 20)
    page = operator_client.get("/models/mlp/metrics/?range=6h").content.decode()
    assert 'aria-label="Node"' in page and 'data-node="" aria-current="true"' in page
    assert 'href="?range=6h&amp;node=b"' in page
    page = operator_client.get("/models/mlp/metrics/?range=6h&node=b").content.decode()
    assert 'data-node="b" aria-current="true"' in page
    assert "?range=6h&amp;node=b" in page.split('id="metrics-charts"')[1].split(">")[0]
    assert 'href="?range=1h&amp;node=b"' in page  # the range picker keeps the node
    assert operator_client.get("/models/mlp/metrics/?node=../x").status_code == 200


def test_the_nodes_page_shows_each_node_s_request_rate_and_the_total(
    viewer_client, settings, mlp
) -> None:
    settings.TRITON_URL = "127.0.0.1:9"
    add_node("local")
    add_node("b")
    add_node("idle")
    now = time.time()
    for n in range(4):
        scrape_and_store(text=render({("mlp", "1"): counters(n, 3)}), now=now - 40 + 10 * n)
        scrape_and_store(
            node="b", text=render({("mlp", "1"): counters(n, 5)}), now=now - 36 + 10 * n
        )
    rates = node_request_rates()
    assert rates == {"local": pytest.approx(0.3), "b": pytest.approx(0.5)}
    page = viewer_client.get("/nodes/").content.decode()
    row = page.split('id="node-b"')[1].split("</tr>")[0]
    assert 'data-metric="requests_per_s">0.50<' in row
    idle = page.split('id="node-idle"')[1].split("</tr>")[0]
    assert 'data-metric="requests_per_s"><span class="muted">—</span>' in idle
    assert 'data-metric="requests_per_s_total">0.80<' in page


def test_the_request_rates_cost_one_query_for_any_number_of_nodes(
    django_assert_num_queries, t0, mlp
) -> None:
    for name in ("b", "c", "d"):
        scrape_and_store(node=name, text=recorded("before"), now=t0)
        scrape_and_store(node=name, text=recorded("after"), now=t0 + 10)
    with django_assert_num_queries(1):
        node_request_rates(now=t0 + 20)
    with django_assert_num_queries(4):  # the states, the 1-minute rows, the raw tail, now
        model_metrics(mlp, "6h", now=t0 + 20)["totals"]

"""Try it without Triton: who may do what, refusals before Triton is asked, the pages, the
rate limiter. (The real inference, sweeps and the demo journey are integration tests.)"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.fixtures.registry import served_model
from tests.fixtures.users import token_for
from webapp.registry.catalogue.models import Model
from webapp.registry.tryit import ratelimit
from webapp.registry.tryit.models import TryExample

SIGNATURE = {
    "inputs": [{"name": "x", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 4]}],
    "outputs": [{"name": "y", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 3]}],
}


@pytest.fixture
def served(operator, settings):
    settings.TRITON_URL = settings.TRITON_GRPC_URL = "127.0.0.1:9"  # nothing listens
    return served_model("mlp", operator, SIGNATURE)


def client_for(user) -> Client:
    key = token_for(user)
    return Client(HTTP_AUTHORIZATION=f"Token {key}")


def post(client: Client, path: str, body: object, method: str = "post"):
    return getattr(client, method)(path, data=json.dumps(body), content_type="application/json")


def test_a_viewer_may_infer_and_bad_input_is_refused_before_triton(viewer, served) -> None:
    client = client_for(viewer)
    wrong = post(client, "/api/v1/models/mlp/infer", {"inputs": {"x": [[1, 2, 3]]}})
    assert wrong.status_code == 422 and wrong.json()["input"] == "x"
    missing = post(client, "/api/v1/models/mlp/infer", {"inputs": {}})
    assert missing.status_code == 400 and "x" in missing.json()["error"]
    # A valid request reaches for Triton, which is not there: 503 with a reason, never a 500.
    down = post(client, "/api/v1/models/mlp/infer", {"inputs": {"x": [[1, 2, 3, 4]]}})
    assert down.status_code == 503 and "Triton" in down.json()["error"]


def test_an_oversized_body_is_refused_from_its_declared_length(viewer, served, settings) -> None:
    settings.INFER_MAX_REQUEST_BYTES = 64
    response = post(client_for(viewer), "/api/v1/models/mlp/infer", {"inputs": {"x": [[0] * 40]}})
    assert response.status_code == 413 and "INFER_MAX_REQUEST_BYTES" in response.json()["error"]


def test_viewers_cannot_change_labels_settings_or_start_sweeps(viewer, served) -> None:
    client = client_for(viewer)
    assert post(client, "/api/v1/models/mlp/labels", "a", method="put").status_code == 403
    assert post(client, "/api/v1/models/mlp/try-settings", {}, method="put").status_code == 403
    assert post(client, "/api/v1/models/mlp/sweeps", {"max_concurrency": 2}).status_code == 403
    assert post(client, "/api/v1/demo", {}).status_code == 403
    assert client.get("/api/v1/models/mlp/labels").status_code == 200


def test_examples_belong_to_whoever_saved_them(viewer, operator, served) -> None:
    mine = post(client_for(viewer), "/api/v1/models/mlp/examples", {"name": "a", "inputs": X})
    assert mine.status_code == 201
    other = TryExample.objects.create(model=served, name="b", inputs={}, created_by=operator)
    assert client_for(viewer).delete(f"/api/v1/models/mlp/examples/{other.pk}").status_code == 403
    assert (
        client_for(viewer).delete(f"/api/v1/models/mlp/examples/{mine.json()['id']}").status_code
        == 204
    )
    assert client_for(operator).delete(f"/api/v1/models/mlp/examples/{other.pk}").status_code == 204
    blank = post(client_for(viewer), "/api/v1/models/mlp/examples", {"name": " ", "inputs": {}})
    assert blank.status_code == 400


X = {"x": [[0.1, 0.2, 0.3, 0.4]]}


def _save(user, inputs: object = X, name: str = "ex"):
    return post(client_for(user), "/api/v1/models/mlp/examples", {"name": name, "inputs": inputs})


@pytest.mark.parametrize(
    "inputs",
    [{}, {"x": [[1, 2, 3]]}, {"x": [[0.1, 0.2, 0.3, 0.4]], "other": [1]}, {"x": "eight MB"}],
    ids=["missing input", "wrong shape", "unknown input", "not a tensor"],
)
def test_an_example_that_does_not_fit_the_signature_is_refused(viewer, served, inputs) -> None:
    response = _save(viewer, inputs)
    assert response.status_code in (400, 422), response.content
    assert not TryExample.objects.exists()


def test_an_example_over_the_request_budget_is_refused_unread(viewer, served, settings) -> None:
    settings.INFER_MAX_REQUEST_BYTES = 200
    response = _save(viewer, {"x": [[0.1] * 4] * 40})
    assert response.status_code == 413
    assert not TryExample.objects.exists()


def test_examples_are_capped_per_model_per_person_and_in_bytes(
    viewer, operator, served, settings
) -> None:
    settings.TRY_EXAMPLES_PER_MODEL = 3
    settings.TRY_EXAMPLES_PER_USER = 2
    assert _save(viewer).status_code == 201
    assert _save(viewer).status_code == 201
    third = _save(viewer)
    assert third.status_code == 409 and "TRY_EXAMPLES_PER_USER" in third.json()["error"]
    assert _save(operator).status_code == 201
    fourth = _save(operator)
    assert fourth.status_code == 409 and "TRY_EXAMPLES_PER_MODEL" in fourth.json()["error"]
    TryExample.objects.all().delete()
    settings.TRY_EXAMPLES_PER_USER = 100
    settings.TRY_EXAMPLES_BYTES_PER_MODEL = 80
    assert _save(viewer).status_code == 201  # about 55 bytes
    over = _save(viewer)
    assert over.status_code == 409 and over.json()["code"] == "examples_too_large"


def test_lists_of_examples_never_load_their_tensors(viewer, served) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    TryExample.objects.create(model=served, name="big", inputs={"x": [[0.0] * 4] * 1000})
    response = client_for(viewer).get("/api/v1/models/mlp/examples")
    assert response.json()["examples"][0]["name"] == "big"
    assert "inputs" not in response.json()["examples"][0]
    viewer_page = Client()
    viewer_page.force_login(viewer)
    with CaptureQueriesContext(connection) as queries:
        assert viewer_page.get("/models/mlp/try/").status_code == 200
    example_reads = [q["sql"] for q in queries if "registry_tryexample" in q["sql"]]
    assert example_reads and not any('"inputs"' in sql for sql in example_reads)
    one = client_for(viewer).get(f"/api/v1/models/mlp/examples/{TryExample.objects.get().pk}")
    assert len(one.json()["inputs"]["x"]) == 1000  # a rerun reads one example's tensors


def test_labels_accept_text_and_refuse_binary(operator, served) -> None:
    client = client_for(operator)
    ok = client.put("/api/v1/models/mlp/labels", data="cat\ndog\n", content_type="text/plain")
    assert ok.json()["labels"] == ["cat", "dog"]
    binary = client.put(
        "/api/v1/models/mlp/labels", data=b"\xff\xfe\x00", content_type="text/plain"
    )
    assert binary.status_code == 400


def test_sweep_requests_are_bounded(operator, served, settings) -> None:
    settings.SWEEP_MAX_CONCURRENCY = 4
    client = client_for(operator)
    too_many = post(client, "/api/v1/models/mlp/sweeps", {"max_concurrency": 8})
    assert too_many.status_code == 400 and "SWEEP_MAX_CONCURRENCY" in too_many.json()["error"]
    too_long = post(client, "/api/v1/models/mlp/sweeps", {"max_concurrency": 2, "step_seconds": 99})
    assert too_long.status_code == 400
    Model.objects.filter(pk=served.pk).update(serving_version=None)
    idle = post(client, "/api/v1/models/mlp/sweeps", {"max_concurrency": 2})
    assert idle.status_code == 409 and "not served" in idle.json()["error"]


def test_the_try_and_performance_tabs_render(operator_client, served) -> None:
    page = operator_client.get("/models/mlp/try/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-input="x"' in html and "[batch, 4]" in html and "try-config" in html
    perf = operator_client.get("/models/mlp/perf/")
    assert perf.status_code == 200 and "Start sweep" in perf.content.decode()
    assert operator_client.get("/models/nobody/try/").status_code == 404


def test_an_unserved_model_says_what_to_do(operator_client, operator) -> None:
    Model.objects.create(name="new", created_by=operator)
    html = operator_client.get("/models/new/try/").content.decode()
    assert "Nothing to try yet" in html and "Upload a version" in html


def test_the_empty_models_page_offers_the_demo(operator_client) -> None:
    html = operator_client.get("/models/").content.decode()
    assert "Add the demo model" in html


def test_the_rate_limit_counts_per_key_and_window(settings) -> None:
    settings.LIMITS_REDIS_URL = ""
    ratelimit.check_rate("unit-a", 2, now=120.0)
    ratelimit.check_rate("unit-a", 2, now=121.0)
    with pytest.raises(ratelimit.RateLimited) as refused:
        ratelimit.check_rate("unit-a", 2, now=150.0)
    assert refused.value.retry_after == 30
    ratelimit.check_rate("unit-b", 2, now=150.0)  # another user has their own budget
    ratelimit.check_rate("unit-a", 2, now=180.0)  # a new minute starts afresh
    ratelimit.check_rate("unit-a", 0, now=180.0)  # 0 switches the limit off


def test_reconcile_fails_a_sweep_whose_worker_died(served, operator) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from webapp.registry.jobs.models import Job
    from webapp.registry.serving import reconcile

    old = timezone.now() - timedelta(minutes=30)
    stale = Job.objects.create(
        kind=Job.Kind.SWEEP, model=served, state=Job.State.RUNNING, started=old, created_by=operator
    )
    fresh = Job.objects.create(
        kind=Job.Kind.SWEEP, model=served, state=Job.State.RUNNING, started=timezone.now()
    )
    repairs: list[str] = []
    reconcile._fail_interrupted_jobs(repairs)
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert stale.state == Job.State.FAILED and stale.error_code == "interrupted"
    assert fresh.state == Job.State.RUNNING
    assert any("sweep" in line for line in repairs)


def test_the_header_state_badge_refreshes_as_a_partial(operator_client, served) -> None:
    html = operator_client.get("/models/mlp/?part=state", HTTP_HX_REQUEST="true").content.decode()
    assert html.startswith('<span id="model-state"') and "v1 UNKNOWN" in html
    assert (
        'hx-get="/models/mlp/?part=state"'
        in operator_client.get("/models/mlp/try/").content.decode()
    )

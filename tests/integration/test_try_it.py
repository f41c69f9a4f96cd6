"""Try it through the whole product: the infer API on a real Triton, its refusals, the demo
model's journey from one click to a classified photo, and a performance sweep in a real worker.
"""

from __future__ import annotations

import base64
import io
import json
import time
from pathlib import Path

import numpy as np
import pytest

from tests.fixtures.pipeline import add_version, create_model, mlp_payload, wait_for_job
from tests.fixtures.triton import reference_outputs
from tests.fixtures.waiting import wait_until
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.models import Job
from webapp.registry.performance.models import PerfRun

pytestmark = pytest.mark.integration

DEMO = Path(__file__).resolve().parents[2] / "demo"


@pytest.fixture
def served_mlp(api, celery_worker, triton):
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    served = api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1})
    assert served.status_code == 200, served.json()
    return "mlp"


def infer(api, body, name: str = "mlp"):
    return api("post", f"/api/v1/models/{name}/infer", body)


def test_infer_returns_the_models_own_numbers_with_latency_and_snippets(api, served_mlp) -> None:
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    response = infer(api, {"inputs": {"x": x.tolist()}, "snippets": True})
    assert response.status_code == 200, response.json()
    body = response.json()
    expected = reference_outputs(mlp_payload(1), x)
    (out,) = body["outputs"]
    assert out["name"] == "y" and out["shape"] == [2, 4]
    assert np.allclose(
        np.asarray(out["values"], dtype=np.float32).reshape(2, 4), expected, atol=1e-5
    )
    assert body["version"] == 1 and body["serving"] is True
    assert 0 < body["latency"]["triton_ms"] <= body["latency"]["hub_ms"]
    assert (
        "curl" in body["snippets"]["curl"]
        and "/v2/models/mlp/versions/1/infer" in body["snippets"]["curl"]
    )
    compile(body["snippets"]["python"], "snippet.py", "exec")

    # The same tensor in the other accepted forms gives the same answer.
    raw = base64.b64encode(x.tobytes()).decode()
    as_b64 = infer(api, {"inputs": {"x": {"b64": raw, "shape": [2, 8]}}}).json()
    buffer = io.BytesIO()
    np.save(buffer, x)
    as_npy = infer(
        api, {"inputs": {"x": {"npy_b64": base64.b64encode(buffer.getvalue()).decode()}}}
    )
    assert as_b64["outputs"][0]["values"] == out["values"]
    assert as_npy.json()["outputs"][0]["values"] == out["values"]


def test_the_v2_json_form_is_taken_and_answered_in_v2_form(api, served_mlp) -> None:
    x = np.random.default_rng(4).standard_normal((2, 8)).astype(np.float32)
    body = {
        "id": "req-7",
        "inputs": [{"name": "x", "shape": [2, 8], "datatype": "FP32", "data": x.ravel().tolist()}],
        "outputs": [{"name": "y"}],
    }
    answer = infer(api, body)
    assert answer.status_code == 200, answer.json()
    got = answer.json()
    assert (got["model_name"], got["model_version"], got["id"]) == ("mlp", "1", "req-7")
    (out,) = got["outputs"]
    assert (out["name"], out["datatype"], out["shape"]) == ("y", "FP32", [2, 4])
    expected = reference_outputs(mlp_payload(1), x)
    assert np.allclose(np.asarray(out["data"], dtype=np.float32).reshape(2, 4), expected, atol=1e-5)
    # The model's own checks apply: a datatype other than the model's, a shape that does
    # not fit the data, an output it does not have.
    wrong = dict(body["inputs"][0], datatype="INT64")
    assert infer(api, {"inputs": [wrong]}).json()["code"] == "wrong_dtype"
    short = dict(body["inputs"][0], shape=[3, 8])
    assert infer(api, {"inputs": [short]}).json()["code"] == "wrong_shape"
    unknown = infer(api, {"inputs": body["inputs"], "outputs": [{"name": "z"}]})
    assert unknown.status_code == 400 and unknown.json()["code"] == "unknown_output"


def test_bad_inputs_are_refused_with_reasons(api, served_mlp, settings) -> None:
    ok = [[0.0] * 8]
    cases = {
        "wrong dtype": ({"inputs": {"x": [["a"] * 8]}}, 4),
        "wrong shape": ({"inputs": {"x": [[0.0] * 5]}}, 4),
        "wrong rank": ({"inputs": {"x": [[[0.0] * 8]]}}, 4),
        "missing input": ({"inputs": {}}, 4),
        "extra input": ({"inputs": {"x": ok, "z": ok}}, 4),
        "not an object": ({"inputs": [1, 2]}, 4),
        "base64 garbage": ({"inputs": {"x": {"b64": "@@not base64@@", "shape": [1, 8]}}}, 4),
        "image into a tensor input": ({"inputs": {"x": {"image_b64": "aGVsbG8="}}}, 4),
        "no inputs field": ({"version": 1}, 4),
        "unknown version": ({"inputs": {"x": ok}, "version": 9}, 4),
        "bad top_k": ({"inputs": {"x": ok}, "top_k": 0}, 4),
    }
    for label, (body, family) in cases.items():
        response = infer(api, body)
        assert response.status_code // 100 == family, (label, response.status_code)
        assert response.json()["error"], label
        assert "Traceback" not in response.json()["error"], label

    not_json = api(
        "post", "/api/v1/models/mlp/infer", data="{nope", content_type="application/json"
    )
    assert not_json.status_code == 400 and "JSON" in not_json.json()["error"]

    settings.INFER_MAX_ELEMENTS = 100
    over = infer(api, {"inputs": {"x": [[0.0] * 8] * 20}})
    assert over.status_code == 413 and "100" in over.json()["error"]

    settings.INFER_MAX_REQUEST_BYTES = 1000
    huge = infer(api, {"inputs": {"x": [[0.123456] * 8] * 40}})
    assert huge.status_code == 413 and "INFER_MAX_REQUEST_BYTES" in huge.json()["error"]


def test_the_rate_limit_answers_429_with_retry_after(api, served_mlp, settings) -> None:
    settings.INFER_RATE_PER_MINUTE = 2
    answers = [infer(api, {"inputs": {"x": [[0.0] * 8]}}) for _ in range(4)]
    refused = answers[-1]
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert "per minute" in refused.json()["error"]


def test_a_model_that_is_not_served_says_so(api, celery_worker, triton) -> None:
    create_model(api, "idle")
    response = infer(api, {"inputs": {"x": [[0.0] * 8]}}, name="idle")
    assert response.status_code == 409 and "not served" in response.json()["error"]
    assert infer(api, {"inputs": {}}, name="nobody").status_code == 404


def test_examples_labels_and_preprocessing_round_trip(api, served_mlp) -> None:
    saved = api(
        "post", "/api/v1/models/mlp/examples", {"name": "ones", "inputs": {"x": [[1.0] * 8]}}
    )
    assert saved.status_code == 201
    listed = api("get", "/api/v1/models/mlp/examples").json()["examples"]
    assert [e["name"] for e in listed] == ["ones"]
    again = api("get", f"/api/v1/models/mlp/examples/{saved.json()['id']}").json()
    assert infer(api, {"inputs": again["inputs"]}).status_code == 200
    assert api("delete", f"/api/v1/models/mlp/examples/{saved.json()['id']}").status_code == 204

    labels = api("put", "/api/v1/models/mlp/labels", data="a\nb\nc\nd\n", content_type="text/plain")
    assert labels.status_code == 200 and labels.json()["count"] == 4
    top = infer(api, {"inputs": {"x": [[1.0] * 8]}, "top_k": 2}).json()["outputs"][0]
    assert {row["label"] for row in top["top_k"]} <= {"a", "b", "c", "d"}

    bad = api("put", "/api/v1/models/mlp/try-settings", {"preprocess": {"std": [0, 1, 1]}})
    assert bad.status_code == 400 and bad.json()["error"]
    good = api("put", "/api/v1/models/mlp/try-settings", {"preprocess": {"preset": "efficientnet"}})
    assert good.status_code == 200 and good.json()["preprocess"]["crop"] == 224


def test_a_sweep_measures_each_level_in_a_real_worker(api, served_mlp, celery_worker) -> None:
    started = api("post", "/api/v1/models/mlp/sweeps", {"max_concurrency": 2, "step_seconds": 1})
    assert started.status_code == 202, started.json()
    job = wait_for_job(started.json()["job"], celery_worker, timeout=60)
    assert job.state == Job.State.SUCCEEDED, job.error
    run = PerfRun.objects.get(job=job)
    assert [level["concurrency"] for level in run.levels] == [1, 2]
    for level in run.levels:
        assert level["completed"] > 0 and level["failed"] == 0
        latency = level["latency"]
        assert 0 < latency["p50_ms"] <= latency["p90_ms"] <= latency["p99_ms"]
        assert level["server"]["compute_infer_ms"] > 0
    detail = api("get", f"/api/v1/models/mlp/sweeps/{run.pk}").json()
    assert detail["levels"] == run.levels and detail["state"] == "succeeded"
    # One sweep at a time per model; a second waits for the first.
    assert api("post", "/api/v1/models/mlp/sweeps", {"max_concurrency": 99}).status_code == 400


def test_the_demo_model_goes_from_one_click_to_espresso(api, celery_worker, triton) -> None:
    started = time.monotonic()
    added = api("post", "/api/v1/demo", {})
    assert added.status_code == 201, added.json()
    compile_job = wait_for_job(added.json()["job"], celery_worker, timeout=240)
    assert compile_job.state == Job.State.SUCCEEDED, compile_job.error
    wait_until(
        lambda: Model.objects.get(name="efficientnet-lite0").serving_version is not None, 120,
        interval=0.3, message=lambda: f"not served:\n{celery_worker.log_text()[-3000:]}",
    )  # fmt: skip
    photo = base64.b64encode((DEMO / "images" / "coffee.png").read_bytes()).decode()
    response = infer(api, {"inputs": {"input": {"image_b64": photo}}}, name="efficientnet-lite0")
    assert response.status_code == 200, response.json()
    first = response.json()["outputs"][0]["top_k"][0]
    assert first["label"] == "espresso" and first["probability"] > 0.9
    print(f"demo: one click to espresso in {time.monotonic() - started:.1f} s")
    again = api("post", "/api/v1/demo", {})
    assert again.status_code == 409

    not_a_photo = infer(
        api,
        {"inputs": {"input": {"image_b64": base64.b64encode(b"just text").decode()}}},
        name="efficientnet-lite0",
    )
    assert not_a_photo.status_code == 415 and "image" in not_a_photo.json()["error"]
    assert json.loads(not_a_photo.content)["input"] == "input"


def test_two_versions_answer_side_by_side_once_loaded_beside(
    api,
    served_mlp,
    celery_worker,
) -> None:
    add_version(api, celery_worker, 2)
    x = [[0.5] * 8]
    before = infer(api, {"inputs": {"x": x}, "version": 2})
    assert before.status_code == 409 and before.json()["code"] == "version_not_loaded"

    loaded = api("post", "/api/v1/models/mlp/compare?wait=true", {"version": 2})
    assert loaded.status_code == 200, loaded.json()
    one = infer(api, {"inputs": {"x": x}, "version": 1}).json()["outputs"][0]["values"]
    two = infer(api, {"inputs": {"x": x}, "version": 2}).json()["outputs"][0]["values"]
    x_np = np.asarray(x, dtype=np.float32)
    assert np.allclose(one, reference_outputs(mlp_payload(1), x_np).ravel(), atol=1e-5)
    assert np.allclose(two, reference_outputs(mlp_payload(2), x_np).ravel(), atol=1e-5)
    assert Model.objects.get(name="mlp").compare_version == 2
    # The version being compared cannot be deleted from under Triton.
    assert api("delete", "/api/v1/models/mlp/versions/2").status_code == 409

    dropped = api("post", "/api/v1/models/mlp/compare?wait=true", {"version": None})
    assert dropped.status_code == 200
    assert infer(api, {"inputs": {"x": x}, "version": 2}).status_code == 409
    assert infer(api, {"inputs": {"x": x}}).status_code == 200
    assert Model.objects.get(name="mlp").compare_version is None

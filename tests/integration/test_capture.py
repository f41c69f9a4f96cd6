"""Capture of real requests against a real Triton, through the real web server: the ``/v2``
fast path, Django's ``/v2`` and the infer API each hand sampled calls to the writer, which
keeps the model within its caps; the export gives back exactly what the callers sent and what
Triton answered; a disk that would fill stops capture and never the model."""

from __future__ import annotations

import io

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.fixtures.browser import serve_mlp
from tests.fixtures.pipeline import add_version, create_model, mlp_payload, wait_for_job
from tests.fixtures.triton import reference_outputs

pytestmark = pytest.mark.integration

X = np.random.default_rng(7).standard_normal((2, 8)).astype(np.float32)


@pytest.fixture
def served(api, celery_worker, triton) -> None:  # type: ignore[no-untyped-def]
    serve_mlp(api, celery_worker)


def _v2(address: str, key: str, x: np.ndarray, binary: bool = True) -> np.ndarray:
    client = httpclient.InferenceServerClient(address)
    given = httpclient.InferInput("x", list(x.shape), "FP32")
    given.set_data_from_numpy(x, binary_data=binary)
    wanted = [httpclient.InferRequestedOutput("y", binary_data=binary)]
    answer = client.infer("mlp", [given], outputs=wanted,
                          headers={"Authorization": f"Bearer {key}"})  # fmt: skip
    return np.asarray(answer.as_numpy("y"))


def _drain() -> None:
    from webapp.registry.capture.recorder import RECORDER

    RECORDER.drain()


def test_capture_through_every_path_then_export_what_was_sent(
    web, served, api, viewer_api, settings, celery_worker
) -> None:  # type: ignore[no-untyped-def]
    from webapp.registry.jobs.models import Job

    # Bad settings first: out of range, then a model that serves nothing.
    refused = api("put", "/api/v1/models/mlp/capture", {"sample_rate": 150})
    assert refused.status_code == 400 and "sample_rate" in refused.json()["error"]
    create_model(api, "idle")
    refused = api("put", "/api/v1/models/idle/capture", {"enabled": True})
    assert refused.status_code == 409 and refused.json()["code"] == "not_served"
    assert api("get", "/api/v1/models/mlp/captures.npz").status_code == 409  # nothing yet

    answer = api("put", "/api/v1/models/mlp/capture", {"enabled": True, "sample_rate": 100})
    assert answer.status_code == 200, answer.json()
    assert answer.json()["max_items"] == 1000 and answer.json()["retention_hours"] == 168

    expected = reference_outputs(mlp_payload(1), X)
    for _ in range(4):  # the fast path, binary tensors
        np.testing.assert_allclose(_v2(web, api.key, X), expected, atol=1e-5)
    _v2(web, api.key, X, binary=False)  # the fast path, JSON tensors
    settings.LIMITS_REDIS_URL = ""  # no fast path: Django's /v2 answers
    _v2(web, api.key, X)
    infer = api("post", "/api/v1/models/mlp/infer", {"inputs": {"x": X.tolist()}})
    assert infer.status_code == 200, infer.json()
    _drain()

    listed = api("get", "/api/v1/models/mlp/captures?limit=3").json()
    assert listed["count"] == 7 and len(listed["captures"]) == 3 and listed["next"]
    item = listed["captures"][0]
    assert item["caller"] == "otto" and item["version"] == 1
    assert item["inputs"] == [{"name": "x", "datatype": "float32", "shape": [2, 8]}]
    rest = api("get", listed["next"].split("testserver", 1)[-1]).json()
    assert len(rest["captures"]) == 3 and rest["count"] == 7
    sources = [c["source"] for c in api("get", "/api/v1/models/mlp/captures").json()["captures"]]
    assert sorted(sources) == ["api"] + ["v2"] * 6

    exported = api("get", "/api/v1/models/mlp/captures.npz?version=1")
    assert exported.status_code == 200 and exported["X-Captures"] == "7"
    with np.load(io.BytesIO(exported.content), allow_pickle=False) as archive:
        np.testing.assert_array_equal(archive["inputs.x"], np.concatenate([X] * 7))
        np.testing.assert_allclose(archive["outputs.y"], np.concatenate([expected] * 7),
                                   atol=1e-5)  # fmt: skip
        assert list(archive["rows"]) == [2] * 7

    # A sweep sends the newest captured request instead of random values, and says which.
    sweep = api("post", "/api/v1/models/mlp/sweeps",
                {"mode": "rate", "rates": [20], "step_seconds": 1, "captured": True})  # fmt: skip
    assert sweep.status_code == 202, sweep.json()
    job = wait_for_job(sweep.json()["job"], celery_worker)
    assert job.state == Job.State.SUCCEEDED, job.error
    newest = listed["captures"][0]["id"]
    assert job.log_lines.filter(text__contains=f"captured request {newest}").exists()

    # Viewers see counts, never the requests.
    assert viewer_api("get", "/api/v1/models/mlp/capture").json()["count"] == 7
    assert viewer_api("get", "/api/v1/models/mlp/captures").status_code == 403
    assert viewer_api("get", "/api/v1/models/mlp/captures.npz").status_code == 403

    # One capture kept as a Try it example, then deleted; then all of them purged.
    first = listed["captures"][-1]["id"]
    saved = api("post", f"/api/v1/models/mlp/captures/{first}/example", {"name": "real call"})
    assert saved.status_code == 201, saved.json()
    assert api("delete", f"/api/v1/models/mlp/captures/{first}").status_code == 204
    assert api("delete", "/api/v1/models/mlp/captures").json() == {"removed": 6}
    assert api("get", "/api/v1/models/mlp/capture").json()["count"] == 0


def test_caps_hold_and_a_full_disk_stops_capture_not_the_model(  # type: ignore[no-untyped-def]
    web, served, api, settings, celery_worker
) -> None:
    from webapp.registry.capture.models import Capture
    from webapp.registry.jobs.models import Event

    body = {"sample_rate": 100, "max_items": 3}
    assert api("put", "/api/v1/models/mlp/capture", body).status_code == 200
    for _ in range(6):
        _v2(web, api.key, X)
    _drain()
    shown = api("get", "/api/v1/models/mlp/capture").json()
    assert shown["count"] == 3 and shown["counters"]["trimmed"] == 3
    assert shown["counters"]["written"] == 6
    files = list((settings.MODEL_STORE_ROOT / "captures" / "mlp").glob("*.npz"))
    assert len(files) == 3 == Capture.objects.count()

    # The next version is verified on the captured requests too, and says so.
    add_version(api, celery_worker, 2)
    report = api("get", "/api/v1/models/mlp/versions/2").json()["verification_report"]
    assert report["status"] == "passed"
    assert report["inputs"]["captured"] == 3 and report["samples_used"] == 3 + 4

    settings.CAPTURE_MIN_FREE_BYTES = 1 << 62  # no disk has that much free
    for _ in range(3):
        _v2(web, api.key, X)  # answered all the same
    _drain()
    shown = api("get", "/api/v1/models/mlp/capture").json()
    assert shown["stopped_reason"] == "disk_full" and shown["counters"]["dropped_disk_full"] >= 1
    assert Event.objects.filter(kind="capture.stopped").count() == 1
    # Stopped: the fast path stops sampling too, so nothing more is counted against the disk.
    before = shown["counters"]["dropped_disk_full"]
    _v2(web, api.key, X)
    _drain()
    assert (
        api("get", "/api/v1/models/mlp/capture").json()["counters"]["dropped_disk_full"] == before
    )

"""INT8 from real traffic, end to end: the demo EfficientNet-Lite0 served by a real Triton
through the hub's ``/v2``, every request captured, quantised to INT8 from those captures by a
real Celery worker, checked against the FP32 version on captures the calibration never saw,
then served with the normal switch while clients call it: no request fails.

Budget (docs/testing.md, suite ``quantise``): 240 s summed in CI's parallel run.
"""

from __future__ import annotations

import io
import time

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.fixtures.demo import augmented_crops
from tests.fixtures.gateway_clients import Clients
from tests.fixtures.pipeline import wait_for_job
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.quantise]

NAME = "efficientnet-lite0"


def _v2(
    client: httpclient.InferenceServerClient, key: str, x: np.ndarray, version: str = ""
) -> np.ndarray:
    given = httpclient.InferInput("input", list(x.shape), "FP32")
    given.set_data_from_numpy(x, binary_data=True)
    answer = client.infer(NAME, [given], model_version=version,
                          headers={"Authorization": f"Bearer {key}"})  # fmt: skip
    return np.asarray(answer.as_numpy("logits"))


def _npz_upload(api, arrays: dict[str, np.ndarray]) -> str:  # type: ignore[no-untyped-def]
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    data = buffer.getvalue()
    made = api("post", "/api/v1/uploads", {"filename": "calibration.npz", "size": len(data)})
    assert made.status_code == 201, made.json()
    upload_id = made.json()["id"]
    sent = api("put", f"/api/v1/uploads/{upload_id}", raw=data, headers={"Upload-Offset": "0"})
    assert sent.status_code == 200, sent.content
    return str(upload_id)


def test_quantise_from_captured_traffic_then_switch_without_a_failed_request(
    web, api, viewer_api, celery_worker, triton
) -> None:  # type: ignore[no-untyped-def]
    from webapp.registry.capture.recorder import RECORDER
    from webapp.registry.catalogue.models import Model
    from webapp.registry.jobs.models import Job

    started = time.monotonic()
    added = api("post", "/api/v1/demo", {})
    assert added.status_code == 201, added.json()
    assert (
        wait_for_job(added.json()["job"], celery_worker, timeout=240).state == Job.State.SUCCEEDED
    )
    wait_until(lambda: Model.objects.get(name=NAME).serving_version == 1, 120, interval=0.3)

    # Too early: nothing captured yet, so nothing to calibrate on (the number needed is said).
    early = api("post", f"/api/v1/models/{NAME}/versions/1/revise", {"quantize": {}})
    assert early.status_code == 409 and early.json()["code"] == "too_few_inputs"
    assert "32" in early.json()["error"]

    assert api("put", f"/api/v1/models/{NAME}/capture", {"sample_rate": 100}).status_code == 200
    crops = augmented_crops(64, seed=3)
    client = httpclient.InferenceServerClient(web, network_timeout=60)
    fp32 = [_v2(client, api.key, x) for x in crops]
    RECORDER.drain()
    assert api("get", f"/api/v1/models/{NAME}/capture").json()["count"] == 64

    # Refusals: a bad field, and a calibration file that does not fit the signature.
    bad = api("post", f"/api/v1/models/{NAME}/versions/1/revise",
              {"quantize": {"max_items": 8}})  # fmt: skip
    assert bad.status_code == 400 and "max_items" in bad.json()["error"]
    wrong = _npz_upload(api, {"input": np.zeros((40, 3, 64, 64), np.float32)})
    refused = api("post", f"/api/v1/models/{NAME}/versions/1/revise",
                  {"quantize": {"calibration": {"upload_id": wrong}}})  # fmt: skip
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_calibration"
    assert "224" in refused.json()["error"]

    asked = api("post", f"/api/v1/models/{NAME}/versions/1/revise",
                {"quantize": {"method": "static", "calibration": "captures"}})  # fmt: skip
    assert asked.status_code == 201, asked.json()
    assert asked.json()["quantization"]["calibration"] == {
        "source": "captures", "items": 64, "calibrate": 48, "held_out": 16,
    }  # fmt: skip
    job = wait_for_job(asked.json()["job"], celery_worker, timeout=300)
    assert job.state == Job.State.SUCCEEDED, f"{job.error}\n{celery_worker.log_text()[-3000:]}"

    v2 = api("get", f"/api/v1/models/{NAME}/versions/2").json()
    assert v2["quantized"] and v2["publishable"], v2["verification_report"]
    report = v2["verification_report"]
    assert report["precision"] == "int8" and report["samples_used"] == 16
    assert report["inputs"]["held_out"] == 16
    result = v2["quantization"]["result"]
    assert not set(result["calibration_ids"]) & set(result["held_out_ids"])
    assert result["quantized_bytes"] * 3 < result["source_bytes"]
    logits = report["outputs"][0]
    print(
        f"INT8 on 16 held-out captures: top-1 {logits['top1_agreement']:.0%}, top-5 "
        f"{logits['topk_overlap']:.0%}, cosine {logits['cosine']:.4f}; "
        f"{result['source_bytes'] / 1e6:.1f} -> {result['quantized_bytes'] / 1e6:.1f} MB"
    )
    assert logits["top1_agreement"] >= 0.9 and logits["cosine"] >= 0.99

    again = api("post", f"/api/v1/models/{NAME}/versions/2/revise", {"quantize": {}})
    assert again.status_code == 409 and again.json()["code"] == "already_quantized"

    # The switch under traffic: both versions' answers known first, through Triton itself.
    loaded = api("post", f"/api/v1/models/{NAME}/compare?wait=true", {"version": 2})
    assert loaded.status_code == 200, loaded.json()
    x = crops[-1]
    references = {1: _v2(client, api.key, x, "1"), 2: _v2(client, api.key, x, "2")}
    np.testing.assert_allclose(references[1], fp32[-1], atol=1e-4)
    assert not np.allclose(references[1], references[2], atol=1e-5)
    # The clients are another person: the operator's own slow requests are limited.
    with Clients(web, viewer_api.key, references, x, model=NAME, input="input",
                 output="logits") as clients:  # fmt: skip
        wait_until(lambda: len(clients.answers) >= 10, 60, interval=0.1)
        served = api("post", f"/api/v1/models/{NAME}/serve?wait=true", {"version": 2})
        assert served.status_code == 200, served.json()
        switched = time.monotonic()
        wait_until(lambda: len([a for a in clients.answers if a[0] > switched]) >= 10, 60,
                   interval=0.1)  # fmt: skip
    assert clients.failures() == []
    assert clients.versions_after(switched) == {2}
    print(f"{len(clients.answers)} calls during the switch, none failed; "
          f"{time.monotonic() - started:.0f} s in all")  # fmt: skip

"""The compile job end to end: API upload -> a real Celery worker over a real Redis runs
validate -> compile -> verify -> package -> the packaged version loads and infers in a real
Triton. Bad models fail with a reason and leave nothing in the repository."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pytest

from tests.fixtures.pipeline import create_model, upload, wait_for_job
from tests.fixtures.triton import mlp_onnx_bytes, reference_outputs, wait_for_state
from webapp.registry.catalogue.models import Version
from webapp.registry.jobs.models import Job

pytestmark = pytest.mark.integration


def test_an_uploaded_model_is_validated_compiled_verified_and_packaged(
    api, celery_worker, embedded_triton
) -> None:
    create_model(api, "mlp")
    payload = mlp_onnx_bytes(in_features=16, out_features=10)
    response = upload(api, "mlp", payload)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["version"] == 1

    job = wait_for_job(body["job"], celery_worker)
    assert job.state == Job.State.SUCCEEDED, (job.error, celery_worker.log_text()[-3000:])
    assert [s["state"] for s in job.steps] == ["done", "done", "done", "done"]
    lines = [line.text for line in job.log_lines.all()]
    assert any("Packaged as mlp/1/model.onnx" in text for text in lines)

    version = Version.objects.get(model__name="mlp", number=1)
    assert version.status == Version.Status.READY and version.publishable
    assert version.verification["status"] == "passed"
    assert version.signature["inputs"][0]["name"] == "x"
    assert 'backend: "onnxruntime"' in version.config_pbtxt

    # What the API reports is what the database holds.
    detail = api("get", "/api/v1/models/mlp/versions/1").json()
    assert detail["status"] == "ready" and detail["verification_report"]["status"] == "passed"
    job_body = api("get", f"/api/v1/jobs/{body['job']}").json()
    assert job_body["state"] == "succeeded" and job_body["log"]

    # The packaged version is a valid Triton model: serve it in a real Triton and compare.
    package = celery_worker.store / "sources" / "mlp" / "1" / "package"
    assert (celery_worker.store / "repository" / "mlp" / "1" / "model.onnx").is_file()
    shutil.copytree(package, embedded_triton.repository / "mlp_packaged")
    config = (package / "config.pbtxt").read_text().replace('name: "mlp"', 'name: "mlp_packaged"')
    (embedded_triton.repository / "mlp_packaged" / "config.pbtxt").write_text(config)
    embedded_triton.runtime.load("mlp_packaged")
    wait_for_state(embedded_triton.runtime, "mlp_packaged", "READY", timeout=60)
    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    got = embedded_triton.runtime.infer("mlp_packaged", {"x": x})["y"]
    np.testing.assert_allclose(got, reference_outputs(payload, x), rtol=1e-5, atol=1e-5)
    embedded_triton.runtime.unload("mlp_packaged")


def test_the_same_file_twice_is_recognised_as_a_duplicate(api, celery_worker) -> None:
    create_model(api, "dup")
    payload = mlp_onnx_bytes()
    first = upload(api, "dup", payload)
    assert first.status_code == 201
    second = upload(api, "dup", payload)
    assert second.status_code == 409
    assert second.json()["code"] == "duplicate"
    assert "already version 1" in second.json()["error"]


def _model_with(op: str = "Relu", domain: str = "", opset: int = 13) -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], domain=domain)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    imports = [helper.make_opsetid("", opset)] + (
        [helper.make_opsetid(domain, 1)] if domain else []
    )
    return helper.make_model(graph, opset_imports=imports, ir_version=8).SerializeToString()


def _zip(members: dict[str, bytes]) -> bytes:
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("payload", "filename", "reason"),
    [
        (b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "photo.onnx", "not"),
        (b"name,score\n1,2\n" * 20, "table.onnx", ""),
        (mlp_onnx_bytes()[:200], "truncated.onnx", ""),
        (bytes(np.random.default_rng(0).integers(0, 255, 4096, dtype=np.uint8)), "random.onnx", ""),
        (_model_with(op="NoSuchOp"), "unknown-op.onnx", "NoSuchOp"),
        (_model_with(op="Frobnicate", domain="com.example"), "custom-domain.onnx", "Frobnicate"),
        (_model_with(opset=99), "future-opset.onnx", "99"),
        (_zip({"readme.txt": b"hello"}), "not-a-bundle.zip", ".onnx"),
        (_zip({"../evil.onnx": mlp_onnx_bytes()}), "escape.zip", ""),
    ],
)
def test_a_bad_model_fails_validation_with_a_reason_and_nothing_is_packaged(
    api, celery_worker, payload: bytes, filename: str, reason: str
) -> None:
    create_model(api, "bad")
    response = upload(api, "bad", payload, filename)
    assert response.status_code == 201, response.content
    job = wait_for_job(response.json()["job"], celery_worker)
    assert job.state == Job.State.FAILED, job.error
    assert job.error_code in {"invalid_model", "invalid_upload"}, (job.error_code, job.error)
    assert reason in job.error
    assert job.version.status == Version.Status.FAILED
    assert not (celery_worker.store / "repository" / "bad").exists()
    assert not (celery_worker.store / "work").exists() or not any(
        (celery_worker.store / "work").iterdir()
    )


def test_a_supplied_sample_is_verified_and_a_misfit_sample_is_refused(api, celery_worker) -> None:
    create_model(api, "sampled")
    payload = mlp_onnx_bytes(in_features=4, out_features=3)
    good = api(
        "post", "/api/v1/models/sampled/versions",
        data={"file": _named(payload), "sample": json.dumps({"x": [[0.5, -1.0, 2.0, 0.0]]})},
    )  # fmt: skip
    assert good.status_code == 201, good.content
    job = wait_for_job(good.json()["job"], celery_worker)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.version.verification["samples_used"] >= 5  # 4 random + the supplied one
    bad = api(
        "post", "/api/v1/models/sampled/versions",
        data={"file": _named(payload), "sample": json.dumps({"x": [[1.0, 2.0]]}),
              "allow_duplicate": "true"},
    )  # fmt: skip
    job = wait_for_job(bad.json()["job"], celery_worker)
    assert job.state == Job.State.FAILED and job.error_code == "invalid_sample"
    assert "sample" in job.error


def _named(payload: bytes, name: str = "model.onnx") -> io.BytesIO:
    file = io.BytesIO(payload)
    file.name = name
    return file

"""Asking for an INT8 version: the request's refusals (body, version, inputs), the calibration
file's headers against the signature, the page, and the Ascend answer read from host reports.
The quantisation itself runs in tests/integration/test_quantize.py."""

from __future__ import annotations

import io
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.test import Client

from model_store.onnx_info import inspect_onnx
from model_store.targets import get_target
from tests.fixtures.pipeline import mlp_payload
from webapp.errors import HubError
from webapp.nodes.models import HostReport
from webapp.registry.capture import actions as capture_actions
from webapp.registry.capture import recorder
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs.models import Event, Job
from webapp.registry.performance.actions.revisions import request_revision
from webapp.registry.quantize import actions, calibration

pytestmark = pytest.mark.django_db


@pytest.fixture
def packaged(operator: Any, settings: Any, tmp_path: Path) -> Version:
    """A packaged onnxruntime MLP (x: [-1, 8] -> y) with its source in the store."""
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    settings.CAPTURE_MIN_FREE_BYTES = 0
    recorder.forget_rates()
    source = get_store().source_dir("mlp", 1)
    source.mkdir(parents=True)
    (source / "model.onnx").write_bytes(mlp_payload(1))
    info = inspect_onnx(source / "model.onnx")
    options = get_target("onnxruntime").parse_options({}, info=info)
    model = Model.objects.create(
        name="mlp", target="onnxruntime", created_by=operator, serving_version=1
    )
    signature = {
        "inputs": [{"name": t.name, "dtype": t.triton_type, "numpy": t.numpy_dtype,
                    "dims": t.dims} for t in info.inputs],
        "outputs": [{"name": t.name, "dtype": t.triton_type, "numpy": t.numpy_dtype,
                     "dims": t.dims} for t in info.outputs],
    }  # fmt: skip
    version = Version.objects.create(
        model=model, number=1, status=Version.Status.READY, source_filename="model.onnx",
        source_sha256="0" * 64, source_size=1, options=options, artifact_name="model.onnx",
        signature=signature, verification={"status": "passed"}, created_by=operator,
    )  # fmt: skip
    capture_actions.set_policy(model, capture_actions.PolicyIn(), operator)
    return version


def _capture(count: int, width: int = 8) -> None:
    for index in range(count):
        x = np.full((1, width), index, dtype=np.float32)
        item = recorder.Item("mlp", 1, "otto", 1.0, "v2", inputs={"x": x}, outputs={"y": x[:, :4]})
        assert recorder.write(item) == "written"


def _refused(call: Any) -> HubError:
    with pytest.raises(HubError) as caught:
        call()
    return caught.value


# -- the body ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ([], "must be an object"),
        ({"colour": "red"}, "Unknown quantize field(s): colour"),
        ({"method": "dynamic"}, 'Only "static"'),
        ({"calibration": "photos"}, "calibration must be"),
        ({"calibration": {"upload_id": ""}}, "calibration must be"),
        ({"calibration": {"upload_id": "a", "path": "/etc"}}, "calibration must be"),
        ({"max_items": 31}, "max_items must be from 32 to 2048"),
        ({"max_items": 5000}, "max_items must be from 32 to 2048"),
        ({"max_items": True}, "whole number"),
        ({"calibrate_method": "guess"}, "calibrate_method"),
        ({"activations": "int4"}, "activations"),
        ({"per_channel": "yes"}, "per_channel"),
        ({"exclude_nodes": "conv1"}, "exclude_nodes"),
    ],
)
def test_a_wrong_body_is_refused_with_the_field_named(body: Any, words: str) -> None:
    refused = _refused(lambda: actions.parse(body))
    assert refused.status == 400 and words in refused.message


def test_defaults_are_static_on_captures_256_items_minmax_per_channel() -> None:
    wanted = actions.parse({})
    assert (wanted.source, wanted.max_items) == ("captures", 256)
    assert (wanted.plan.calibration, wanted.plan.activations, wanted.plan.per_channel) == (
        "minmax", "int8", True,
    )  # fmt: skip


# -- the version and its inputs ---------------------------------------------------------------


def test_too_few_captures_say_how_many_are_needed(packaged: Version, operator: Any) -> None:
    _capture(20)
    _capture(5, width=3)  # another signature: does not count
    refused = _refused(lambda: actions.request_quantization(packaged, {}, operator))
    assert refused.status == 409 and refused.code == "too_few_inputs"
    assert "20 inputs are too few" in refused.message and "12 more" in refused.message
    assert not Version.objects.filter(number=2).exists()


def test_the_request_makes_the_next_version_with_the_split(
    packaged: Version, operator: Any
) -> None:
    _capture(40)
    revision, job, record = actions.request_quantization(packaged, {"max_items": 36}, operator)
    assert revision.number == 2 and revision.revision_of == packaged
    assert record["calibration"] == {"source": "captures", "items": 36, "calibrate": 27,
                                     "held_out": 9}  # fmt: skip
    chosen = job.params["quantize"]["chosen"]
    assert len(chosen["ids"]) == 36 and chosen["ids"] == sorted(chosen["ids"])  # oldest first
    assert job.kind == Job.Kind.COMPILE
    assert [s["name"] for s in job.steps][:2] == ["validate", "compile"]
    assert Event.objects.filter(kind="version.quantize_requested", version=revision).exists()
    assert revision.to_dict()["quantized"] is True

    # INT8 already: refused; and a config change that would rebuild it from FP32 is refused.
    revision.status = Version.Status.READY
    revision.save()
    again = _refused(lambda: actions.request_quantization(revision, {}, operator))
    assert again.status == 409 and again.code == "already_quantized"
    rebuild = _refused(lambda: request_revision(revision, {"fp16": True}, operator))
    assert rebuild.code == "quantized_rebuild" and "Revise version 1" in rebuild.message


def test_unknown_nodes_to_exclude_are_named(packaged: Version, operator: Any) -> None:
    _capture(40)
    refused = _refused(
        lambda: actions.request_quantization(packaged, {"exclude_nodes": ["nope"]}, operator)
    )
    assert refused.status == 400 and "nope" in refused.message


def test_an_fp16_or_unpackaged_version_is_refused(packaged: Version, operator: Any) -> None:
    packaged.options = {**packaged.options, "fp16": True}
    packaged.save()
    assert _refused(lambda: actions.check_version(packaged)).code == "not_fp32"
    packaged.options = {**packaged.options, "fp16": False}
    packaged.status = Version.Status.COMPILING
    packaged.save()
    assert _refused(lambda: actions.check_version(packaged)).code == "not_ready"


def test_viewers_cannot_quantise(packaged: Version, viewer: Any) -> None:
    assert _refused(lambda: actions.request_quantization(packaged, {}, viewer)).status == 403


# -- a calibration file -----------------------------------------------------------------------


def _npz(path: Path, **arrays: Any) -> Path:
    with path.open("wb") as fh:
        np.savez(fh, **arrays)
    return path


def test_an_npz_fits_by_name_or_by_the_exports_name(packaged: Version, tmp_path: Path) -> None:
    plain = _npz(tmp_path / "a.npz", x=np.zeros((50, 8), np.float32))
    assert calibration.upload_keys(packaged, plain, 256) == ({"x": "x"}, 50)
    exported = _npz(tmp_path / "b.npz", **{"inputs.x": np.zeros((40, 8), np.float32),
                                           "capture_ids": np.arange(40)})  # fmt: skip
    assert calibration.upload_keys(packaged, exported, 256) == ({"x": "inputs.x"}, 40)


@pytest.mark.parametrize(
    ("arrays", "words"),
    [
        ({"y": np.zeros((40, 8), np.float32)}, "no array for input x"),
        ({"x": np.zeros((40, 8), np.float64)}, "is float64; input x takes float32"),
        ({"x": np.zeros((40, 7), np.float32)}, "do not fit input x"),
        ({"x": np.zeros((40, 2, 8), np.float32)}, "do not fit input x"),
        ({"x": np.float32(1.0)}, "do not fit input x"),
    ],
)
def test_an_npz_that_does_not_fit_is_refused(
    packaged: Version, tmp_path: Path, arrays: Any, words: str
) -> None:
    path = _npz(tmp_path / "c.npz", **arrays)
    refused = _refused(lambda: calibration.upload_keys(packaged, path, 256))
    assert (
        refused.status == 400 and refused.code == "invalid_calibration" and words in refused.message
    )


def test_a_file_that_is_no_npz_or_holds_objects_is_refused(
    packaged: Version, tmp_path: Path
) -> None:
    text = tmp_path / "d.npz"
    text.write_text("not a zip")
    assert (
        "not a readable .npz"
        in _refused(lambda: calibration.upload_keys(packaged, text, 9)).message
    )
    objects = tmp_path / "e.npz"
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(objects, "w") as archive:
        archive.writestr("x.npy", buffer.getvalue())
    refused = _refused(lambda: calibration.upload_keys(packaged, objects, 9))
    assert "object arrays" in refused.message


def test_an_upload_calibrates_and_is_spent(
    packaged: Version, operator: Any, tmp_path: Path
) -> None:
    from webapp.registry.catalogue.storage import get_uploads

    data = io.BytesIO()
    np.savez(data, x=np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32))
    uploads = get_uploads()
    upload = uploads.create("calib.npz", len(data.getvalue()), owner=str(operator.pk))
    uploads.write_chunk(upload.id, 0, io.BytesIO(data.getvalue()), len(data.getvalue()))
    wrong_sum = {"calibration": {"upload_id": upload.id, "sha256": "0" * 64}}
    assert _refused(lambda: actions.request_quantization(packaged, wrong_sum, operator)).code == (
        "upload_corrupt"
    )
    upload = uploads.create("calib.npz", len(data.getvalue()), owner=str(operator.pk))
    uploads.write_chunk(upload.id, 0, io.BytesIO(data.getvalue()), len(data.getvalue()))
    body = {"calibration": {"upload_id": upload.id}}
    revision, job, record = actions.request_quantization(packaged, body, operator)
    assert record["calibration"]["items"] == 64
    kept = Path(job.params["quantize"]["chosen"]["upload_path"])
    assert kept.is_file() and kept.parent.parent.name == job.uuid.hex
    chosen = calibration.Chosen.from_params(job.params["quantize"]["chosen"])
    rows = list(calibration.load(revision, chosen))
    assert len(rows) == 64 and rows[0][1]["x"].shape == (1, 8)
    assert upload.id not in uploads.list_ids()


# -- the page and Ascend ----------------------------------------------------------------------


def test_the_page_counts_inputs_and_an_ascend_model_says_not_available(
    packaged: Version, operator_client: Client, operator: Any
) -> None:
    _capture(3)
    version_page = operator_client.get("/models/mlp/versions/1/").content.decode()
    assert 'href="/models/mlp/versions/1/quantize/"' in version_page
    page = operator_client.get("/models/mlp/versions/1/quantize/").content.decode()
    assert "3 fit this version" in page and "At least 32 are needed" in page
    answer = operator_client.post("/models/mlp/versions/1/quantize/", {"calibration": "captures"})
    assert answer.status_code == 409 and "3 inputs are too few" in answer.json()["error"]
    _capture(40)
    form = {"calibration": "captures", "max_items": "40", "calibrate_method": "percentile",
            "activations": "uint8", "exclude_nodes": ""}  # fmt: skip
    made = operator_client.post("/models/mlp/versions/1/quantize/", form)  # per_channel unchecked
    assert made.status_code == 201 and made.json()["job_url"].startswith("/jobs/")
    plan = Version.objects.get(model__name="mlp", number=2).quantization["plan"]
    assert plan == {"calibrate_method": "percentile", "activations": "uint8",
                    "per_channel": False, "exclude_nodes": []}  # fmt: skip

    npu = Model.objects.create(name="npu", target="acl", created_by=operator)
    Version.objects.create(
        model=npu, number=1, status=Version.Status.READY, source_filename="m.onnx",
        source_sha256="1" * 64, source_size=1,
    )  # fmt: skip
    page = operator_client.get("/models/npu/versions/1/quantize/").content.decode()
    assert "not available on this host: no build node reports either tool" in page
    assert 'id="upload-form"' not in page

    made_at = datetime.now(tz=UTC)
    absent = {"state": "absent", "version": "", "python": "", "reason": ""}
    HostReport.objects.create(node="b", made_at=made_at, data={"quantise": {
        "amct": {"state": "present", "version": "8.0.0", "python": "/x/python3", "reason": ""},
        "msmodelslim": absent,
    }})  # fmt: skip
    page = operator_client.get("/models/npu/versions/1/quantize/").content.decode()
    assert "Found on a build node: AMCT 8.0.0 (b)" in page and "not built in this release" in page
    assert 'id="upload-form"' not in page

"""A packaged version's tar, downloaded through the API, checked and unpacked by
``safe_extract`` into a fresh directory, is loaded by another real Triton, which answers as
onnxruntime in this process does: the tar is a complete Triton repository entry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from model_store.config import render_pbtxt
from model_store.onnx_info import inspect_onnx
from model_store.package_tar import safe_extract
from model_store.store import ModelStore
from model_store.targets import get_target
from tests.fixtures.triton import (
    mlp_onnx_bytes,
    reference_outputs,
    started_triton,
    wait_for_state,
)
from webapp.registry.catalogue.models import Model, Version

pytestmark = pytest.mark.integration

X = np.random.default_rng(11).standard_normal((2, 4)).astype(np.float32)


def _package_as_the_pipeline_does(store: ModelStore, tmp_path: Path, payload: bytes) -> None:
    """Version 2 of "handed": the onnxruntime target's own config, packaged and installed."""
    artifact = tmp_path / "built" / "model.onnx"
    artifact.parent.mkdir()
    artifact.write_bytes(payload)
    config = get_target("onnxruntime").make_config("handed", inspect_onnx(artifact), {}, 2)
    store.package_version(
        "handed", 2, files={"model.onnx": artifact}, config_text=render_pbtxt(config), install=True
    )


def test_the_downloaded_tar_unpacked_elsewhere_is_served_by_another_triton(
    api, operator, settings, tmp_path: Path
) -> None:
    settings.MODEL_STORE_ROOT = tmp_path / "hub"
    store = ModelStore(tmp_path / "hub")
    store.ensure_layout()
    payload = mlp_onnx_bytes(seed=5)
    _package_as_the_pipeline_does(store, tmp_path, payload)
    model = Model.objects.create(name="handed", target="onnxruntime", created_by=operator)
    Version.objects.create(
        model=model, number=2, status=Version.Status.READY, source_filename="model.onnx",
        source_sha256="0" * 64, source_size=len(payload), artifact_name="model.onnx",
    )  # fmt: skip

    response = api("get", "/api/v1/models/handed/versions/2/package.tar")
    assert response.status_code == 200
    received = tmp_path / "elsewhere" / "handed-v2.tar"
    received.parent.mkdir()
    with received.open("wb") as out:
        for piece in response.streaming_content:
            out.write(piece)

    other = tmp_path / "elsewhere"
    unpacked = safe_extract(received, other / ".staging", response["X-Content-SHA256"])
    repository = other / "repository"
    repository.mkdir()
    unpacked.model_dir.rename(repository / unpacked.model)

    with started_triton(other, repository) as triton:
        runtime = triton.runtime()
        try:
            runtime.load("handed")
            wait_for_state(runtime, "handed", "READY", version="2", timeout=60)
            answer = runtime.infer("handed", {"x": X})["y"]
        finally:
            runtime.close()
    np.testing.assert_allclose(answer, reference_outputs(payload, X), rtol=1e-5, atol=1e-5)

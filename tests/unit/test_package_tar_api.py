"""``GET|HEAD /api/v1/models/{name}/versions/{n}/package.tar`` and the version page's link.

The tar's format, cache and safe unpacking are tested in tests/unit/model_store/; here: who
may download, the answers when there is nothing to download, and that every header carrying
the SHA-256 matches the bytes sent. A real Triton loading the download:
tests/integration/test_package_tar_triton.py.
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from model_store.config import ModelConfig, TensorSpec, render_pbtxt
from model_store.store import ModelStore
from tests.fixtures.users import PASSWORD, signed_in
from webapp.registry.catalogue.models import Model, Version

URL = "/api/v1/models/mlp/versions/{}/package.tar"
SIG = {"inputs": [{"name": "x", "dtype": "TYPE_FP32", "dims": ["batch", 4]}],
       "outputs": [{"name": "y", "dtype": "TYPE_FP32", "dims": ["batch", 3]}]}  # fmt: skip


@pytest.fixture
def store(settings, tmp_path: Path) -> ModelStore:
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    return ModelStore(tmp_path / "store")


@pytest.fixture
def model(operator, store) -> Model:
    return Model.objects.create(name="mlp", target="onnxruntime", created_by=operator)


def add_version(model: Model, number: int, status: str = "ready") -> Version:
    return Version.objects.create(
        model=model, number=number, status=status, source_filename="m.onnx",
        source_sha256=f"{number:064d}", source_size=10, signature=SIG,
        verification={"status": "passed"}, artifact_name="model.onnx",
    )  # fmt: skip


def package(store: ModelStore, tmp_path: Path, number: int) -> bytes:
    """Packages version ``number`` as the pipeline lays it out; returns the model's bytes."""
    payload = f"graph of version {number}".encode() * 1000
    built = tmp_path / f"built-{number}.onnx"
    built.write_bytes(payload)
    cfg = ModelConfig(
        name="mlp", backend="onnxruntime", max_batch_size=8,
        inputs=[TensorSpec("x", "TYPE_FP32", [4])], outputs=[TensorSpec("y", "TYPE_FP32", [3])],
    )  # fmt: skip
    store.ensure_layout()
    store.package_version(
        "mlp", number, files={"model.onnx": built}, config_text=render_pbtxt(cfg), install=True
    )
    return payload


@pytest.fixture
def packaged(model, store, tmp_path) -> bytes:
    add_version(model, 1)
    return package(store, tmp_path, 1)


def body_of(response) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(response.streaming_content)


def test_the_download_is_the_tar_with_its_sha256_in_every_header(api, packaged: bytes) -> None:
    response = api("get", URL.format(1))

    assert response.status_code == 200
    assert response.streaming  # sent from the file on disk, never read into memory
    data = body_of(response)
    sha = hashlib.sha256(data).hexdigest()
    assert response["Content-Type"] == "application/x-tar"
    assert response["Content-Disposition"] == 'attachment; filename="mlp-v1.tar"'
    assert int(response["Content-Length"]) == len(data)
    assert response["X-Content-SHA256"] == sha
    assert response["Repr-Digest"] == f"sha-256=:{base64.b64encode(bytes.fromhex(sha)).decode()}:"
    assert response["ETag"] == f'"sha256-{sha}"'
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert tar.getnames() == ["mlp", "mlp/1", "mlp/1/model.onnx", "mlp/config.pbtxt"]
        member = tar.extractfile("mlp/1/model.onnx")
        assert member is not None and member.read() == packaged


def test_the_second_download_sends_the_same_bytes(api, packaged: bytes) -> None:
    first = body_of(api("get", URL.format(1)))
    second = api("get", URL.format(1))
    assert body_of(second) == first
    assert second["X-Content-SHA256"] == hashlib.sha256(first).hexdigest()


def test_head_answers_the_headers_without_the_body(api, packaged: bytes) -> None:
    head = api("head", URL.format(1))
    assert head.status_code == 200
    assert head.content == b""
    get = api("get", URL.format(1))
    for header in ("Content-Length", "Content-Disposition", "X-Content-SHA256", "Repr-Digest"):
        assert head[header] == get[header]


def test_anyone_who_may_read_the_model_may_download_it(viewer_api, packaged: bytes) -> None:
    assert viewer_api("get", URL.format(1)).status_code == 200
    nobody = signed_in(get_user_model().objects.create_user("nemo", password=PASSWORD))
    assert nobody.get(URL.format(1)).status_code == 403
    assert Client().get(URL.format(1)).status_code == 401


def test_a_version_not_packaged_yet_is_a_conflict(api, model) -> None:
    add_version(model, 1, status="compiling")
    response = api("get", URL.format(1))
    assert response.status_code == 409
    assert response.json()["code"] == "not_packaged"
    assert "compiling" in response.json()["error"]


def test_a_version_or_package_that_is_not_there_is_not_found(api, model) -> None:
    assert api("get", URL.format(9)).json()["code"] == "not_found"
    add_version(model, 1)  # "ready", but its package is gone from the store
    response = api("get", URL.format(1))
    assert response.status_code == 404
    assert response.json()["code"] == "package_missing"
    assert "Package the version again" in response.json()["error"]


def test_a_tar_that_would_fill_the_disk_is_refused(api, packaged: bytes, settings) -> None:
    settings.STORE_MIN_FREE_BYTES = 1 << 60
    response = api("get", URL.format(1))
    assert response.status_code == 507
    assert response.json()["code"] == "insufficient_storage"


def test_only_get_and_head_are_served(api, packaged: bytes) -> None:
    response = api("post", URL.format(1), {})
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


def test_the_version_page_links_the_tar_and_shows_its_hash_once_built(
    viewer_client: Client, api, packaged: bytes
) -> None:
    page = viewer_client.get("/models/mlp/versions/1/").content.decode()
    assert f'href="{URL.format(1)}"' in page
    assert "computed on the first download" in page

    sha = api("get", URL.format(1))["X-Content-SHA256"]
    page = viewer_client.get("/models/mlp/versions/1/").content.decode()
    assert sha in page and "Download package (.tar" in page


def test_the_page_offers_no_tar_before_the_version_is_packaged(
    viewer_client: Client, model
) -> None:
    add_version(model, 1, status="compiling")
    page = viewer_client.get("/models/mlp/versions/1/").content.decode()
    assert "package.tar" not in page

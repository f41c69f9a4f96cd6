"""GET /api/v1/models/{name}/memory-estimate and the estimate on the version page."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from django.test import Client

from model_store.config import ModelConfig, TensorSpec, render_pbtxt
from tests.fixtures.hosts import worker_probes_host
from tests.fixtures.openapi import inline
from tests.fixtures.triton import mlp_onnx_bytes
from tests.fixtures.users import token_for
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.storage import get_store

SAMPLES = Path(__file__).parent / "npu_smi"
MIB = 1 << 20


@pytest.fixture
def store(settings, tmp_path: Path) -> Path:
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    settings.TRITON_URL = "127.0.0.1:9"
    return tmp_path / "store"


@pytest.fixture
def no_npu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    worker_probes_host()


@pytest.fixture
def fake_910b(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two 910B1 chips: NPU 6 with 6180 MiB of HBM free, NPU 7 with 62218 MiB free."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "npu-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$2" = "-t" ]; then cat \'{SAMPLES / "usages_910b.txt"}\'; '
        f"else cat '{SAMPLES / '910b_two_chips.txt'}'; fi\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    worker_probes_host()


def make_version(
    target: str = "onnxruntime",
    *,
    instances: int = 1,
    max_batch: int = 8,
    parameters: dict[str, str] | None = None,
    artifact_size: int | None = None,
    signature: bool = True,
) -> Version:
    model = Model.objects.create(name="mlp", target=target)
    config = ModelConfig(
        name="mlp",
        backend=target,
        max_batch_size=max_batch,
        inputs=[TensorSpec("x", "TYPE_FP32", [4])],
        outputs=[TensorSpec("y", "TYPE_FP32", [3])],
        instance_count=instances,
        parameters=parameters or {},
    )
    data = mlp_onnx_bytes()
    source = get_store().source_dir("mlp", 1)
    source.mkdir(parents=True)
    (source / "model.onnx").write_bytes(data)
    return Version.objects.create(
        model=model,
        number=1,
        status="ready",
        source_filename="model.onnx",
        source_sha256="0" * 64,
        source_size=len(data),
        signature={
            "inputs": [
                {"name": "x", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 4]}
            ],
            "outputs": [
                {"name": "y", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 3]}
            ],
        }
        if signature
        else {},
        config_pbtxt=render_pbtxt(config),
        artifact_size=artifact_size,
    )


def get(client: Client, user, query: str = "", name: str = "mlp"):
    return client.get(
        f"/api/v1/models/{name}/memory-estimate{query}",
        HTTP_AUTHORIZATION=f"Token {token_for(user)}",
    )


def test_cpu_model_defaults_to_its_config_and_compares_with_host_memory(
    client: Client, viewer, store, no_npu
) -> None:
    version = make_version(instances=1, max_batch=8)
    body = get(client, viewer).json()
    assert (body["version"], body["instances"], body["max_batch"]) == (1, 1, 8)
    assert body["from_config"] == {"instances": 1, "max_batch": 8}
    # liveness walk of y = relu(x @ W + b): x, xw live during MatMul (4 + 3 floats), etc.
    assert body["activations"]["method"] == "liveness"
    per_sample = body["activations"]["bytes_per_sample"]
    assert per_sample == (4 + 3) * 4
    assert body["weights"]["bytes"] == version.source_size
    assert body["estimate"]["total_bytes"] == version.source_size + per_sample * 8
    assert body["host"]["state"] == "fits"
    assert body["devices"]["fit"] == []
    assert body["warning"] is None
    assert "this host's memory" in body["summary"]


def test_what_if_more_instances_and_a_bigger_batch(client: Client, viewer, store, no_npu) -> None:
    version = make_version()
    body = get(client, viewer, "?instances=3&max_batch=64").json()
    assert (body["instances"], body["max_batch"], body["copies_per_device"]) == (3, 64, 3)
    per_sample = body["activations"]["bytes_per_sample"]
    assert body["estimate"]["total_bytes"] == 3 * (version.source_size + per_sample * 64)


def test_npu_model_gets_a_verdict_per_chip_and_a_warning(
    client: Client, viewer, store, fake_910b
) -> None:
    make_version("acl", instances=1, max_batch=1, artifact_size=7000 * MIB)
    body = get(client, viewer).json()
    assert body["weights"] == {"bytes": 7000 * MIB, "mib": 7000.0, "source": "packaged artifact"}
    fit = {d["npu_id"]: d for d in body["devices"]["fit"]}
    assert body["devices"]["available"] is True
    assert fit[6]["free_mib"] == 65536 - 59356
    assert fit[6]["memory_kind"] == "HBM"
    assert fit[6]["state"] == "does_not_fit"
    assert fit[7]["state"] == "fits"
    assert "NPU 6 chip 0" in body["warning"]
    assert "NPU 7" not in body["warning"]


def test_npu_ge_spreads_instances_over_its_device_ids(
    client: Client, viewer, store, fake_910b
) -> None:
    make_version("npu_ge", instances=4, max_batch=1, parameters={"device_ids": "6,7"})
    body = get(client, viewer).json()
    assert body["copies_per_device"] == 2
    assert "npu_ge" in body["copies_note"]
    assert all(d["placed"] for d in body["devices"]["fit"])


def test_npu_target_without_npu_says_estimate_only(client: Client, viewer, store, no_npu) -> None:
    make_version("npu_ge")
    body = get(client, viewer).json()
    assert body["devices"]["available"] is False
    assert "no Ascend NPU on this host" in body["devices"]["reason"]
    assert "No NPU on this host" in body["summary"]
    assert body["host"] is None


@pytest.mark.parametrize(
    "query", ["?instances=0", "?instances=abc", "?max_batch=-1", "?instances=100000", "?version=x"]
)
def test_bad_query_values_are_400(client: Client, viewer, store, no_npu, query: str) -> None:
    make_version()
    response = get(client, viewer, query)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_query"


def test_unknown_model_or_version_is_404(client: Client, viewer, store, no_npu) -> None:
    make_version()
    assert get(client, viewer, name="nope").status_code == 404
    assert get(client, viewer, "?version=9").status_code == 404


def test_a_version_not_yet_validated_is_409(client: Client, viewer, store, no_npu) -> None:
    make_version(signature=False)
    response = get(client, viewer)
    assert response.status_code == 409
    assert response.json()["code"] == "not_ready"


def test_anonymous_is_401(client: Client, db: None) -> None:
    assert client.get("/api/v1/models/mlp/memory-estimate").status_code == 401


def test_schema_documents_the_endpoint(client: Client, viewer) -> None:
    schema = client.get("/api/v1/schema", HTTP_AUTHORIZATION=f"Token {token_for(viewer)}").json()
    op = schema["paths"]["/api/v1/models/{name}/memory-estimate"]["get"]
    assert {p["name"] for p in op["parameters"]} == {"name", "instances", "max_batch", "version"}
    body = inline(schema, op["responses"]["200"]["content"]["application/json"]["schema"])
    assert {"estimate", "devices", "warning", "summary"} <= set(body["properties"])


# --- the version page --------------------------------------------------------------------


def test_version_page_shows_the_cpu_estimate(viewer_client: Client, store, no_npu) -> None:
    make_version()
    page = viewer_client.get("/models/mlp/versions/1/").content.decode()
    assert "Memory estimate" in page
    assert "Runs on the CPU" in page
    assert "FITS" in page


def test_version_page_without_npu_for_an_npu_target(viewer_client: Client, store, no_npu) -> None:
    make_version("npu_ge")
    page = viewer_client.get("/models/mlp/versions/1/").content.decode()
    assert "No NPU on this host" in page and "CPU memory estimate only" in page


def test_version_page_warns_when_it_does_not_fit(viewer_client: Client, store, fake_910b) -> None:
    make_version("acl", max_batch=1, artifact_size=7000 * MIB)
    page = viewer_client.get("/models/mlp/versions/1/").content.decode()
    assert "DOES NOT FIT" in page and "Does not fit NPU 6 chip 0" in page
    assert 'role="alert"' in page


def test_version_page_without_signature_has_no_estimate(
    viewer_client: Client, store, no_npu
) -> None:
    make_version(signature=False)
    page = viewer_client.get("/models/mlp/versions/1/").content.decode()
    assert "Memory estimate" not in page

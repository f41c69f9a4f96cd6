"""Security finding 14: only the hub may use Triton's repository API (index, load, unload).

Triton itself enforces it: the embedded launcher starts ``tritonserver`` with
``--http-restricted-api`` / ``--grpc-restricted-protocol`` and a random key, and refuses every
repository call that does not carry that key in the ``triton-hub-key`` header (over gRPC,
Triton prefixes the metadata key with ``triton-grpc-protocol-``). The hub's ``TritonRuntime``
sends the key; plain ``tritonclient`` clients, as anyone on the network would use them, are
refused. Inference, health, metadata, config and statistics stay open to every client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from model_store.runtime import errors
from model_store.runtime.client import TritonRuntime
from model_store.runtime.embedded import EmbeddedTriton
from tests.fixtures.ports import free_ports
from tests.fixtures.triton import (
    TritonHandle,
    mlp_config_pbtxt,
    mlp_onnx_bytes,
    wait_for_state,
    write_model,
)

pytestmark = pytest.mark.integration

#: The header name is part of the deployment contract (docker-compose.yml, README): pinned here.
HEADER = "triton-hub-key"
GRPC_HEADER = f"triton-grpc-protocol-{HEADER}"


def _write_mlp(handle: TritonHandle, name: str) -> None:
    write_model(handle.repository, name, {1: mlp_onnx_bytes()}, mlp_config_pbtxt(name))


def _refused(call: Callable[[], Any]) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as refused:
        call()
    return refused.value


def test_a_plain_http_client_without_the_key_cannot_index_load_or_unload(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    _write_mlp(embedded_triton, model_name)
    embedded_triton.runtime.load(model_name)
    client = httpclient.InferenceServerClient(embedded_triton.triton.urls["http"])
    try:
        calls = {
            "index": client.get_model_repository_index,
            "load": lambda: client.load_model(model_name),
            "unload": lambda: client.unload_model(model_name),
            "wrong key": lambda: client.get_model_repository_index(headers={HEADER: "guess"}),
        }
        for what, call in calls.items():
            refusal = _refused(call)
            assert refusal.status() == "403", what
            assert "This API is restricted" in str(refusal.message()), what
    finally:
        client.close()
    # The refused unload changed nothing: the model is still served.
    assert embedded_triton.runtime.model_ready(model_name)


def test_a_plain_grpc_client_without_the_key_cannot_index_load_or_unload(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    _write_mlp(embedded_triton, model_name)
    embedded_triton.runtime.load(model_name)
    client = grpcclient.InferenceServerClient(embedded_triton.triton.urls["grpc"])
    try:
        calls = {
            "index": client.get_model_repository_index,
            "load": lambda: client.load_model(model_name),
            "unload": lambda: client.unload_model(model_name),
            "wrong key": lambda: client.get_model_repository_index(headers={GRPC_HEADER: "guess"}),
        }
        for what, call in calls.items():
            assert "This protocol is restricted" in str(_refused(call).message()), what
    finally:
        client.close()
    assert embedded_triton.runtime.model_ready(model_name)


def test_the_hubs_runtime_with_the_key_loads_and_unloads_over_grpc_and_http(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime  # built by the launcher: it carries the key
    assert runtime.grpc_url, "loads should go over gRPC here"
    _write_mlp(embedded_triton, model_name)
    runtime.load(model_name)
    assert wait_for_state(runtime, model_name, "READY")["version"] == "1"
    assert any(row["name"] == model_name for row in runtime.repository_index(protocol="grpc"))
    runtime.unload(model_name)
    wait_for_state(runtime, model_name, "UNAVAILABLE")

    urls = embedded_triton.triton.urls
    with TritonRuntime(urls["http"], api_key=embedded_triton.triton.api_key) as http_only:
        http_only.load(model_name)  # no gRPC address: the load goes over HTTP
        assert http_only.model_ready(model_name)
        http_only.unload(model_name)
    wait_for_state(runtime, model_name, "UNAVAILABLE")


def test_inference_health_metadata_config_and_statistics_stay_open(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    _write_mlp(embedded_triton, model_name)
    embedded_triton.runtime.load(model_name)
    urls = embedded_triton.triton.urls
    x = np.ones((2, 4), dtype=np.float32)
    with TritonRuntime(urls["http"], grpc_url=urls["grpc"]) as anyone:  # no key
        assert anyone.is_ready()
        assert anyone.server_metadata()["name"] == "triton"
        assert anyone.model_metadata(model_name)["inputs"][0]["name"] == "x"
        assert anyone.model_config(model_name)["max_batch_size"] == 8
        assert anyone.infer(model_name, {"x": x})["y"].shape == (2, 3)
        assert anyone.infer(model_name, {"x": x}, protocol="grpc")["y"].shape == (2, 3)
        assert anyone.statistics(model_name)["model_stats"]


def test_trace_and_log_settings_need_the_key_too(embedded_triton: TritonHandle) -> None:
    client = httpclient.InferenceServerClient(embedded_triton.triton.urls["http"])
    key = {HEADER: embedded_triton.triton.api_key}
    try:
        assert _refused(lambda: client.update_log_settings({"log_verbose_level": 1})).status() == (
            "403"
        )
        assert _refused(client.get_trace_settings).status() == "403"
        assert client.get_log_settings(headers=key)["log_verbose_level"] == 0
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_runtime_without_the_right_key_is_told_access_denied_not_unavailable(
    embedded_triton: TritonHandle, model_name: str, protocol: str
) -> None:
    _write_mlp(embedded_triton, model_name)
    urls = embedded_triton.triton.urls
    grpc_url = urls["grpc"] if protocol == "grpc" else None
    for key in (None, "not-the-key-at-all"):
        with TritonRuntime(urls["http"], grpc_url=grpc_url, api_key=key) as runtime:
            with pytest.raises(errors.TritonAccessDenied, match="TRITON_API_KEY") as denied:
                runtime.load(model_name)
            assert isinstance(denied.value, errors.TritonRequestError)
            with pytest.raises(errors.TritonAccessDenied):
                runtime.repository_index(protocol=protocol)  # type: ignore[arg-type]
    assert not embedded_triton.runtime.model_ready(model_name)


def test_each_launcher_makes_its_own_key_and_never_logs_it(
    embedded_triton: TritonHandle, tmp_path
) -> None:
    triton = embedded_triton.triton
    assert len(triton.api_key) >= 32
    assert triton.api_key not in repr(triton) and triton.api_key not in repr(
        embedded_triton.runtime
    )
    log = triton.log_path.read_text()
    assert "--http-restricted-api=" in log and "--grpc-restricted-protocol=" in log
    assert triton.api_key not in log
    other = EmbeddedTriton(tmp_path, tmp_path / "backends")
    assert other.api_key != triton.api_key


def test_a_given_key_is_used(tmp_path) -> None:
    repository = tmp_path / "repository"
    repository.mkdir()
    http_port, grpc_port, metrics_port = free_ports(3)
    given = "operator-chose-this-key-0123456789"
    with EmbeddedTriton(
        repository, tmp_path / "backends", http_port=http_port, grpc_port=grpc_port,
        metrics_port=metrics_port, workdir=tmp_path / "work", api_key=given,
    ) as triton:  # fmt: skip
        assert triton.api_key == given
        client = httpclient.InferenceServerClient(triton.urls["http"])
        try:
            assert client.get_model_repository_index(headers={HEADER: given}) == []
            assert _refused(client.get_model_repository_index).status() == "403"
        finally:
            client.close()

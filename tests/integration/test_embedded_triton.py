"""The embedded Triton, our ``onnxruntime`` Python-based backend and TritonRuntime, end to end.

One real ``tritonserver`` serves the whole module (session fixture
``embedded_triton``); each test writes its own model under a unique name.
"""

from __future__ import annotations

import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from model_store.runtime.client import TritonRuntime
from model_store.runtime.embedded import EmbeddedTriton
from model_store.runtime.errors import (
    TritonRequestError,
    TritonStartError,
    TritonUnavailable,
)
from tests.fixtures.ports import free_ports
from tests.fixtures.triton import (
    TritonHandle,
    mlp_config_pbtxt,
    mlp_onnx_bytes,
    mlp_weights,
    reference_outputs,
    wait_for_state,
    write_model,
)
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.integration


def _load_mlp(handle: TritonHandle, name: str, seed: int = 0) -> bytes:
    onnx_bytes = mlp_onnx_bytes(seed=seed)
    write_model(handle.repository, name, {1: onnx_bytes}, mlp_config_pbtxt(name))
    handle.runtime.load(name)
    return onnx_bytes


def _x(batch: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 4)).astype(np.float32)


# --------------------------------------------------------------------------- server


def test_server_health_and_metadata(embedded_triton: TritonHandle) -> None:
    runtime = embedded_triton.runtime
    assert runtime.is_live()
    assert runtime.is_ready()
    meta = runtime.server_metadata()
    assert meta["name"] == "triton"
    assert meta["version"].startswith("2.")
    assert "model_repository" in meta["extensions"]
    assert "statistics" in meta["extensions"]
    # The backend directory was prepared for the running interpreter.
    assert (embedded_triton.backends_dir / "python" / "triton_python_backend_stub").is_file()
    assert (embedded_triton.backends_dir / "onnxruntime" / "model.py").is_file()


def test_unreachable_server_is_reported_not_raised_from_health() -> None:
    (port,) = free_ports(1)
    runtime = TritonRuntime(
        f"127.0.0.1:{port}",
        grpc_url=f"127.0.0.1:{port}",
        metrics_url=f"127.0.0.1:{port}",
        timeout=2,
    )
    assert runtime.is_live() is False
    assert runtime.is_ready() is False
    with pytest.raises(TritonUnavailable, match="cannot reach Triton"):
        runtime.repository_index()
    with pytest.raises(TritonUnavailable):
        runtime.scrape_metrics()
    with pytest.raises(TritonUnavailable):
        runtime.infer("m", {"x": _x(1)}, protocol="grpc")


# --------------------------------------------------------------------------- serving


def test_load_and_infer_http_and_grpc_match_onnxruntime(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime
    onnx_bytes = _load_mlp(embedded_triton, model_name)
    assert runtime.model_ready(model_name)
    assert wait_for_state(runtime, model_name, "READY")["version"] == "1"

    meta = runtime.model_metadata(model_name)
    assert meta["platform"] == "onnxruntime_onnx"  # what Triton reports for backend "onnxruntime"
    assert [i["name"] for i in meta["inputs"]] == ["x"]
    assert meta["inputs"][0]["shape"] == [-1, 4]
    assert runtime.model_config(model_name)["max_batch_size"] == 8

    x = _x(5)
    expected = reference_outputs(onnx_bytes, x)
    via_http = runtime.infer(model_name, {"x": x})
    via_grpc = runtime.infer(model_name, {"x": x}, outputs=["y"], protocol="grpc")
    assert set(via_http) == {"y"}
    assert via_http["y"].dtype == np.float32
    np.testing.assert_allclose(via_http["y"], expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(via_grpc["y"], expected, rtol=1e-6, atol=1e-6)
    weight, bias = mlp_weights()
    np.testing.assert_allclose(
        via_http["y"], np.maximum(x @ weight + bias, 0), rtol=1e-5, atol=1e-5
    )


def test_dynamic_batching_splits_results_back(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    """Concurrent requests of different batch sizes are batched together and
    each caller still gets exactly its own rows back."""
    runtime = embedded_triton.runtime
    onnx_bytes = _load_mlp(embedded_triton, model_name)
    batches = [_x(1 + i % 3, seed=i) for i in range(24)]

    def call(x: np.ndarray) -> np.ndarray:
        return runtime.infer(model_name, {"x": x})["y"]

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(call, batches))
    for x, y in zip(batches, results, strict=True):
        np.testing.assert_allclose(y, reference_outputs(onnx_bytes, x), rtol=1e-6, atol=1e-6)

    stats = runtime.statistics(model_name)["model_stats"][0]
    assert stats["inference_stats"]["success"]["count"] == len(batches)
    assert stats["inference_count"] == sum(len(x) for x in batches)
    # Fewer executions than requests proves requests were really batched; with
    # six concurrent clients and a 2 ms queue delay this always happens here.
    assert stats["execution_count"] < len(batches)


def test_statistics_and_metrics_count_requests(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime
    _load_mlp(embedded_triton, model_name)
    for seed in range(3):
        runtime.infer(model_name, {"x": _x(2, seed)})

    # Triton records a request's statistics just after it sends the response: poll briefly.
    def three_counted() -> list[dict]:
        stats = runtime.statistics(model_name, "1")["model_stats"]
        assert len(stats) == 1
        return stats if stats[0]["inference_stats"]["success"]["count"] >= 3 else []

    stats = wait_until(three_counted, 10, message="Triton never counted 3 requests")
    assert stats[0]["inference_stats"]["success"]["count"] == 3
    assert stats[0]["inference_count"] == 6

    text = runtime.scrape_metrics()
    match = re.search(
        rf'^nv_inference_request_success\{{[^}}]*model="{model_name}"[^}}]*\}} (\S+)$',
        text,
        re.MULTILINE,
    )
    assert match, f"no nv_inference_request_success line for {model_name}"
    assert float(match.group(1)) == 3


def test_repository_index_ready_then_unavailable_after_unload(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime
    _load_mlp(embedded_triton, model_name)
    assert wait_for_state(runtime, model_name, "READY")["reason"] == ""
    runtime.unload(model_name)
    row = wait_for_state(runtime, model_name, "UNAVAILABLE")
    assert row["reason"] == "unloaded"
    assert not runtime.model_ready(model_name)
    with pytest.raises(TritonRequestError):
        runtime.infer(model_name, {"x": _x(1)})


# --------------------------------------------------------------------------- errors


def test_bad_requests_get_clear_errors_and_server_survives(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime
    onnx_bytes = _load_mlp(embedded_triton, model_name)
    cases = {
        "wrong shape": ({"x": np.zeros((2, 5), np.float32)}, r"'x'.*shape|shape.*'x'"),
        "wrong dtype": ({"x": np.zeros((2, 4), np.float64)}, r"FP64|data ?type|datatype"),
        "batch too big": ({"x": np.zeros((9, 4), np.float32)}, r"batch"),
        "unknown input": ({"z": np.zeros((1, 4), np.float32)}, r"'z'|input"),
    }
    for label, (inputs, pattern) in cases.items():
        for protocol in ("http", "grpc"):
            with pytest.raises(TritonRequestError) as info:
                runtime.infer(model_name, inputs, protocol=protocol)  # type: ignore[arg-type]
            assert re.search(pattern, str(info.value), re.IGNORECASE), (label, str(info.value))
            assert info.value.status is not None
    # Still serving, and correctly.
    x = _x(3)
    np.testing.assert_allclose(
        runtime.infer(model_name, {"x": x})["y"], reference_outputs(onnx_bytes, x), rtol=1e-6
    )


def test_backend_reports_onnxruntime_failure_per_request(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    """Dims left open in the config (-1) let a wrong width reach the backend;
    the backend answers with an error response instead of crashing the stub."""
    runtime = embedded_triton.runtime
    config = mlp_config_pbtxt(model_name).replace("dims: [ 4 ]", "dims: [ -1 ]")
    write_model(embedded_triton.repository, model_name, {1: mlp_onnx_bytes()}, config)
    runtime.load(model_name)
    with pytest.raises(TritonRequestError, match="onnxruntime failed to run"):
        runtime.infer(model_name, {"x": np.zeros((2, 7), np.float32)})
    assert runtime.infer(model_name, {"x": _x(2)})["y"].shape == (2, 3)


def test_corrupted_model_fails_to_load_with_reason(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime
    write_model(
        embedded_triton.repository,
        model_name,
        {1: b"this is not an ONNX protobuf"},
        mlp_config_pbtxt(model_name),
    )
    with pytest.raises(TritonRequestError) as info:
        runtime.load(model_name)
    assert "onnxruntime could not load" in str(info.value)
    row = wait_for_state(runtime, model_name, "UNAVAILABLE")
    assert "onnxruntime could not load" in row["reason"]
    assert runtime.is_ready()  # one bad model does not make the server unready


def test_config_mismatch_fails_at_load(embedded_triton: TritonHandle, model_name: str) -> None:
    runtime = embedded_triton.runtime
    config = mlp_config_pbtxt(model_name).replace('name: "y"', 'name: "logits"')
    write_model(embedded_triton.repository, model_name, {1: mlp_onnx_bytes()}, config)
    with pytest.raises(TritonRequestError, match="'logits' is not an output of the ONNX model"):
        runtime.load(model_name)


def test_load_with_config_override_selects_version(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime
    versions = {1: mlp_onnx_bytes(seed=1), 2: mlp_onnx_bytes(seed=2)}
    write_model(embedded_triton.repository, model_name, versions, mlp_config_pbtxt(model_name))
    x = _x(2)

    def config_for(version: int) -> dict[str, object]:
        return {
            "name": model_name,
            "backend": "onnxruntime",
            "max_batch_size": 8,
            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
            "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}],
            "dynamic_batching": {},
            # Spelled out: without it Triton gives a CPU model two instances,
            # i.e. two stub processes to start.
            "instance_group": [{"kind": "KIND_CPU", "count": 1}],
            "parameters": {"intra_op_thread_count": {"string_value": "1"}},
            "version_policy": {"specific": {"versions": [version]}},
        }

    runtime.load(model_name, config_for(1))
    assert runtime.model_ready(model_name, "1")
    assert not runtime.model_ready(model_name, "2")
    np.testing.assert_allclose(
        runtime.infer(model_name, {"x": x})["y"], reference_outputs(versions[1], x), rtol=1e-6
    )

    runtime.load(model_name, config_for(2))
    assert runtime.model_ready(model_name, "2")
    wait_for_state(runtime, model_name, "UNAVAILABLE", version="1")
    np.testing.assert_allclose(
        runtime.infer(model_name, {"x": x})["y"], reference_outputs(versions[2], x), rtol=1e-6
    )
    np.testing.assert_allclose(
        runtime.infer(model_name, {"x": x}, version="2", protocol="grpc")["y"],
        reference_outputs(versions[2], x),
        rtol=1e-6,
    )


def test_auto_complete_fills_inputs_and_outputs(
    embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime
    config = f'name: "{model_name}"\nbackend: "onnxruntime"\nmax_batch_size: 4\n'
    onnx_bytes = mlp_onnx_bytes()
    write_model(embedded_triton.repository, model_name, {1: onnx_bytes}, config)
    runtime.load(model_name)
    effective = runtime.model_config(model_name)
    assert [(i["name"], i["data_type"], i["dims"]) for i in effective["input"]] == [
        ("x", "TYPE_FP32", [4])  # the batch dimension is left out: max_batch_size > 0
    ]
    assert [o["name"] for o in effective["output"]] == ["y"]
    x = _x(4)
    np.testing.assert_allclose(
        runtime.infer(model_name, {"x": x})["y"], reference_outputs(onnx_bytes, x), rtol=1e-6
    )


# --------------------------------------------------------------------------- launcher


def test_start_fails_fast_with_log_tail(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    http_port, grpc_port, metrics_port = free_ports(3)
    triton = EmbeddedTriton(
        repo,
        tmp_path / "backends",
        http_port=http_port,
        grpc_port=grpc_port,
        metrics_port=metrics_port,
        extra_args=["--no-such-option=1"],
    )
    started = time.monotonic()
    with pytest.raises(TritonStartError, match=r"ended .* before it was ready") as info, triton:
        pass
    assert time.monotonic() - started < 10
    assert "no-such-option" in info.value.headline  # the cause, in the first line
    assert not triton.is_running()


def test_start_refuses_a_port_in_use(embedded_triton: TritonHandle, tmp_path: Path) -> None:
    http_port, grpc_port = free_ports(2)
    other = EmbeddedTriton(
        embedded_triton.repository,
        tmp_path / "backends",
        http_port=http_port,
        grpc_port=grpc_port,
        metrics_port=embedded_triton.triton.metrics_port,
    )
    with pytest.raises(TritonStartError, match="already in use"):
        other.start()
    assert not other.is_running()


def test_workdir_inside_repository_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    http_port, grpc_port, metrics_port = free_ports(3)
    triton = EmbeddedTriton(
        repo,
        tmp_path / "backends",
        http_port=http_port,
        grpc_port=grpc_port,
        metrics_port=metrics_port,
        workdir=repo / "work",
        prepare_backends=False,
    )
    with pytest.raises(TritonStartError, match="inside the model repository"):
        triton.start()
    assert not (repo / "work").exists()


def test_stop_leaves_no_stub_processes(tmp_path: Path) -> None:
    """A server with a Python-backend model loaded: stopping it ends the stub too."""
    repo = tmp_path / "repo"
    name = "stub_probe"
    write_model(repo, name, {1: mlp_onnx_bytes()}, mlp_config_pbtxt(name))
    http_port, grpc_port, metrics_port = free_ports(3)
    with EmbeddedTriton(
        repo,
        tmp_path / "backends",
        http_port=http_port,
        grpc_port=grpc_port,
        metrics_port=metrics_port,
        extra_args=[f"--load-model={name}"],
    ) as triton:
        pgid = triton.pid
        assert pgid is not None
        with triton.runtime() as runtime:
            assert runtime.model_ready(name)
        members = _group_members(pgid)
        assert any("triton_python_backend_stub" in cmd for cmd in members.values()), members
    assert _group_members(pgid) == {}
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


def _group_members(pgid: int) -> dict[int, str]:
    """Live (non-zombie) processes in process group ``pgid``, from /proc."""
    members = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp ...
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members[int(entry.name)] = cmdline
    return members

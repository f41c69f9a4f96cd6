"""Our ``acl`` Triton backend in the real embedded Triton, with the fake pyACL.

The OMs are built by the fake ATC (through ``run_atc``) and served by a
dedicated ``tritonserver`` whose environment puts tests/fakes first on
PYTHONPATH, so that ``import acl`` inside the Python backend stub finds the
fake. Everything except the NPU is real: Triton, the stub, our backend file as
``prepare_backend_dir`` installs it, and the HTTP/gRPC clients.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from model_store.compile.atc.environment import atc_environment, require_atc
from model_store.compile.atc.options import AtcOptions, build_atc_command
from model_store.compile.atc.running import run_atc
from model_store.runtime.client import TritonRuntime
from model_store.runtime.embedded import EmbeddedTriton
from model_store.runtime.errors import TritonRequestError
from tests.fakes.cann import FAKES_DIR, make_fake_toolkit
from tests.fixtures.triton import mlp_onnx_bytes, reference_outputs, started_triton, wait_for_state

pytestmark = pytest.mark.integration


@dataclass
class AclTriton:
    runtime: TritonRuntime
    repository: Path
    build_om: Callable[..., Path]
    triton: EmbeddedTriton


@pytest.fixture(scope="module")
def acl_triton(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclTriton]:
    """A Triton of its own whose Python stubs import the fake ``acl``."""
    root = tmp_path_factory.mktemp("acl_triton")
    status = require_atc(make_fake_toolkit(root / "Ascend"))
    source = root / "mlp.onnx"
    source.write_bytes(mlp_onnx_bytes())
    atc_env = atc_environment(status, os.environ)

    def build_om(name: str, **options: object) -> Path:
        argv = build_atc_command(
            status.atc_path or "",
            source,
            root / name,
            AtcOptions(soc_version="Ascend310P3", **options),  # type: ignore[arg-type]
        )
        result = run_atc(argv, env=atc_env, cwd=root, on_line=lambda _: None)
        result.raise_for_failure()
        assert result.om_path is not None
        return result.om_path

    python_path = [
        str(FAKES_DIR),
        *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)),
    ]
    env = {"PYTHONPATH": os.pathsep.join(python_path), "FAKE_ACL_DEVICE_COUNT": "2"}
    with started_triton(root, root / "repository", env=env) as triton:
        runtime = triton.runtime()
        yield AclTriton(runtime, triton.repository, build_om, triton)
        runtime.close()


def _config(
    name: str, max_batch_size: int, in_dims: list[int], out_dims: list[int], extra: str = ""
) -> str:
    return f"""name: "{name}"
backend: "acl"
max_batch_size: {max_batch_size}
input [ {{ name: "x", data_type: TYPE_FP32, dims: {in_dims} }} ]
output [ {{ name: "y", data_type: TYPE_FP32, dims: {out_dims} }} ]
instance_group [ {{ kind: KIND_CPU, count: 1 }} ]
{extra}"""


def _install(handle: AclTriton, name: str, om: Path, config: str) -> None:
    version_dir = handle.repository / name / "1"
    version_dir.mkdir(parents=True)
    (version_dir / "model.om").write_bytes(om.read_bytes())
    (handle.repository / name / "config.pbtxt").write_text(config)


def _x(batch: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 4)).astype(np.float32)


def test_the_backend_directory_holds_the_acl_backend(acl_triton: AclTriton) -> None:
    assert (acl_triton.triton.backends_dir / "acl" / "model.py").is_file()


def test_a_dynamic_batch_om_serves_what_onnxruntime_computes(acl_triton: AclTriton) -> None:
    om = acl_triton.build_om(
        "dyn", input_shape="x:-1,4", dynamic_batch_size=[1, 2, 4, 8], precision_mode_v2="origin"
    )
    _install(
        acl_triton,
        "acl_dynamic",
        om,
        _config(
            "acl_dynamic",
            8,
            [4],
            [3],
            "dynamic_batching { max_queue_delay_microseconds: 20000 }\n"
            'parameters { key: "device_id" value: { string_value: "1" } }',
        ),
    )
    runtime = acl_triton.runtime
    runtime.load("acl_dynamic")
    for batch in (1, 3, 8):
        x = _x(batch, seed=batch)
        y = runtime.infer("acl_dynamic", {"x": x})["y"]
        np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)
    x = _x(5, seed=9)
    y = runtime.infer("acl_dynamic", {"x": x}, protocol="grpc")["y"]
    np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)

    # Concurrent requests are batched by Triton and concatenated by the backend.
    inputs = [_x(1 + i % 3, seed=100 + i) for i in range(24)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda a: runtime.infer("acl_dynamic", {"x": a})["y"], inputs))
    for x, y in zip(inputs, results, strict=True):
        np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)

    with pytest.raises(TritonRequestError, match="unexpected shape for input 'x'"):
        runtime.infer("acl_dynamic", {"x": np.zeros((2, 5), np.float32)})  # Triton's own check
    assert runtime.infer("acl_dynamic", {"x": _x(2)})["y"].shape == (2, 3)
    stats = runtime.statistics("acl_dynamic")["model_stats"][0]
    # Triton grouped requests, so the backend's concatenate-and-split path ran (and the
    # comparisons above prove it split the results back correctly).
    assert int(stats["execution_count"]) < int(stats["inference_stats"]["success"]["count"])

    runtime.unload("acl_dynamic")
    wait_for_state(runtime, "acl_dynamic", "UNAVAILABLE")
    log = acl_triton.triton.log_path.read_text() if acl_triton.triton.log_path else ""
    assert "acl backend: releasing" not in log  # finalize released everything cleanly


def test_a_fixed_shape_om_in_fp16_serves_within_tolerance(acl_triton: AclTriton) -> None:
    om = acl_triton.build_om("fixed", input_shape="x:2,4")
    # -1 in the config lets a wrong shape reach the backend, which must refuse it itself.
    _install(acl_triton, "acl_fixed", om, _config("acl_fixed", 0, [-1, 4], [-1, 3]))
    runtime = acl_triton.runtime
    runtime.load("acl_fixed")
    x = _x(2)
    y = runtime.infer("acl_fixed", {"x": x})["y"]
    np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-2, atol=1e-2)
    with pytest.raises(TritonRequestError, match=r"shape \[3, 4\] does not match the compiled"):
        runtime.infer("acl_fixed", {"x": _x(3)})
    np.testing.assert_allclose(runtime.infer("acl_fixed", {"x": x})["y"], y)  # still serving


def test_a_config_that_disagrees_with_the_om_fails_at_load(acl_triton: AclTriton) -> None:
    om = acl_triton.build_om("mismatch", input_shape="x:2,4")
    _install(acl_triton, "acl_mismatch", om, _config("acl_mismatch", 0, [2, 5], [2, 3]))
    with pytest.raises(TritonRequestError, match=r"dims \[2, 5\] but the OM has \[2, 4\]"):
        acl_triton.runtime.load("acl_mismatch")
    assert acl_triton.runtime.is_ready()


def test_a_missing_npu_fails_at_load_with_its_id(acl_triton: AclTriton) -> None:
    om = acl_triton.build_om("nodevice", input_shape="x:2,4")
    config = _config(
        "acl_nodevice",
        0,
        [2, 4],
        [2, 3],
        'parameters { key: "device_id" value: { string_value: "7" } }',
    )
    _install(acl_triton, "acl_nodevice", om, config)
    with pytest.raises(TritonRequestError, match=r"acl.rt.set_device\(7\) failed"):
        acl_triton.runtime.load("acl_nodevice")


def test_om_output_names_map_to_the_config_by_their_onnx_part(acl_triton: AclTriton) -> None:
    # The OM calls its output "Relu_2:0:y" (<op>:<index>:<ONNX name>); the config says "y".
    om = acl_triton.build_om("names", input_shape="x:-1,4", dynamic_batch_size=[2, 4, 8])
    _install(acl_triton, "acl_names", om, _config("acl_names", 8, [4], [3]))
    runtime = acl_triton.runtime
    runtime.load("acl_names")
    x = _x(3, seed=3)  # smaller than the largest gear: runs gear 4, one padded row dropped
    y = runtime.infer("acl_names", {"x": x})["y"]
    assert y.shape == (3, 3)
    np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-2, atol=1e-2)

    wrong = _config("acl_names_wrong", 8, [4], [3]).replace('name: "y"', 'name: "logits"')
    _install(acl_triton, "acl_names_wrong", om, wrong)
    with pytest.raises(
        TritonRequestError,
        match=r"\['logits'\] are not outputs of the OM: its outputs are \['Relu_2:0:y'\]",
    ):
        runtime.load("acl_names_wrong")


def test_an_om_built_with_out_nodes_is_matched_by_position_and_logged(
    acl_triton: AclTriton,
) -> None:
    om = acl_triton.build_om("outnodes", input_shape="x:2,4", out_nodes="Relu_2:0")
    _install(acl_triton, "acl_out_nodes", om, _config("acl_out_nodes", 0, [2, 4], [2, 3]))
    runtime = acl_triton.runtime
    runtime.load("acl_out_nodes")
    x = _x(2)
    y = runtime.infer("acl_out_nodes", {"x": x})["y"]
    np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-2, atol=1e-2)
    log = acl_triton.triton.log_path.read_text() if acl_triton.triton.log_path else ""
    assert "model 'acl_out_nodes': the OM's output names ['Relu_2:0']" in log
    assert "by position" in log

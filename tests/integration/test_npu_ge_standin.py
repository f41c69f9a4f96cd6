"""The npu_ge stand-in (tests/fakes/npu_ge) in a real Triton, and what the hub does with it.

Upstream's GE backend initialises every npu_ge model of one Triton in turn, and a load that fails
never passes its turn on (docs/ge-backend.md#statistics-reload-and-unload). So: a model GE cannot
compile fails to load, every npu_ge load after it in that Triton hangs, and the hub notes that
Triton needs a restart. The self-test therefore loads its npu_ge trial into a disposable Triton of
its own, never into the one that serves.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from model_store.serving.loading import load_serving
from model_store.serving.restart_needed import needs_restart
from model_store.store import ModelStore
from tests.fakes.npu_ge import STANDIN
from tests.fixtures.triton import mlp_onnx_bytes, started_triton, write_model

pytestmark = pytest.mark.integration

GE_CONFIG = """name: "{name}"
backend: "npu_ge"
max_batch_size: 8
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ 3 ] }} ]
"""


def _not_on_ascend() -> bytes:
    """A model with an operator GE has no kernel for (the fake ATC's EZ3003 marker)."""
    graph = helper.make_graph(
        [helper.make_node("NotOnAscend", ["x"], ["y"])],
        "wedge",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    return bytes(model.SerializeToString())


def test_a_failed_ge_load_wedges_later_ones_and_the_hub_says_triton_needs_a_restart(
    tmp_path: Path,
) -> None:
    store = ModelStore(tmp_path / "store")
    backends = tmp_path / "backends"
    (backends / "npu_ge").mkdir(parents=True)
    shutil.copy(STANDIN, backends / "npu_ge" / "model.py")
    write_model(
        store.repository_dir, "wedge", {1: _not_on_ascend()}, GE_CONFIG.format(name="wedge")
    )
    write_model(store.repository_dir, "fine", {1: mlp_onnx_bytes()}, GE_CONFIG.format(name="fine"))
    env = {"FAKE_NPU_GE_STATE_DIR": str(tmp_path / "ge-state")}
    (tmp_path / "ge-state").mkdir()
    with started_triton(tmp_path / "triton", store.repository_dir, backends, env=env) as triton:
        runtime = triton.runtime()
        try:
            failed = load_serving(store, runtime, "wedge", timeout_s=60)
            assert not failed.ok and "EZ3003" in failed.reason, failed
            assert needs_restart(store)["model"] == "wedge"  # type: ignore[index]
            began = time.monotonic()
            hung = load_serving(store, runtime, "fine", timeout_s=6)
            assert not hung.ok and time.monotonic() - began >= 5, hung
            rows = {r["name"]: r["state"] for r in runtime.repository_index()}
            assert rows.get("fine") in ("LOADING", "UNAVAILABLE"), rows
            assert needs_restart(store)["model"] == "wedge"  # type: ignore[index]
        finally:
            runtime.close()
    # Restarted (a new Triton process): GE loads again, and a load that works clears the note.
    with started_triton(tmp_path / "triton2", store.repository_dir, backends, env=env) as triton:
        runtime = triton.runtime()
        try:
            assert load_serving(store, runtime, "fine", timeout_s=60).ok
            assert needs_restart(store) is None
        finally:
            runtime.close()


def test_the_standin_runs_the_first_onnx_file_it_finds(tmp_path: Path) -> None:
    """Whatever the version folders say (docs/ge-backend.md#how-the-model-file-is-found)."""
    backends = tmp_path / "backends"
    (backends / "npu_ge").mkdir(parents=True)
    shutil.copy(STANDIN, backends / "npu_ge" / "model.py")
    repository = tmp_path / "repository"
    write_model(repository, "ge", {3: mlp_onnx_bytes()}, GE_CONFIG.format(name="ge"))
    env = {"FAKE_NPU_GE_STATE_DIR": str(tmp_path)}
    with started_triton(tmp_path / "triton", repository, backends, env=env) as triton:
        runtime = triton.runtime()
        try:
            runtime.load("ge")
            out = runtime.infer("ge", {"x": np.ones((1, 4), dtype=np.float32)})
            assert out["y"].shape == (1, 3)
        finally:
            runtime.close()

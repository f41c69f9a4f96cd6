"""trial_model() against the real embedded Triton: a candidate answers under a temporary name
while the serving model keeps answering, and nothing is left behind, also after a failed load.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from model_store.config import ModelConfig, TensorSpec, render_pbtxt
from model_store.serving import TrialLoadFailed, is_trial_name, load_serving, trial_model
from model_store.serving.state import repository_state
from model_store.store import ModelStore
from tests.fixtures.triton import TritonHandle, mlp_onnx_bytes, reference_outputs

pytestmark = pytest.mark.integration

X = np.random.default_rng(3).standard_normal((2, 4)).astype(np.float32)


def _config(name: str) -> ModelConfig:
    return ModelConfig(
        name=name,
        backend="onnxruntime",
        max_batch_size=8,
        inputs=[TensorSpec("x", "TYPE_FP32", [4])],
        outputs=[TensorSpec("y", "TYPE_FP32", [3])],
        version_policy_specific=[1],
    )


@pytest.fixture
def store(embedded_triton: TritonHandle) -> ModelStore:
    return ModelStore(embedded_triton.repository.parent)


@pytest.fixture
def serving(store: ModelStore, embedded_triton: TritonHandle, model_name: str) -> bytes:
    """``model_name`` v1 serving (seed 1) from the repository, as a switch leaves it."""
    payload = mlp_onnx_bytes(seed=1)
    store.model_dir(model_name).mkdir(parents=True)
    store.write_config(model_name, render_pbtxt(_config(model_name)))
    with store.stage_version(model_name, 1) as staging:
        (staging / "model.onnx").write_bytes(payload)
    assert load_serving(store, embedded_triton.runtime, model_name).ok
    return payload


def _trial_leftovers(store: ModelStore) -> list[str]:
    places = [store.repository_dir, store.root / "staging", store.root / "retired"]
    return [p.name for d in places if d.is_dir() for p in d.iterdir() if is_trial_name(p.name)]


def test_trial_answers_beside_the_serving_model_and_goes_away(
    store: ModelStore, embedded_triton: TritonHandle, model_name: str, serving: bytes,
    tmp_path: Path,
) -> None:  # fmt: skip
    runtime = embedded_triton.runtime
    candidate = mlp_onnx_bytes(seed=2)
    (tmp_path / "model.onnx").write_bytes(candidate)

    with trial_model(store, runtime, _config(model_name), [tmp_path / "model.onnx"]) as name:
        assert is_trial_name(name) and model_name in name
        trial_y = runtime.infer(name, {"x": X})["y"]
        serving_y = runtime.infer(model_name, {"x": X})["y"]
        np.testing.assert_allclose(trial_y, reference_outputs(candidate, X), rtol=1e-5)
        np.testing.assert_allclose(serving_y, reference_outputs(serving, X), rtol=1e-5)
        # The reconcile view of the serving model does not count the trial as drift.
        assert repository_state(store, runtime, model_name)["problems"] == []

    assert not (store.repository_dir / name).exists()
    assert _trial_leftovers(store) == []
    assert not any(row["name"] == name and row.get("state") == "READY"
                   for row in runtime.repository_index())  # fmt: skip
    np.testing.assert_allclose(
        runtime.infer(model_name, {"x": X})["y"], reference_outputs(serving, X), rtol=1e-5
    )


def test_failed_trial_load_reports_tritons_reason_and_leaves_nothing(
    store: ModelStore, embedded_triton: TritonHandle, model_name: str, serving: bytes,
    tmp_path: Path,
) -> None:  # fmt: skip
    (tmp_path / "model.onnx").write_bytes(b"this is not an ONNX protobuf")

    attempt = trial_model(
        store, embedded_triton.runtime, _config(model_name), [tmp_path / "model.onnx"], timeout_s=60
    )
    with pytest.raises(TrialLoadFailed) as caught, attempt:
        pytest.fail("a corrupt model must not load")

    assert caught.value.code == "trial_load_failed"
    assert "onnx" in caught.value.message.lower() or "protobuf" in caught.value.message.lower()
    assert _trial_leftovers(store) == []
    assert embedded_triton.runtime.model_ready(model_name)

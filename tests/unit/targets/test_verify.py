"""Tests for model_store.verify: measured comparisons, tolerances, input checks, honest not_run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from model_store.onnx_info import inspect_onnx
from model_store.verification_compare import TOLERANCES, compare_output
from model_store.verification_inputs import VerificationInputError, random_inputs
from model_store.verify import verify
from tests.unit.targets import models


@pytest.fixture
def mlp_path(tmp_path: Path) -> Path:
    return models.save(models.mlp(), tmp_path / "mlp.onnx")


def _x(batch: int = 2, dtype: str = "float32") -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(3).standard_normal((batch, 16)).astype(dtype)}


def _reference(path: Path):  # -> callable running the model on the CPU
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return lambda feed: dict(zip(names, session.run(None, feed), strict=True))


def test_identical_models_pass_with_exact_metrics(mlp_path: Path) -> None:
    report = verify(mlp_path, mlp_path, "onnx", precision="fp32", samples=[_x()], batch=3)
    assert report.status == "passed" and report.passed
    assert report.samples_used == 5  # one user sample + four random ones
    (out,) = report.outputs
    assert (out.name, out.max_abs, out.max_rel, out.passed) == ("y", 0.0, 0.0, True)
    assert out.cosine == pytest.approx(1.0)
    assert (out.top1_agreement, out.topk_overlap) == (1.0, 1.0)
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert set(data) == {
        "status",
        "precision",
        "tolerances",
        "samples_used",
        "outputs",
        "reason",
        "duration_s",
        "via",
    }
    assert data["via"] == "worker_cpu"
    assert data["tolerances"] == TOLERANCES["fp32"]
    assert set(data["outputs"][0]) >= {
        "name",
        "max_abs",
        "max_rel",
        "cosine",
        "top1_agreement",
        "topk_overlap",
        "passed",
    }


def test_tolerances_get_looser_with_precision() -> None:
    assert set(TOLERANCES) == {"fp32", "fp16", "mixed", "int8"}
    keys = set(TOLERANCES["fp32"])
    assert all(set(t) == keys for t in TOLERANCES.values())
    cosines = [TOLERANCES[p]["min_cosine"] or 0 for p in ("fp32", "mixed", "fp16", "int8")]
    assert cosines == sorted(cosines, reverse=True)


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        (_x(dtype="float64"), "dtype float64 does not match the model's float32"),
        (
            {"x": np.zeros((2, 15), np.float32)},
            r"shape \[2, 15\] does not fit the model's \['\?', 16\]",
        ),
        ({"x": np.zeros((16,), np.float32)}, "does not fit"),
        ({}, r"missing \['x'\]"),
        ({**_x(), "extra": np.zeros(1)}, r"unknown \['extra'\]"),
        ({"x": [[0.0] * 16]}, "expected a numpy array, got list"),
        ({"x": np.full((1, 16), np.nan, np.float32)}, "NaN or infinity"),
    ],
)
def test_samples_that_do_not_fit_are_refused(
    mlp_path: Path, sample: dict[str, object], message: str
) -> None:
    with pytest.raises(VerificationInputError, match=message) as caught:
        verify(mlp_path, mlp_path, "onnx", precision="fp32", samples=[_x(), sample])  # type: ignore[list-item]
    assert "Sample 2" in caught.value.message
    assert caught.value.code == "verification_inputs"


def test_om_without_pyacl_is_not_run_and_never_passes(mlp_path: Path, without_acl: None) -> None:
    report = verify(mlp_path, mlp_path.with_suffix(".om"), "om", precision="fp16")
    assert report.status == "not_run" and not report.passed
    assert "pyACL is not available on this worker, so the OM was not executed" in report.reason
    assert report.to_dict()["outputs"] == []


def test_om_runner_output_is_matched_as_the_acl_backend_matches_it(mlp_path: Path) -> None:
    run = _reference(mlp_path)
    calls: list[Path] = []

    def renamed(path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        calls.append(path)
        return {"Gemm_7:0:y": run(inputs)["y"].astype(np.float16)}  # <op>:<index>:<ONNX name>

    report = verify(mlp_path, Path("m.om"), "om", precision="fp16", runner_for_om=renamed)
    assert report.status == "passed", report.reason
    assert calls == [Path("m.om")] * 4

    def out_nodes(_path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"Gemm_7:0": run(inputs)["y"]}  # no ONNX part: matched by position

    report = verify(mlp_path, Path("m.om"), "om", precision="fp16", runner_for_om=out_nodes)
    assert report.status == "passed", report.reason

    def other(_path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"Gemm_7:0:output": run(inputs)["y"]}  # the backend would refuse it at load

    report = verify(mlp_path, Path("m.om"), "om", precision="fp16", runner_for_om=other)
    assert report.status == "failed"
    assert "source model output(s) ['y'] are not outputs of the OM" in report.reason
    assert "['Gemm_7:0:output']" in report.reason


def test_noisy_outputs_fail_with_the_reason(mlp_path: Path) -> None:
    run = _reference(mlp_path)
    rng = np.random.default_rng(0)

    def noisy(_path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        y = run(inputs)["y"]
        return {"y": y + rng.normal(0, 0.3, y.shape).astype(np.float32)}

    report = verify(mlp_path, Path("m.om"), "om", precision="fp16", runner_for_om=noisy)
    assert report.status == "failed"
    assert str(report.reason).startswith(
        "1 of 1 output(s) outside the fp16 tolerances on 4 sample(s)"
    )
    assert not report.outputs[0].passed and report.outputs[0].problem


def test_non_finite_outputs_fail_and_stay_json_safe(mlp_path: Path) -> None:
    def broken(_path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"y": np.full((inputs["x"].shape[0], 10), np.nan, np.float32)}

    report = verify(mlp_path, Path("m.om"), "om", precision="fp16", runner_for_om=broken)
    assert report.status == "failed"
    assert report.outputs[0].problem == "the artifact output contains NaN or infinity"
    data = report.to_dict()
    json.dumps(data, allow_nan=False)
    assert data["outputs"][0]["cosine"] is None


def test_an_artifact_that_cannot_run_fails(mlp_path: Path) -> None:
    def crash(_path: Path, _inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise RuntimeError("aclmdlExecute failed, ret 507011")

    report = verify(mlp_path, Path("m.om"), "om", precision="fp16", runner_for_om=crash)
    assert report.status == "failed"
    assert "failed to run sample 1: aclmdlExecute failed" in report.reason


def test_an_artifact_that_cannot_load_fails(mlp_path: Path, tmp_path: Path) -> None:
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not a model")
    report = verify(mlp_path, broken, "onnx", precision="fp32")
    assert report.status == "failed"
    assert str(report.reason).startswith("The artifact cannot be loaded")


def test_shape_mismatch_fails(mlp_path: Path) -> None:
    def wrong(_path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"y": np.zeros((1, 10), np.float32)}

    report = verify(mlp_path, Path("m.om"), "om", precision="fp16", runner_for_om=wrong, batch=2)
    assert "shape [1, 10] differs from the source's [2, 10]" in report.reason


def test_near_ties_may_flip_top1_but_decisive_flips_fail() -> None:
    ref = np.array([[1.0, 0.999, -2.0, -3.0, -4.0, -5.0]], np.float32)
    near = np.array([[0.999, 1.0, -2.0, -3.0, -4.0, -5.0]], np.float32)
    result = compare_output("p", [ref], [near], TOLERANCES["fp16"])
    assert result.top1_agreement == 0.0 and result.passed, result.problem
    decisive = np.array([[1.0, 0.5, 1.2, -3.0, -4.0, -5.0]], np.float32)
    result = compare_output(
        "p",
        [ref],
        [decisive],
        {**TOLERANCES["fp16"], "min_cosine": None, "max_error_vs_range": None},
    )
    assert not result.passed and "top-1 class changed in 1 row(s)" in (result.problem or "")


def test_integer_outputs_must_match_in_fp32() -> None:
    ref = np.array([1, 2, 3, 4], np.int64)
    assert compare_output("i", [ref], [ref.copy()], TOLERANCES["fp32"]).passed
    off = compare_output("i", [ref], [np.array([1, 2, 3, 5])], TOLERANCES["fp32"])
    assert not off.passed and "75.0% of the integer values match" in (off.problem or "")


def test_relative_error_has_a_guarded_denominator() -> None:
    ref = np.array([0.0, 100.0], np.float32)
    got = np.array([1e-3, 100.0], np.float32)
    result = compare_output("r", [ref], [got], TOLERANCES["fp32"])
    assert result.max_rel == pytest.approx(1e-3 / 0.1)  # floor: 1e-3 of the largest |ref|


def test_random_inputs_follow_the_signature(tmp_path: Path) -> None:
    image = models.save(models.convnet(batch="N"), tmp_path / "c.onnx")
    (sample,) = random_inputs(inspect_onnx(image), 1, seed=0, batch=3)
    assert sample["image"].shape == (3, 3, 16, 16) and sample["image"].dtype == np.float32
    assert float(np.abs(sample["image"]).max()) <= 3.0
    dyn = inspect_onnx(models.save(models.dynamic_outputs(), tmp_path / "d.onnx"))
    (sample,) = random_inputs(dyn, 1, seed=0, batch=2)
    assert sample["x"].shape == (2, 16)
    (sample,) = random_inputs(dyn, 1, seed=0, batch=2, dim_sizes={"seq": 7})
    assert sample["x"].shape == (2, 7)
    (sample,) = random_inputs(dyn, 1, seed=0, batch=2, input_shapes={"x": [5, -1]})
    assert sample["x"].shape == (5, 16)
    again = random_inputs(dyn, 2, seed=0, batch=2)
    np.testing.assert_array_equal(again[0]["x"], random_inputs(dyn, 2, seed=0, batch=2)[0]["x"])


def test_random_ints_stay_small_and_strings_are_refused(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["emb"])],
        "emb",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", 4])],
        [helper.make_tensor_value_info("emb", TensorProto.FLOAT, ["batch", 4, 3])],
        initializer=[numpy_helper.from_array(np.ones((5, 3), np.float32), "table")],
    )
    path = models.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "e.onnx"
    )
    (sample,) = random_inputs(inspect_onnx(path), 1, seed=0, batch=1)
    assert sample["ids"].dtype == np.int64 and 0 <= sample["ids"].min() <= sample["ids"].max() < 10
    # Ids 5..9 are outside a 5-row table: the source itself fails, and verify says so.
    with pytest.raises(VerificationInputError, match="The source model itself fails"):
        verify(path, path, "onnx", precision="fp32", random_samples=8)

    strings = helper.make_graph(
        [helper.make_node("Identity", ["s"], ["t"])],
        "s",
        [helper.make_tensor_value_info("s", TensorProto.STRING, [1])],
        [helper.make_tensor_value_info("t", TensorProto.STRING, [1])],
    )
    spath = models.save(
        helper.make_model(strings, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "s.onnx"
    )
    with pytest.raises(VerificationInputError, match="random data cannot be made"):
        random_inputs(inspect_onnx(spath), 1, seed=0, batch=1)


def test_unknown_precision_or_kind_is_refused(mlp_path: Path) -> None:
    with pytest.raises(VerificationInputError, match="Unknown precision"):
        verify(mlp_path, mlp_path, "onnx", precision="int4")  # type: ignore[arg-type]
    with pytest.raises(VerificationInputError, match="Unknown artifact kind"):
        verify(mlp_path, mlp_path, "engine", precision="fp32")  # type: ignore[arg-type]

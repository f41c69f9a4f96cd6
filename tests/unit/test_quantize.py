"""INT8 static quantisation (model_store/quantize.py) on small real ONNX models: the split
keeps the check's inputs apart, what cannot be quantised is refused with the reason, and a
quantised MLP stays close to its FP32 self on inputs it was not calibrated on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from model_store.quantize import (
    MIN_INPUTS,
    Plan,
    QuantizeRefused,
    check_quantizable,
    quantize,
    split,
)
from tests.fixtures.triton import mlp_onnx_bytes


def test_the_split_keeps_a_quarter_aside_and_refuses_too_few() -> None:
    calibrate, held = split(64)
    assert (len(calibrate), len(held)) == (48, 16) and not set(calibrate) & set(held)
    assert held == list(range(48, 64))  # the newest check
    with pytest.raises(QuantizeRefused) as refused:
        split(MIN_INPUTS - 5)
    assert refused.value.code == "too_few_inputs" and "5 more" in str(refused.value.message)


def test_a_quantised_mlp_agrees_with_its_fp32_self_on_other_inputs(tmp_path: Path) -> None:
    source = tmp_path / "mlp.onnx"
    source.write_bytes(mlp_onnx_bytes(in_features=16, out_features=8, seed=3))
    rng = np.random.default_rng(0)
    inputs = [{"x": rng.standard_normal((1, 16)).astype(np.float32)} for _ in range(40)]
    calibrate, held = split(len(inputs))
    result = quantize(source, tmp_path / "int8.onnx", [inputs[i] for i in calibrate], Plan())
    assert result.quantized_nodes > 0 and result.calibration_inputs == 30
    model = onnx.load(str(result.path))
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in model.graph.node}
    fp32 = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    int8 = ort.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
    for i in held:
        a = fp32.run(None, inputs[i])[0].ravel()
        b = int8.run(None, inputs[i])[0].ravel()
        assert float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b)) > 0.99
    with pytest.raises(QuantizeRefused) as again:  # quantising the INT8 version again
        quantize(result.path, tmp_path / "twice.onnx", inputs[:4], Plan())
    assert again.value.code == "already_quantized"


def _model(nodes: list, inputs: list, initializers: list) -> onnx.ModelProto:  # type: ignore[type-arg]
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=initializers)  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_models_without_float_weights_or_with_string_inputs_are_refused() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    no_weights = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [])
    with pytest.raises(QuantizeRefused) as refused:
        check_quantizable(no_weights)
    assert refused.value.code == "no_float_weights"
    weight = helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0] * 4)
    text = helper.make_tensor_value_info("s", TensorProto.STRING, [1])
    strings = _model([helper.make_node("Identity", ["w"], ["y"])], [text], [weight])
    with pytest.raises(QuantizeRefused) as refused:
        check_quantizable(strings)
    assert refused.value.code == "input_type" and "STRING" in str(refused.value.message)


# -- the int8 tolerances ----------------------------------------------------------------------


def _logits(rows: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 10)).astype(np.float32) * 4


def test_int8_passes_one_flip_in_sixteen_and_fails_two() -> None:
    from model_store.verification_compare import TOLERANCES, compare_output

    ref = _logits(16, 1)
    top = ref.argmax(axis=1)
    runner_up = (top + 1) % 10
    rows = np.arange(16)
    ref[rows, runner_up] = ref[rows, top] - 0.2  # every row has a close second
    near = ref + np.random.default_rng(2).standard_normal(ref.shape).astype(np.float32) * 0.02
    one_flip = near.copy()
    one_flip[0, runner_up[0]] = ref[0, top[0]] + 0.1  # row 0 answers its second class
    passed = compare_output("logits", [ref], [one_flip], TOLERANCES["int8"])
    assert passed.top1_agreement == 15 / 16 and passed.passed, passed.problem
    two_flips = one_flip.copy()
    two_flips[1, runner_up[1]] = ref[1, top[1]] + 0.1
    failed = compare_output("logits", [ref], [two_flips], TOLERANCES["int8"])
    assert not failed.passed
    assert "top-1 class agrees on 88% of the inputs (need 90%)" in str(failed.problem)
    # The same answers fail fp16's tighter bars: int8 has its own.
    assert not compare_output("logits", [ref], [one_flip], TOLERANCES["fp16"]).passed


def test_int8_fails_on_a_low_cosine_before_agreement() -> None:
    from model_store.verification_compare import TOLERANCES, compare_output

    ref = _logits(16, 3)
    noisy = ref + np.random.default_rng(4).standard_normal(ref.shape).astype(np.float32) * 2
    result = compare_output("logits", [ref], [noisy], TOLERANCES["int8"])
    assert not result.passed
    assert "range" in str(result.problem) or "cosine" in str(result.problem)

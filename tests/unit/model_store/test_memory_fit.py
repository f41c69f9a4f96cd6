"""Tests for model_store.memory_fit: the sums, the verdicts and the activation estimates."""

from __future__ import annotations

import itertools
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from model_store.memory_fit import (
    IO_FACTOR,
    ActivationEstimate,
    activations_from_onnx,
    activations_from_signature,
    copies_per_device,
    estimate_memory,
    fits,
)
from model_store.text import from_json

MIB = 1 << 20


# --- estimate_memory ---------------------------------------------------------------------


def test_weights_times_copies_plus_activations_at_max_batch() -> None:
    est = estimate_memory(100 * MIB, instances=2, max_batch=8, activation_bytes_per_sample=4 * MIB)
    assert est.batch == 8
    assert est.activation_bytes == 32 * MIB
    assert est.weights_total_bytes == 200 * MIB
    assert est.activations_total_bytes == 64 * MIB
    assert est.total_bytes == 264 * MIB
    data = est.to_dict()
    assert data["total_mib"] == 264.0
    assert data["weights_mib"] == 100.0 and data["activation_mib"] == 32.0
    assert "= 264.0 MiB" in str(from_json(data["description"]))


def test_no_batching_counts_one_request() -> None:
    est = estimate_memory(10, instances=1, max_batch=0, activation_bytes_per_sample=5)
    assert est.batch == 1
    assert est.total_bytes == 15


def test_raising_instances_or_batch_raises_the_estimate() -> None:
    base = estimate_memory(MIB, 1, 1, MIB).total_bytes
    assert estimate_memory(MIB, 2, 1, MIB).total_bytes == 2 * base
    assert estimate_memory(MIB, 1, 4, MIB).total_bytes == 5 * MIB


@pytest.mark.parametrize("args", [(1, 0, 1, 1), (-1, 1, 1, 1), (1, 1, -1, 1), (1, 1, 1, -1)])
def test_nonsense_is_refused(args: tuple[int, int, int, int]) -> None:
    with pytest.raises(ValueError):
        estimate_memory(*args)


# --- fits --------------------------------------------------------------------------------


def test_verdicts() -> None:
    est = estimate_memory(90 * MIB, 1, 0, 0)
    assert fits(est, 200 * MIB, device="NPU 0").state == "fits"
    tight = fits(est, 95 * MIB, device="NPU 0")
    assert (tight.state, tight.fits) == ("tight", True)
    assert "runtime overhead" in tight.message
    no = fits(est, 80 * MIB, device="NPU 3 chip 0")
    assert (no.state, no.fits) == ("does_not_fit", False)
    assert "NPU 3 chip 0" in no.message and "80.0 MiB free" in no.message
    assert "Lower the instance count" in no.message
    unknown = fits(est, None)
    assert (unknown.state, unknown.fits) == ("unknown", None)
    assert fits(est, 90 * MIB).state == "tight"  # exactly full still leaves no headroom
    assert fits(est, 90 * MIB - 1).state == "does_not_fit"
    assert no.to_dict()["needed_mib"] == 90.0


# --- copies_per_device -------------------------------------------------------------------


def test_copies_per_device() -> None:
    assert copies_per_device("onnxruntime", 3)[0] == 3
    assert copies_per_device("acl", 2, devices=4)[0] == 2
    # npu_ge: ceil(instances x instance_exec_blocks / devices) GE sessions per device
    assert copies_per_device("npu_ge", 4, devices=2)[0] == 2
    assert copies_per_device("npu_ge", 3, devices=2)[0] == 2
    assert copies_per_device("npu_ge", 1, devices=8)[0] == 1
    assert (
        copies_per_device("npu_ge", 2, devices=1, parameters={"instance_exec_blocks": "3"})[0] == 6
    )
    copies, note = copies_per_device("npu_ge", 9, devices=1, parameters={"device_exec_blocks": "2"})
    assert copies == 2 and "device_exec_blocks" in note
    assert copies_per_device("npu_ge", 2, parameters={"device_exec_blocks": "x"})[0] == 2


# --- activations from the graph ----------------------------------------------------------


def _save(tmp_path: Path, graph: onnx.GraphProto, name: str = "m.onnx") -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    path = tmp_path / name
    onnx.save(model, path)
    return path


def test_liveness_peak_is_two_live_tensors_of_a_relu_chain(tmp_path: Path) -> None:
    names = ["x", "r1", "r2", "r3", "r4", "y"]
    graph = helper.make_graph(
        [helper.make_node("Relu", [a], [b]) for a, b in itertools.pairwise(names)],
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1000])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1000])],
    )
    act = activations_from_onnx(_save(tmp_path, graph))
    assert act.method == "liveness"
    assert act.unknown_tensors == 0
    # one sample: each tensor 1000 x 4 bytes; at most input + output of one Relu are live
    # (the sum over all six tensors would be 24000)
    assert act.bytes_per_sample == 8000


def test_liveness_of_an_mlp_counts_no_weights(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"]),
            helper.make_node("Relu", ["h"], ["y"]),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        initializer=[helper.make_tensor("W", TensorProto.FLOAT, [16, 10], [0.0] * 160)],
    )
    act = activations_from_onnx(_save(tmp_path, graph))
    assert act.bytes_per_sample == 16 * 4 + 10 * 4  # x and h live during MatMul


def test_fp16_halves_the_bytes_and_constants_count_as_weights(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [
            helper.make_node(
                "Constant",
                [],
                ["c"],
                value=helper.make_tensor("v", TensorProto.FLOAT16, [100000], [0.0] * 100000),
            ),
            helper.make_node("Add", ["x", "c"], ["y"]),
        ],
        "half",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 100000])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 100000])],
    )
    act = activations_from_onnx(_save(tmp_path, graph))
    assert act.bytes_per_sample == 2 * 100000 * 2  # x and y; not the constant


def test_dynamic_dims_other_than_batch_give_a_lower_bound(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "seq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])],
    )
    act = activations_from_onnx(_save(tmp_path, graph))
    assert act.method == "liveness"
    assert act.unknown_tensors >= 1
    assert "lower bound" in act.note


def test_unreadable_files_give_no_figure_and_never_raise(tmp_path: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07garbage" * 10)
    assert activations_from_onnx(junk).method == "none"
    assert activations_from_onnx(tmp_path / "missing.onnx").method == "none"
    big = _save(
        tmp_path,
        helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        ),
    )
    too_big = activations_from_onnx(big, max_bytes=10)
    assert too_big.bytes_per_sample is None and "too large" in too_big.note


def test_round_trip_through_a_json_field() -> None:
    act = ActivationEstimate(123, "liveness", "n", 2)
    assert ActivationEstimate.from_dict(act.to_dict()) == act
    assert ActivationEstimate.from_dict({}) is None
    assert ActivationEstimate.from_dict({"method": "x", "bytes_per_sample": "no"}) is None


# --- activations from the signature (fallback) -------------------------------------------


def test_signature_fallback_is_io_bytes_times_the_factor() -> None:
    signature = {
        "inputs": [{"name": "x", "numpy": "float32", "dims": ["batch", 3, 224, 224]}],
        "outputs": [{"name": "y", "numpy": "float32", "dims": [None, 1000]}],
    }
    act = activations_from_signature(signature)
    assert act.method == "io_factor"
    assert act.bytes_per_sample == (3 * 224 * 224 * 4 + 1000 * 4) * IO_FACTOR


def test_signature_fallback_with_a_fixed_batch_counts_the_whole_request() -> None:
    signature = {"inputs": [{"name": "x", "numpy": "float16", "dims": [4, 10]}], "outputs": []}
    assert activations_from_signature(signature).bytes_per_sample == 4 * 10 * 2 * IO_FACTOR


def test_signature_fallback_says_when_it_knows_nothing() -> None:
    signature = {
        "inputs": [{"name": "ids", "numpy": "int64", "dims": ["batch", "seq"]}],
        "outputs": [{"name": "text", "numpy": "object", "dims": ["batch"]}],
    }
    act = activations_from_signature(signature)
    assert (act.bytes_per_sample, act.method) == (None, "none")
    partial = activations_from_signature(
        {"inputs": [*signature["inputs"], {"name": "m", "numpy": "bool", "dims": [-1, 8]}]}
    )
    assert partial.bytes_per_sample == 8 * IO_FACTOR and "ids" in partial.note

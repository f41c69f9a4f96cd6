"""Small ONNX models for the target tests, built with onnx.helper (no files in the repo)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Dims = Sequence[int | str | None]


def _weights(name: str, shape: tuple[int, ...], seed: int) -> onnx.TensorProto:
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(shape[0]) if len(shape) == 2 else 0.3
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _model(graph: onnx.GraphProto, opset: int = 17, **domains: int) -> onnx.ModelProto:
    imports = [helper.make_opsetid("", opset)]
    imports += [helper.make_opsetid(d.replace("_", "."), v) for d, v in domains.items()]
    model = helper.make_model(graph, opset_imports=imports, producer_name="target-tests")
    model.ir_version = 8
    return model


def mlp(
    *,
    hidden: int = 32,
    inputs: int = 16,
    classes: int = 10,
    batch: int | str = "batch",
    opset: int = 17,
    seed: int = 0,
) -> onnx.ModelProto:
    """x[batch, 16] -> MatMul/Add/Relu -> MatMul/Add -> y[batch, 10] (random weights)."""
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h1"]),
        helper.make_node("Add", ["h1", "b1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("Identity", ["r1"], ["r1_copy"]),  # something for onnxslim to remove
        helper.make_node("MatMul", ["r1_copy", "W2"], ["h2"]),
        helper.make_node("Add", ["h2", "b2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, inputs])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, classes])],
        initializer=[
            _weights("W1", (inputs, hidden), seed),
            _weights("b1", (hidden,), seed + 1),
            _weights("W2", (hidden, classes), seed + 2),
            _weights("b2", (classes,), seed + 3),
        ],
    )
    return _model(graph, opset)


def convnet(*, batch: int | str = "N", size: int = 16, opset: int = 17) -> onnx.ModelProto:
    """image[N,3,16,16] -> Conv/Relu -> GlobalAveragePool -> Flatten -> Gemm -> logits[N,10]."""
    nodes = [
        helper.make_node("Conv", ["image", "K", "kb"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "G", "gb"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "convnet",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])],
        initializer=[
            _weights("K", (8, 3, 3, 3), 10),
            _weights("kb", (8,), 11),
            _weights("G", (10, 8), 12),
            _weights("gb", (10,), 13),
        ],
    )
    return _model(graph, opset)


def custom_domain() -> onnx.ModelProto:
    """x -> Relu -> my.custom.MyOp -> y."""
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("MyOp", ["r"], ["y"], domain="my.custom"),
        ],
        "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
    )
    return _model(graph, 17, my_custom=1)


def fp16_io() -> onnx.ModelProto:
    """x float16[batch, 4] -> Relu -> y float16; plus a bool mask output."""
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["y"]),
            helper.make_node("Greater", ["y", "zero"], ["mask"]),
        ],
        "fp16io",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", 4]),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, ["batch", 4]),
        ],
        initializer=[numpy_helper.from_array(np.zeros(1, np.float16), "zero")],
    )
    return _model(graph)


def dynamic_outputs(output_dims: dict[str, Dims] | None = None) -> onnx.ModelProto:
    """x[batch, seq] -> Relu -> named[batch, seq], and Identity copies with the given dims."""
    output_dims = output_dims or {}
    nodes = [helper.make_node("Relu", ["x"], ["named"])]
    outputs = [helper.make_tensor_value_info("named", TensorProto.FLOAT, ["batch", "seq"])]
    for name, dims in output_dims.items():
        nodes.append(helper.make_node("Identity", ["named"], [name]))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims)))
    graph = helper.make_graph(
        nodes,
        "dynout",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])],
        outputs,
    )
    return _model(graph)


def opset18_reduce() -> onnx.ModelProto:
    """Opset 18 ReduceMean with axes as an input (an attribute before 18)."""
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("ReduceMean", ["r", "axes"], ["y"], keepdims=1),
        ],
        "reduce18",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1])],
        initializer=[numpy_helper.from_array(np.array([1], np.int64), "axes")],
    )
    return _model(graph, 18)


def save(model: onnx.ModelProto, path: Path) -> Path:
    """Writes ``model`` to ``path`` (creating the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(path))
    return path


def save_external(model: onnx.ModelProto, path: Path, location: str = "weights.bin") -> Path:
    """Writes ``model`` with every initializer in ``location`` beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=0,
    )
    return path

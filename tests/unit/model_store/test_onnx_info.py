"""Tests for model_store.onnx_info: inspection and safe external-data handling."""

from __future__ import annotations

import hashlib
import io
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from model_store.config import ModelConfig, TensorSpec
from model_store.config_lint import lint
from model_store.errors import InvalidModel, MissingExternalData, UnsafeExternalData
from model_store.onnx_info import OnnxInfo, inspect_onnx


def mlp_model(opset: int = 17, initializers_as_inputs: bool = False) -> onnx.ModelProto:
    """y = Relu(x @ W + b) with a symbolic batch dim, W 16x10, b 10."""
    weight = numpy_helper.from_array(np.ones((16, 10), np.float32), "W")
    bias = numpy_helper.from_array(np.zeros(10, np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"]),
            helper.make_node("Add", ["h", "b"], ["a"]),
            helper.make_node("Relu", ["a"], ["y"]),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        initializer=[weight, bias],
    )
    if initializers_as_inputs:  # what exporters for IR < 4 did
        graph.input.extend(
            [
                helper.make_tensor_value_info("W", TensorProto.FLOAT, [16, 10]),
                helper.make_tensor_value_info("b", TensorProto.FLOAT, [10]),
            ]
        )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="unit-test"
    )
    model.producer_version = "1.0"
    return model


def save(model: onnx.ModelProto, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.SerializeToString())
    return path


def with_external_weight(location: str, length: int | None = None) -> onnx.ModelProto:
    """The MLP with W marked as stored in ``location`` (without writing that file)."""
    model = mlp_model()
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    weight.ClearField("float_data")
    weight.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": "0", "length": str(length or 16 * 10 * 4)}
    for key, value in entries.items():
        weight.external_data.add(key=key, value=value)
    return model


# Signature and statistics --------------------------------------------------------


def test_it_reads_the_signature_with_symbolic_dims(tmp_path: Path) -> None:
    info = inspect_onnx(save(mlp_model(), tmp_path / "m.onnx"))
    assert [(t.name, t.dims) for t in info.inputs] == [("x", ["batch", 16])]
    assert [(t.name, t.dims) for t in info.outputs] == [("y", ["batch", 10])]
    first = info.inputs[0]
    assert (first.onnx_type, first.triton_type, first.numpy_dtype) == (
        "FLOAT",
        "TYPE_FP32",
        "float32",
    )


def test_it_reads_opsets_producer_and_ir_version(tmp_path: Path) -> None:
    info = inspect_onnx(save(mlp_model(opset=14), tmp_path / "m.onnx"))
    assert info.opset_imports == {"ai.onnx": 14}
    assert info.default_opset == 14
    assert info.ir_version == mlp_model().ir_version
    assert (info.producer_name, info.producer_version) == ("unit-test", "1.0")


def test_it_counts_operators_parameters_size_and_hash(tmp_path: Path) -> None:
    path = save(mlp_model(), tmp_path / "m.onnx")
    info = inspect_onnx(path)
    assert info.operators == {"Add": 1, "MatMul": 1, "Relu": 1}
    assert info.node_count == 3
    assert info.parameter_count == 16 * 10 + 10
    assert info.file_size == path.stat().st_size
    assert info.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert not info.uses_external_data
    assert info.external_data_files == []


def test_initializers_listed_as_graph_inputs_are_not_reported_as_inputs(tmp_path: Path) -> None:
    info = inspect_onnx(save(mlp_model(initializers_as_inputs=True), tmp_path / "m.onnx"))
    assert [t.name for t in info.inputs] == ["x"]


def test_operators_inside_subgraphs_are_counted_with_custom_domains_prefixed(
    tmp_path: Path,
) -> None:
    def branch(name: str, op: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [1])
        const = numpy_helper.from_array(np.ones(1, np.float32), f"{name}_k")
        node = helper.make_node(op, [f"{name}_k"], [f"{name}_out"])
        return helper.make_graph([node], name, [], [out], initializer=[const])

    nodes = [
        helper.make_node(
            "If",
            ["cond"],
            ["y"],
            then_branch=branch("then", "Relu"),
            else_branch=branch("else", "Neg"),
        ),
        helper.make_node("FusedGemm", ["y"], ["z"], domain="com.microsoft"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    info = inspect_onnx(save(model, tmp_path / "m.onnx"))
    assert info.operators == {"If": 1, "Neg": 1, "Relu": 1, "com.microsoft.FusedGemm": 1}
    assert info.node_count == 4
    assert info.parameter_count == 2
    assert info.opset_imports == {"ai.onnx": 17, "com.microsoft": 1}
    assert info.inputs[0].dims == []
    assert info.outputs[0].dims is None  # rank unknown


def test_unknown_dims_and_types_triton_cannot_carry_are_reported_as_none(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [None, 3])],
        [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [None, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    info = inspect_onnx(save(model, tmp_path / "m.onnx"))
    tensor = info.inputs[0]
    assert (tensor.onnx_type, tensor.triton_type, tensor.numpy_dtype) == ("COMPLEX64", None, None)
    assert tensor.dims == [None, 3]


def test_non_tensor_inputs_are_described_by_their_kind(tmp_path: Path) -> None:
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    graph = helper.make_graph(
        [helper.make_node("SequenceLength", ["s"], ["n"])],
        "g",
        [seq],
        [helper.make_tensor_value_info("n", TensorProto.INT64, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    info = inspect_onnx(save(model, tmp_path / "m.onnx"))
    assert (info.inputs[0].onnx_type, info.inputs[0].triton_type, info.inputs[0].dims) == (
        "sequence",
        None,
        None,
    )


def test_signature_dims_feed_config_lint(tmp_path: Path) -> None:
    info: OnnxInfo = inspect_onnx(save(mlp_model(), tmp_path / "m.onnx"))
    cfg = ModelConfig(
        name="mlp",
        backend="onnxruntime",
        max_batch_size=8,
        inputs=[TensorSpec("x", "TYPE_FP32", [16])],
        outputs=[TensorSpec("y", "TYPE_FP32", [10])],
    )
    assert lint(cfg, info.signature_dims()) == []


# Files that are not ONNX models --------------------------------------------------

PNG_HEADER = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"
)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is empty"),
        (PNG_HEADER, "PNG image"),
        (b"PK\x03\x04" + b"\x00" * 40, "ZIP archive"),
        (b"\xff\xd8\xff\xe0" + b"\x00" * 40, "JPEG"),
        (b"hello, I am a text file\n", "Not an ONNX model"),
        (b"\x08\x07", "Not an ONNX model"),  # a valid protobuf with only ir_version
    ],
)
def test_files_that_are_not_onnx_are_refused_plainly(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    with pytest.raises(InvalidModel) as caught:
        inspect_onnx(path)
    assert expected in caught.value.message
    assert "Export the model to ONNX again" in caught.value.message
    assert caught.value.code == "invalid_model"


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes_are_refused_as_invalid_models(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(random.Random(seed).randbytes(4096))
    with pytest.raises(InvalidModel, match="Not an ONNX model"):
        inspect_onnx(path)


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.99])
def test_a_truncated_model_is_refused(tmp_path: Path, keep: float) -> None:
    data = mlp_model().SerializeToString()
    path = tmp_path / "model.onnx"
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(InvalidModel, match="Not an ONNX model"):
        inspect_onnx(path)


def test_a_missing_model_file_is_an_invalid_model(tmp_path: Path) -> None:
    with pytest.raises(InvalidModel, match="cannot be read"):
        inspect_onnx(tmp_path / "nothing.onnx")


def test_a_graph_without_outputs_is_refused(tmp_path: Path) -> None:
    model = mlp_model()
    model.graph.ClearField("output")
    with pytest.raises(InvalidModel, match="no outputs"):
        inspect_onnx(save(model, tmp_path / "m.onnx"))


# External data -------------------------------------------------------------------


def test_external_data_inside_the_folder_is_accepted_and_listed(tmp_path: Path) -> None:
    path = tmp_path / "model" / "model.onnx"
    path.parent.mkdir()
    onnx.save_model(
        mlp_model(), path, save_as_external_data=True, location="weights.bin", size_threshold=0
    )
    info = inspect_onnx(path)
    assert info.uses_external_data
    assert info.external_data_files == ["weights.bin"]
    assert info.parameter_count == 170
    assert info.file_size == path.stat().st_size


def test_external_data_in_a_subfolder_is_accepted(tmp_path: Path) -> None:
    path = save(with_external_weight("data/w.bin"), tmp_path / "m" / "model.onnx")
    (path.parent / "data").mkdir()
    (path.parent / "data" / "w.bin").write_bytes(b"\x00" * 640)
    assert inspect_onnx(path).external_data_files == ["data/w.bin"]


@pytest.mark.parametrize(
    "location",
    [
        "../x.bin",
        "data/../../x.bin",
        "..\\x.bin",
        "/etc/passwd",
        "C:\\Windows\\x.bin",
        "\\\\server\\x",
    ],
)
def test_external_data_outside_the_folder_is_refused(tmp_path: Path, location: str) -> None:
    (tmp_path / "x.bin").write_bytes(b"\x00" * 640)
    path = save(with_external_weight(location), tmp_path / "m" / "model.onnx")
    with pytest.raises(UnsafeExternalData) as caught:
        inspect_onnx(path)
    assert not isinstance(caught.value, MissingExternalData)
    assert "outside" in caught.value.message or "climbs out" in caught.value.message


def test_external_data_through_a_symlink_that_points_out_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\x00" * 640)
    path = save(with_external_weight("w.bin"), tmp_path / "m" / "model.onnx")
    (path.parent / "w.bin").symlink_to(secret)
    with pytest.raises(UnsafeExternalData, match="leads outside"):
        inspect_onnx(path)


def test_external_data_through_a_symlinked_folder_that_points_out_is_refused(
    tmp_path: Path,
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "w.bin").write_bytes(b"\x00" * 640)
    path = save(with_external_weight("data/w.bin"), tmp_path / "m" / "model.onnx")
    (path.parent / "data").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafeExternalData, match="leads outside"):
        inspect_onnx(path)


def test_a_dangling_symlink_that_points_out_is_refused_as_unsafe(tmp_path: Path) -> None:
    path = save(with_external_weight("w.bin"), tmp_path / "m" / "model.onnx")
    (path.parent / "w.bin").symlink_to("/nonexistent/elsewhere.bin")
    with pytest.raises(UnsafeExternalData, match="leads outside"):
        inspect_onnx(path)


def test_a_missing_external_data_file_has_its_own_message(tmp_path: Path) -> None:
    path = save(with_external_weight("weights.bin"), tmp_path / "m" / "model.onnx")
    with pytest.raises(MissingExternalData) as caught:
        inspect_onnx(path)
    assert "missing" in caught.value.message
    assert "Upload it together with the model" in caught.value.message
    assert caught.value.code == "missing_external_data"


def test_external_data_that_names_a_folder_is_refused(tmp_path: Path) -> None:
    path = save(with_external_weight("data"), tmp_path / "m" / "model.onnx")
    (path.parent / "data").mkdir()
    with pytest.raises(MissingExternalData, match="not a regular file"):
        inspect_onnx(path)


@pytest.mark.parametrize("location", ["", ".", "a\x00b"])
def test_external_data_without_a_usable_location_is_refused(tmp_path: Path, location: str) -> None:
    path = save(with_external_weight(location), tmp_path / "m" / "model.onnx")
    with pytest.raises(UnsafeExternalData):
        inspect_onnx(path)


def test_a_truncated_external_data_file_is_refused(tmp_path: Path) -> None:
    path = save(with_external_weight("w.bin"), tmp_path / "m" / "model.onnx")
    (path.parent / "w.bin").write_bytes(b"\x00" * 100)
    with pytest.raises(InvalidModel, match="may be truncated"):
        inspect_onnx(path)


def test_external_data_in_a_constant_inside_a_subgraph_is_checked(tmp_path: Path) -> None:
    tensor = numpy_helper.from_array(np.ones(1, np.float32), "k")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value="/etc/passwd")
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["out"], value=tensor)],
        "then",
        [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1])],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)],
        "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsafeExternalData, match="absolute path"):
        inspect_onnx(save(model, tmp_path / "m" / "model.onnx"))


def test_inspection_never_reads_external_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m" / "model.onnx"
    path.parent.mkdir()
    onnx.save_model(
        mlp_model(), path, save_as_external_data=True, location="w.bin", size_threshold=0
    )
    opened: list[str] = []
    real_io_open, real_os_open = io.open, os.open

    def spy_io(file: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(os.fspath(file))
        return real_io_open(file, *args, **kwargs)

    def spy_os(file: str, *args: Any, **kwargs: Any) -> int:
        opened.append(os.fspath(file))
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr(io, "open", spy_io)
    monkeypatch.setattr(os, "open", spy_os)
    monkeypatch.setattr(onnx, "load_external_data_for_model", pytest.fail)
    inspect_onnx(path)
    assert any(name.endswith("model.onnx") for name in opened)  # the spy works
    assert not any(name.endswith("w.bin") for name in opened)


def external_constant(location: str) -> TensorProto:
    """A one-float tensor whose data is said to live in the file ``location``."""
    tensor = numpy_helper.from_array(np.ones(1, np.float32), "k")
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=location)
    return tensor


def branch(tensor: TensorProto, name: str) -> onnx.GraphProto:
    """A subgraph whose only node is a Constant holding ``tensor``."""
    return helper.make_graph(
        [helper.make_node("Constant", [], ["out"], value=tensor)],
        name,
        [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1])],
    )


def model_with_local_function(function_nodes: list[onnx.NodeProto]) -> onnx.ModelProto:
    """y = local.F(c): the main graph calls a local function made of ``function_nodes``."""
    function = helper.make_function(
        "local", "F", ["c"], ["y"], function_nodes, [helper.make_opsetid("", 17)]
    )
    graph = helper.make_graph(
        [helper.make_node("F", ["c"], ["y"], domain="local")],
        "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
        functions=[function],
    )


def test_external_data_in_a_subgraph_of_a_local_function_is_checked(tmp_path: Path) -> None:
    evil = branch(external_constant("../../etc/passwd"), "then")
    safe = branch(numpy_helper.from_array(np.ones(1, np.float32), "k"), "else")
    function_if = helper.make_node("If", ["c"], ["y"], then_branch=evil, else_branch=safe)
    model = model_with_local_function([function_if])
    top_level = save(with_external_weight("../../etc/passwd"), tmp_path / "top" / "model.onnx")
    with pytest.raises(UnsafeExternalData) as expected:
        inspect_onnx(top_level)
    with pytest.raises(UnsafeExternalData) as caught:
        inspect_onnx(save(model, tmp_path / "m" / "model.onnx"))
    assert type(caught.value) is type(expected.value) is UnsafeExternalData
    assert caught.value.code == expected.value.code == "unsafe_external_data"
    assert "climbs out of the model's folder" in caught.value.message


def test_external_data_nested_deeper_in_a_local_function_is_checked(tmp_path: Path) -> None:
    # If inside a Loop body inside the function: subgraphs are walked at any depth.
    evil_if = helper.make_node(
        "If",
        ["cond"],
        ["out"],
        then_branch=branch(external_constant("/etc/passwd"), "then"),
        else_branch=branch(numpy_helper.from_array(np.ones(1, np.float32), "k"), "else"),
    )
    body = helper.make_graph(
        [evil_if, helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("out", TensorProto.FLOAT, [1]),
        ],
    )
    loop = helper.make_node("Loop", ["", "c"], ["y"], body=body)
    model = model_with_local_function([loop])
    with pytest.raises(UnsafeExternalData, match="absolute path"):
        inspect_onnx(save(model, tmp_path / "m" / "model.onnx"))


def test_external_data_in_a_local_function_attribute_default_is_checked(tmp_path: Path) -> None:
    model = model_with_local_function([helper.make_node("Identity", ["c"], ["y"])])
    default = helper.make_attribute("value", external_constant("../secret.bin"))
    model.functions[0].attribute_proto.append(default)
    (tmp_path / "secret.bin").write_bytes(b"\x00" * 4)
    with pytest.raises(UnsafeExternalData, match="climbs out"):
        inspect_onnx(save(model, tmp_path / "m" / "model.onnx"))


def test_a_local_function_with_a_safe_subgraph_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "m" / "model.onnx"
    path.parent.mkdir()
    (path.parent / "k.bin").write_bytes(b"\x00" * 4)
    inner = external_constant("k.bin")
    safe = branch(numpy_helper.from_array(np.ones(1, np.float32), "k"), "else")
    function_if = helper.make_node(
        "If", ["c"], ["y"], then_branch=branch(inner, "then"), else_branch=safe
    )
    info = inspect_onnx(save(model_with_local_function([function_if]), path))
    assert info.external_data_files == ["k.bin"]

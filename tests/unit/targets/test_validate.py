"""Tests for model_store.validate: every problem is a finding with advice, never an exception."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from model_store.targets import get_target
from model_store.validate import plain_ort_error, supported_opsets, validate_model
from tests.unit.targets import models

ORT = get_target("onnxruntime")


def _one_op(
    op: str, elem: int, opset: int, *, domain: str = "", name: str = "x"
) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node(op, [name], ["y"], domain=domain)],
        "one",
        [helper.make_tensor_value_info(name, elem, ["batch", 2])],
        [helper.make_tensor_value_info("y", elem, ["batch", 2])],
    )
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 8
    return model


def _codes(
    path: Path, target: str = "onnxruntime", options: dict[str, object] | None = None
) -> list[str]:
    report = validate_model(path, get_target(target), options or {})
    assert all(f.message and f.advice for f in report.findings)
    return [f.code for f in report.findings]


def test_a_good_model_is_ok_with_resolved_options(tmp_path: Path) -> None:
    report = validate_model(models.save(models.mlp(), tmp_path / "m.onnx"), ORT, {"fp16": "no"})
    assert report.ok and report.findings == []
    assert report.info is not None and report.info.inputs[0].name == "x"
    assert report.options is not None and report.options["max_batch_size"] == 8
    json.dumps(report.to_dict())


def test_an_unreadable_file_is_a_finding_not_an_exception(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(b"PK\x03\x04 a zip file")
    report = validate_model(path, ORT, {})
    assert not report.ok and report.info is None
    assert [f.code for f in report.findings] == ["invalid_model"]
    assert "ZIP archive" in report.findings[0].message


def test_custom_domain_operators_are_unknown(tmp_path: Path) -> None:
    report = validate_model(models.save(models.custom_domain(), tmp_path / "c.onnx"), ORT, {})
    assert not report.ok
    assert [f.code for f in report.errors] == ["unknown_operator"]
    assert str(report.errors[0].message).startswith("unknown operator MyOp (domain 'my.custom'")


def test_unknown_standard_domain_operator_is_reported_once(tmp_path: Path) -> None:
    path = models.save(_one_op("Relux", TensorProto.FLOAT, 17), tmp_path / "u.onnx")
    assert _codes(path) == ["unknown_operator"]  # the checker's own complaint is not repeated


def test_local_functions_and_contrib_operators_are_known(tmp_path: Path) -> None:
    model = _one_op("Gelu", TensorProto.FLOAT, 17, domain="com.microsoft")
    path = models.save(model, tmp_path / "g.onnx")
    assert "unknown_operator" not in _codes(path)


def test_too_new_opset_and_ir_version(tmp_path: Path) -> None:
    newest = supported_opsets()[""]
    model = _one_op("Relu", TensorProto.FLOAT, newest + 1)
    model.ir_version = onnx.IR_VERSION + 1
    codes = _codes(models.save(model, tmp_path / "n.onnx"))
    assert codes[:2] == ["ir_version_unsupported", "opset_unsupported"]
    report = validate_model(tmp_path / "n.onnx", ORT, {})
    opset = next(f for f in report.findings if f.code == "opset_unsupported")
    assert f"supports up to {newest}" in opset.message and "opset_version" in opset.advice


def test_checker_failures_are_explained(tmp_path: Path) -> None:
    path = models.save(_one_op("Sqrt", TensorProto.INT32, 17), tmp_path / "s.onnx")
    report = validate_model(path, ORT, {})
    checker = [f for f in report.findings if f.code == "onnx_checker_failed"]
    assert checker and str(checker[0].message).startswith("The ONNX checker rejects the model:")
    assert "Re-export" in checker[0].advice


def test_onnxruntime_load_failures_are_reported_in_plain_words(tmp_path: Path) -> None:
    path = models.save(_one_op("Relu", TensorProto.INT16, 14), tmp_path / "r.onnx")
    report = validate_model(path, ORT, {})
    assert [f.code for f in report.errors] == ["onnxruntime_load_failed"]
    message = report.errors[0].message
    assert "Could not find an implementation for Relu(14)" in message
    assert "[ONNXRuntimeError]" not in message
    # Only the CPU target needs ONNX Runtime to load it.
    assert "onnxruntime_load_failed" not in _codes(path, "npu_ge")


def test_bad_tensor_names_are_errors(tmp_path: Path) -> None:
    path = models.save(
        _one_op("Relu", TensorProto.FLOAT, 17, name="x\nnewline"), tmp_path / "t.onnx"
    )
    assert "invalid_tensor_name" in _codes(path)


def test_a_model_without_inputs_is_an_error(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["y"], value=helper.make_tensor("v", 1, [1], [1.0]))],
        "const",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    codes = _codes(models.save(model, tmp_path / "c.onnx"))
    assert codes.count("no_inputs") == 1


def test_invalid_options_become_a_finding(tmp_path: Path) -> None:
    path = models.save(models.mlp(), tmp_path / "m.onnx")
    report = validate_model(path, ORT, {"turbo": True})
    assert [f.code for f in report.findings] == ["invalid_options"]
    assert report.options is None and "turbo" in report.findings[0].message


def test_target_rules_are_included(tmp_path: Path) -> None:
    path = models.save(models.fp16_io(), tmp_path / "h.onnx")
    report = validate_model(path, get_target("npu_ge"), {"target_opset": 0})
    assert report.ok  # warnings only
    assert {f.code for f in report.warnings} >= {"io_type_needs_explicit_config"}


def test_external_data_models_are_checked_by_path(tmp_path: Path) -> None:
    path = models.save_external(models.mlp(), tmp_path / "e" / "m.onnx")
    report = validate_model(path, ORT, {})
    assert report.ok, report.findings
    assert report.info is not None and report.info.uses_external_data


def test_missing_external_data_is_a_finding(tmp_path: Path) -> None:
    path = models.save_external(models.mlp(), tmp_path / "e" / "m.onnx", "w.bin")
    (tmp_path / "e" / "w.bin").unlink()
    report = validate_model(path, ORT, {})
    assert [f.code for f in report.findings] == ["missing_external_data"]


@pytest.mark.parametrize(
    ("raw", "plain"),
    [
        (
            "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation",
            "Could not find an implementation",
        ),
        (
            "[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/onnxruntime/core/graph/x.h:46 "
            "void onnxruntime::f(int) Unsupported model IR version: 20",
            "Unsupported model IR version: 20",
        ),
    ],
)
def test_plain_ort_error(raw: str, plain: str) -> None:
    assert plain_ort_error(RuntimeError(raw)) == plain

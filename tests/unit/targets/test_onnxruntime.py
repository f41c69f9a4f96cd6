"""Tests for the target registry, option parsing (common to all targets) and the CPU target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import onnx
import pytest

from model_store.config import parse_pbtxt, render_pbtxt
from model_store.config_lint import lint
from model_store.onnx_info import inspect_onnx
from model_store.targets import (
    BuildCancelled,
    InvalidOptions,
    UnknownTarget,
    all_targets,
    get_target,
    options_json_schema,
)
from model_store.targets.onnxruntime import OnnxRuntimeTarget
from model_store.verify import verify
from tests.unit.targets import models
from tests.unit.targets.conftest import Build

ORT = get_target("onnxruntime")


@pytest.fixture
def mlp_path(tmp_path: Path) -> Path:
    return models.save(models.mlp(), tmp_path / "src" / "mlp.onnx")


def _codes(findings: list[Any]) -> list[str]:
    return [f.code for f in findings]


# Registry and schema -----------------------------------------------------------------


def test_registry_lists_three_targets_cpu_first() -> None:
    assert [t.name for t in all_targets()] == ["onnxruntime", "npu_ge", "acl"]
    assert isinstance(ORT, OnnxRuntimeTarget)
    assert [t.hardware_verified for t in all_targets()] == [True, False, False]
    assert [t.needs_cann for t in all_targets()] == [False, True, True]


def test_an_unknown_target_is_an_invalid_options_error() -> None:
    with pytest.raises(UnknownTarget, match="Choose one of: onnxruntime, npu_ge, acl") as caught:
        get_target("tensorrt")
    assert isinstance(caught.value, InvalidOptions)
    assert caught.value.code == "unknown_target"


def test_targets_describe_themselves_as_json(no_cann: dict[str, str]) -> None:
    for target in all_targets():
        data = json.loads(json.dumps(target.to_dict(no_cann)))
        assert data["name"] == target.name
        assert {o["name"] for o in data["options"]} == {s.name for s in target.option_specs()}
    assert ORT.to_dict(no_cann)["status"]["available"] is True


def test_options_json_schema_matches_the_specs() -> None:
    schema = options_json_schema(ORT)
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["max_batch_size"]["type"] == ["integer", "null"]  # null = automatic
    assert props["max_batch_size"]["minimum"] == 0
    assert props["ort_optimization_level"]["enum"] == ["disabled", "basic", "extended", "all"]
    assert props["ort_optimization_level"]["default"] == "basic"
    assert props["preferred_batch_sizes"]["items"]["type"] == "integer"
    assert props["input_shapes"]["type"] == ["object", "null"]
    assert schema["required"] == []
    assert options_json_schema(get_target("acl"))["required"] == ["soc_version"]
    assert "pattern" in options_json_schema(get_target("npu_ge"))["properties"]["device_ids"]


# Option parsing ------------------------------------------------------------------------


def test_defaults_are_filled_and_automatic_values_resolved(mlp_path: Path) -> None:
    assert ORT.parse_options({}) == {
        "simplify": True,
        "ort_optimization_level": "basic",
        "fp16": False,
        "input_shapes": None,
        "max_batch_size": None,
        "dynamic_batching": None,
        "preferred_batch_sizes": [],
        "max_queue_delay_us": 100,
        "instance_count": 1,
    }
    resolved = ORT.parse_options({}, info=inspect_onnx(mlp_path))
    assert (resolved["max_batch_size"], resolved["dynamic_batching"]) == (8, True)


def test_a_fixed_first_axis_means_no_batching_by_default(tmp_path: Path) -> None:
    info = inspect_onnx(models.save(models.convnet(batch=1), tmp_path / "c.onnx"))
    resolved = ORT.parse_options({}, info=info)
    assert (resolved["max_batch_size"], resolved["dynamic_batching"]) == (0, False)


def test_fixing_the_batch_axis_turns_batching_off(mlp_path: Path) -> None:
    resolved = ORT.parse_options({"input_shapes": "x:1,16"}, info=inspect_onnx(mlp_path))
    assert resolved["input_shapes"] == {"x": [1, 16]}
    assert resolved["max_batch_size"] == 0


def test_form_text_is_accepted_where_it_parses_exactly() -> None:
    parsed = ORT.parse_options(
        {"max_batch_size": "4", "fp16": "true", "preferred_batch_sizes": "4, 2", "simplify": ""}
    )
    assert parsed["max_batch_size"] == 4
    assert parsed["fp16"] is True
    assert parsed["preferred_batch_sizes"] == [2, 4]
    assert parsed["simplify"] is True  # empty field -> default


def test_parsing_is_idempotent(mlp_path: Path) -> None:
    once = ORT.parse_options(
        {"input_shapes": {"x": "2,16"}, "fp16": "yes"}, info=inspect_onnx(mlp_path)
    )
    assert ORT.parse_options(once) == once


def test_unknown_keys_are_refused_by_name() -> None:
    with pytest.raises(InvalidOptions, match=r"Unknown option.*max_batch, speed") as caught:
        ORT.parse_options({"max_batch": 4, "speed": "fast"})
    assert caught.value.code == "invalid_options"


@pytest.mark.parametrize(
    ("raw", "field", "reason"),
    [
        ({"simplify": 3}, "simplify", "expected true or false"),
        ({"max_batch_size": "eight"}, "max_batch_size", "whole number"),
        ({"max_batch_size": 2.5}, "max_batch_size", "whole number"),
        ({"max_batch_size": True}, "max_batch_size", "whole number"),
        ({"ort_optimization_level": "max"}, "ort_optimization_level", "not one of"),
        ({"preferred_batch_sizes": "a,b"}, "preferred_batch_sizes", "whole number"),
        ({"preferred_batch_sizes": {"a": 1}}, "preferred_batch_sizes", "list of whole numbers"),
        ({"input_shapes": 5}, "input_shapes", "input names mapped to dims"),
        ({"input_shapes": "x=1,16"}, "input_shapes", "input_name:1,3,224,224"),
        ({"input_shapes": {"x": "1,0"}}, "input_shapes", ">= 1"),
    ],
)
def test_wrong_types_name_the_field(raw: dict[str, object], field: str, reason: str) -> None:
    with pytest.raises(InvalidOptions, match=reason) as caught:
        ORT.parse_options(raw)
    assert f"'{field}'" in caught.value.message


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"max_batch_size": -1}, "max_batch_size"),
        ({"max_batch_size": 5000}, "max_batch_size"),
        ({"instance_count": 0}, "instance_count"),
        ({"max_queue_delay_us": -5}, "max_queue_delay_us"),
        ({"preferred_batch_sizes": [0, 4]}, "preferred_batch_sizes"),
    ],
)
def test_out_of_range_values_name_the_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidOptions, match=f"'{field}'.*(below the minimum|above the maximum)"):
        ORT.parse_options(raw)


def test_contradictory_batching_options_are_refused() -> None:
    with pytest.raises(InvalidOptions, match=r"dynamic_batching.*max_batch_size' is 0"):
        ORT.parse_options({"dynamic_batching": True, "max_batch_size": 0})
    with pytest.raises(InvalidOptions, match="above max_batch_size 4"):
        ORT.parse_options({"max_batch_size": 4, "preferred_batch_sizes": [2, 8]})
    with pytest.raises(InvalidOptions, match="fixed shapes need every dim >= 1"):
        ORT.parse_options({"input_shapes": "x:-1,16"})


# Model checks --------------------------------------------------------------------------


def test_a_clean_model_has_no_findings(mlp_path: Path) -> None:
    info = inspect_onnx(mlp_path)
    assert ORT.check_model(info, ORT.parse_options({}, info=info)) == []


def test_batching_a_fixed_first_axis_is_an_error(tmp_path: Path) -> None:
    info = inspect_onnx(models.save(models.convnet(batch=1), tmp_path / "c.onnx"))
    found = ORT.check_model(info, ORT.parse_options({"max_batch_size": 4}))
    assert _codes(found) == ["batch_axis_not_dynamic", "batch_axis_not_dynamic"]
    assert all(f.level == "error" and f.advice for f in found)


def test_level_all_fp16_and_bad_shapes_are_reported(mlp_path: Path) -> None:
    info = inspect_onnx(mlp_path)
    found = ORT.check_model(
        info,
        ORT.parse_options(
            {"ort_optimization_level": "all", "fp16": True, "input_shapes": "y:1,10;x:1,16,1"}
        ),
    )
    assert _codes(found) == [
        "shape_for_unknown_input",
        "shape_rank_mismatch",
        "cpu_specific_optimisation",
        "fp16_on_cpu",
    ]
    assert [f.level for f in found] == ["error", "error", "warning", "warning"]


def test_invalid_resolved_options_become_a_finding(mlp_path: Path) -> None:
    options = ORT.parse_options({"preferred_batch_sizes": [16]})  # fine until the model says 8
    found = ORT.check_model(inspect_onnx(mlp_path), options)
    assert _codes(found) == ["invalid_options"]


# Build ------------------------------------------------------------------------------------


def test_build_writes_one_optimised_model_equal_to_the_source(build: Build, mlp_path: Path) -> None:
    result, lines = build(ORT, mlp_path)
    assert result.artifact_name == "model.onnx"
    assert sorted(p.name for p in result.artifact.parent.iterdir()) == ["model.onnx"]
    assert result.commands == []
    assert lines[0] == "simplify: 6 -> 5 nodes (-Identity x1)"
    assert lines[1].startswith("onnxruntime optimisation (basic)")
    assert result.compiled_info is not None
    assert result.compiled_info.node_count < 6
    report = verify(mlp_path, result.artifact, "onnx", precision="fp32", batch=2)
    assert report.status == "passed", report.reason
    assert report.outputs[0].max_abs is not None and report.outputs[0].max_abs < 1e-5


def test_fp16_build_passes_fp16_tolerances_and_fails_fp32(build: Build, tmp_path: Path) -> None:
    source = models.save(models.mlp(hidden=256, inputs=128), tmp_path / "big.onnx")
    result, _ = build(ORT, source, {"fp16": True})
    plan = ORT.verify_plan(ORT.parse_options({"fp16": True}), inspect_onnx(source))
    assert (plan.artifact_kind, plan.precision, plan.batch) == ("onnx", "fp16", 2)
    loose = verify(source, result.artifact, "onnx", precision=plan.precision, batch=plan.batch)
    assert loose.status == "passed", loose.reason
    strict = verify(source, result.artifact, "onnx", precision="fp32", batch=plan.batch)
    assert strict.status == "failed"
    assert "differ by more than" in strict.reason


def test_fixed_shapes_build_and_config(build: Build, mlp_path: Path) -> None:
    options = {"input_shapes": {"x": [2, 16]}, "ort_optimization_level": "disabled"}
    result, _ = build(ORT, mlp_path, options)
    assert result.compiled_info is not None
    assert result.compiled_info.inputs[0].dims == [2, 16]
    cfg = ORT.make_config("mlp", result.compiled_info, ORT.parse_options(options), 1)
    assert cfg.max_batch_size == 0 and cfg.dynamic_batching is None
    assert [s.dims for s in cfg.inputs + cfg.outputs] == [[2, 16], [2, 10]]
    assert cfg.warmup[0].inputs["x"].dims == [2, 16]
    assert lint(cfg, result.compiled_info.signature_dims()) == []


def test_external_data_sources_build_into_the_workdir_only(build: Build, tmp_path: Path) -> None:
    source = models.save_external(models.mlp(), tmp_path / "src" / "m.onnx", "w.bin")
    result, _ = build(ORT, source, {"ort_optimization_level": "basic"})
    assert sorted(p.name for p in result.artifact.parent.iterdir()) == ["model.onnx"]
    assert sorted(p.name for p in source.parent.iterdir()) == ["m.onnx", "w.bin"]
    assert verify(source, result.artifact, "onnx", precision="fp32").status == "passed"


def test_a_failing_simplification_is_skipped_with_a_note(
    build: Build, mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from model_store.compile import optimise

    def broken(*_: object, **__: object) -> None:
        raise optimise.OptimiseError("onnxslim could not simplify the model: boom")

    monkeypatch.setattr(optimise, "simplify_model", broken)
    result, lines = build(ORT, mlp_path)
    assert any("Simplification skipped" in note for note in result.notes)
    assert lines[0].startswith("warning: onnxslim could not simplify")


def test_a_cancelled_build_leaves_nothing(build: Build, mlp_path: Path, tmp_path: Path) -> None:
    with pytest.raises(BuildCancelled):
        build(ORT, mlp_path, cancelled=lambda: True)
    assert list((tmp_path / "work").iterdir()) == []


# Config ------------------------------------------------------------------------------------


def test_config_lints_clean_and_renders_the_key_lines(mlp_path: Path) -> None:
    info = inspect_onnx(mlp_path)
    options = ORT.parse_options(
        {"preferred_batch_sizes": [4, 8], "max_queue_delay_us": 500, "instance_count": 2},
        info=info,
    )
    cfg = ORT.make_config("mlp", info, options, 3)
    assert lint(cfg, info.signature_dims()) == []
    text = render_pbtxt(cfg)
    for line in [
        'backend: "onnxruntime"',
        "max_batch_size: 8",
        "versions: 3",
        "count: 2",
        "kind: KIND_CPU",
        "preferred_batch_size: 4",
        "preferred_batch_size: 8",
        "max_queue_delay_microseconds: 500",
        'name: "random_sample"',
        "random_data: true",
    ]:
        assert line in text
    assert "dims: 16\n" in text and "dims: 10\n" in text
    assert parse_pbtxt(text) == cfg


def test_default_instance_count_is_one_not_tritons_two(mlp_path: Path) -> None:
    info = inspect_onnx(mlp_path)
    cfg = ORT.make_config("mlp", info, ORT.parse_options({}), 1)
    assert (cfg.instance_count, cfg.instance_kind) == (1, "KIND_CPU")
    assert cfg.version_policy_specific == [1]
    assert cfg.warmup[0].batch_size == 1


def test_no_warmup_when_a_non_batch_dim_is_dynamic(tmp_path: Path) -> None:
    info = inspect_onnx(models.save(models.dynamic_outputs(), tmp_path / "d.onnx"))
    cfg = ORT.make_config("dyn", info, ORT.parse_options({}), 1)
    assert cfg.inputs[0].dims == [-1]
    assert cfg.warmup == []
    assert lint(cfg, info.signature_dims()) == []


def test_config_refuses_unsafe_names(mlp_path: Path) -> None:
    info = inspect_onnx(mlp_path)
    with pytest.raises(Exception, match="not allowed"):
        ORT.make_config("../evil", info, ORT.parse_options({}), 1)


def test_status_is_always_available() -> None:
    assert ORT.status({}).available


def test_models_with_string_io_have_no_random_warmup(tmp_path: Path) -> None:
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["s"], ["t"])],
        "strings",
        [onnx.helper.make_tensor_value_info("s", onnx.TensorProto.STRING, ["batch", 1])],
        [onnx.helper.make_tensor_value_info("t", onnx.TensorProto.STRING, ["batch", 1])],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    info = inspect_onnx(models.save(model, tmp_path / "s.onnx"))
    cfg = ORT.make_config("strings", info, ORT.parse_options({}), 1)
    assert cfg.inputs[0].data_type == "TYPE_STRING"
    assert cfg.warmup == []


def test_build_and_config_accept_options_as_stored(mlp_path: Path, tmp_path: Path) -> None:
    from model_store.targets import BuildContext

    info = inspect_onnx(mlp_path)
    workdir = tmp_path / "raw"
    workdir.mkdir()
    result = ORT.build(BuildContext(mlp_path, workdir, info, {"simplify": "false"}))
    assert result.artifact == workdir / "model.onnx"
    assert ORT.make_config("mlp", info, {}, 1).max_batch_size == 8
    with pytest.raises(InvalidOptions):
        ORT.make_config("mlp", info, {"max_batch_size": "lots"}, 1)

"""Tests for the npu_ge target: GE rules as findings, the one-file build, pre-flight, config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
import pytest

from model_store.compile import optimise
from model_store.compile.atc import AtcFailed
from model_store.config import render_pbtxt
from model_store.config_lint import lint
from model_store.onnx_info import inspect_onnx
from model_store.targets import InvalidOptions, get_target
from model_store.verify import verify
from tests.unit.targets import models
from tests.unit.targets.conftest import Build

GE = get_target("npu_ge")


def mlp14(**kw: Any) -> onnx.ModelProto:
    """The MLP at opset 14, the opset GE's docs suggest (so no conversion advice)."""
    return models.mlp(opset=14, **kw)


def _codes(found: list[Any]) -> list[str]:
    return [f.code for f in found]


def _check(model: onnx.ModelProto, tmp_path: Path, **options: Any) -> list[Any]:
    info = inspect_onnx(models.save(model, tmp_path / "m.onnx"))
    return GE.check_model(info, GE.parse_options(options))


# Options --------------------------------------------------------------------------------


def test_defaults_follow_the_ge_docs() -> None:
    parsed = GE.parse_options({})
    assert parsed["precision_mode_v2"] == "fp16"
    assert parsed["device_ids"] == "0"
    assert parsed["target_opset"] == 14
    assert parsed["static_model"] is False
    assert parsed["simplify"] is True and parsed["atc_preflight"] is True
    help_text = {s.name: s.help for s in GE.option_specs()}["precision_mode_v2"]
    assert "default for online inference is fp16" in help_text and "'origin'" in help_text


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"static_model": True, "dynamic_batching": True}, "cannot both be on"),
        ({"static_model": True, "max_batch_size": 4}, "needs 'max_batch_size' 0"),
        ({"static_model": True, "dynamic_dims": "1;2"}, "exclude each other"),
        ({"device_ids": "0,a"}, "'device_ids'"),
        ({"device_ids": "0;1"}, "'device_ids'"),
        ({"target_opset": 9}, "'target_opset' is 9"),
        ({"target_opset": 19}, "above the maximum"),
        ({"dynamic_dims": "1;x"}, "'dynamic_dims'"),
        ({"precision_mode_v2": "bf16"}, "not one of"),
    ],
)
def test_invalid_combinations_are_refused(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOptions, match=message):
        GE.parse_options(raw)


def test_valid_device_ids_and_keep_opset() -> None:
    parsed = GE.parse_options({"device_ids": "0,1", "target_opset": 0})
    assert (parsed["device_ids"], parsed["target_opset"]) == ("0,1", 0)


def test_options_survive_a_second_parse(tmp_path: Path) -> None:
    info = inspect_onnx(models.save(mlp14(), tmp_path / "m.onnx"))
    once = GE.parse_options({"dynamic_dims": "1;2", "device_ids": "1"}, info=info)
    assert once["ge_input_shape"] == {"x": [-1, 16]}
    assert GE.parse_options(once, info=info) == once


def test_static_model_resolves_to_no_batching(tmp_path: Path) -> None:
    info = inspect_onnx(models.save(mlp14(), tmp_path / "m.onnx"))
    resolved = GE.parse_options({"static_model": True, "input_shapes": "x:1,16"}, info=info)
    assert (resolved["max_batch_size"], resolved["dynamic_batching"]) == (0, False)


# GE rules -------------------------------------------------------------------------------


def test_fp16_bool_io_needs_explicit_config(tmp_path: Path) -> None:
    found = _check(models.fp16_io(), tmp_path)
    explicit = [f for f in found if f.code == "io_type_needs_explicit_config"]
    assert [f.level for f in explicit] == ["warning"] * 3  # x, y (FLOAT16) and mask (BOOL)
    assert "FLOAT16" in explicit[0].message and "BOOL" in explicit[2].message


def test_static_model_needs_every_shape_fixed(tmp_path: Path) -> None:
    found = _check(mlp14(), tmp_path, static_model=True)
    assert "static_needs_fixed_shapes" in _codes(found)
    fixed = _check(mlp14(), tmp_path, static_model=True, input_shapes="x:1,16")
    assert [f for f in fixed if f.level == "error"] == []


def test_dynamic_non_batch_axes_warn_and_stop_merging(tmp_path: Path) -> None:
    found = _check(models.dynamic_outputs(), tmp_path, preferred_batch_sizes=[4], target_opset=0)
    assert _codes(found) == ["dynamic_non_batch_axes", "batching_not_merged"]
    assert all(f.level == "warning" for f in found)


def test_batching_without_preferred_sizes_does_not_merge(tmp_path: Path) -> None:
    found = _check(mlp14(), tmp_path)
    assert _codes(found) == ["no_preferred_batch_sizes"]
    assert _check(mlp14(), tmp_path, preferred_batch_sizes=[8]) == []


def test_output_dims_must_be_named_after_input_axes(tmp_path: Path) -> None:
    model = models.dynamic_outputs(
        {
            "unnamed": ["batch", None],
            "stranger": ["batch", "Addoutput_dim_1"],
            "sum": ["batch", "seq + 1"],
            "expr": ["batch", "(seq*2)/batch"],
            "bad_char": ["batch", "seq % 2"],
        }
    )
    found = _check(model, tmp_path, max_batch_size=0)
    by_code: dict[str, list[str]] = {}
    for f in found:
        by_code.setdefault(f.code, []).append(f.message)
    assert len(by_code["unnamed_dynamic_output_dim"]) == 1
    assert "'-1 dim has no name'" in by_code["unnamed_dynamic_output_dim"][0]
    unresolvable = by_code["output_dim_name_unresolvable"]
    assert len(unresolvable) == 2
    assert "'Addoutput_dim_1' is not an input axis name" in unresolvable[0]
    assert "'%' is not allowed" in unresolvable[1]
    assert all(f.level == "error" for f in found if f.code.startswith(("unnamed", "output")))


def test_external_data_is_merged_into_one_file(tmp_path: Path) -> None:
    path = models.save_external(mlp14(), tmp_path / "e" / "m.onnx")
    info = inspect_onnx(path)
    found = GE.check_model(info, GE.parse_options({"preferred_batch_sizes": [8]}))
    assert _codes(found) == ["external_data_merged"]


def test_huge_external_data_is_an_error(tmp_path: Path) -> None:
    info = inspect_onnx(models.save_external(mlp14(), tmp_path / "e" / "m.onnx"))
    info.parameter_count = 600_000_000  # about 2.2 GiB of float32
    found = GE.check_model(info, GE.parse_options({"preferred_batch_sizes": [8]}))
    assert _codes(found) == ["external_data_too_large"]


def test_opset_advice(tmp_path: Path) -> None:
    assert "opset_conversion" in _codes(_check(models.opset18_reduce(), tmp_path))
    kept = _check(models.mlp(opset=9), tmp_path, target_opset=0, preferred_batch_sizes=[8])
    assert _codes(kept) == ["opset_outside_parser_range"]


def test_non_standard_operators_are_errors(tmp_path: Path) -> None:
    found = _check(models.custom_domain(), tmp_path)
    custom = [f for f in found if f.code == "non_standard_operator"]
    assert custom and custom[0].level == "error" and "my.custom.MyOp" in custom[0].message


def test_gear_rules(tmp_path: Path) -> None:
    ok = _check(mlp14(), tmp_path, dynamic_dims="1;2;4;8")
    assert [f for f in ok if f.level == "error"] == []
    mismatch = _check(mlp14(), tmp_path, dynamic_dims="1,2;4,8")
    assert "gear_size_mismatch" in _codes(mismatch)
    uncovered = _check(mlp14(), tmp_path, dynamic_dims="1;2;4;8", max_batch_size=8)
    assert "gears_do_not_cover_batches" in _codes(uncovered)
    none_dynamic = _check(mlp14(), tmp_path, dynamic_dims="1;2", input_shapes="x:1,16")
    assert "gears_without_dynamic_dims" in _codes(none_dynamic)


def test_gears_follow_ges_own_checks(tmp_path: Path) -> None:
    # GE checks an online graph's gears as ATC does: at least 2 (E10035), none twice (E10039).
    single = _check(mlp14(), tmp_path, dynamic_dims="4")
    too_few = [f for f in single if f.code == "too_few_gears"]
    assert too_few and too_few[0].level == "error" and "E10035" in too_few[0].message
    repeated = _check(mlp14(), tmp_path, dynamic_dims="1;4;4")
    twice = [f for f in repeated if f.code == "repeated_gear"]
    assert twice and twice[0].level == "error" and "E10039" in twice[0].message
    assert "4" in twice[0].message
    # Gears together with batching stay allowed when they cover every batch size.
    batched = _check(mlp14(), tmp_path, dynamic_dims="1;2;3;4", max_batch_size=4)
    assert [f for f in batched if f.level == "error"] == []


# Build ----------------------------------------------------------------------------------


def test_build_converts_opset_and_writes_exactly_one_onnx(build: Build, tmp_path: Path) -> None:
    source = models.save(models.opset18_reduce(), tmp_path / "src" / "r.onnx")
    result, lines = build(GE, source)
    assert sorted(p.name for p in result.artifact.parent.iterdir()) == ["model.onnx"]
    assert result.compiled_info is not None and result.compiled_info.default_opset == 14
    assert "Converted from opset 18 to 14." in result.notes
    assert any(line.startswith("opset 18 -> 14") for line in lines)
    assert result.commands == []
    skipped = [str(n) for n in result.notes if str(n).startswith("ATC pre-flight skipped: CANN")]
    assert skipped and "not available on this worker" in skipped[0]
    assert verify(source, result.artifact, "onnx", precision="fp32", batch=2).passed


def test_a_failed_opset_conversion_keeps_the_opset_with_a_note(
    build: Build, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object, **__: object) -> None:
        raise optimise.OptimiseError("The opset conversion from 18 to 14 failed: no adapter")

    monkeypatch.setattr(optimise, "convert_opset", broken)
    source = models.save(models.opset18_reduce(), tmp_path / "src" / "r.onnx")
    result, lines = build(GE, source)
    assert result.compiled_info is not None and result.compiled_info.default_opset == 18
    assert any("keeps opset 18" in note for note in result.notes)
    assert any(line.startswith("warning: The opset conversion") for line in lines)


def test_external_data_becomes_one_self_contained_file(build: Build, tmp_path: Path) -> None:
    source = models.save_external(mlp14(), tmp_path / "src" / "m.onnx", "weights.bin")
    result, _ = build(GE, source, {"target_opset": 0})
    assert sorted(p.name for p in result.artifact.parent.iterdir()) == ["model.onnx"]
    assert result.compiled_info is not None and not result.compiled_info.uses_external_data


def test_preflight_runs_atc_where_cann_is_present(
    build: Build, tmp_path: Path, fake_cann: dict[str, str]
) -> None:
    source = models.save(models.convnet(), tmp_path / "src" / "c.onnx")
    result, lines = build(GE, source, {"soc_version": "Ascend910B4"}, env=fake_cann)
    assert len(result.commands) == 1
    command = result.commands[0]
    assert "--framework=5" in command and "--soc_version=Ascend910B4" in command
    assert "--input_shape=image:1,3,16,16" in command  # a dynamic batch compiles at 1
    assert "--precision_mode_v2=fp16" in command
    assert command in lines
    assert "ATC pre-flight compile succeeded (the OM was discarded)." in result.notes
    assert sorted(p.name for p in result.artifact.parent.iterdir()) == ["model.onnx"]


def test_preflight_compiles_the_gears_with_dynamic_dims(
    build: Build, tmp_path: Path, fake_cann: dict[str, str]
) -> None:
    source = models.save(mlp14(), tmp_path / "src" / "m.onnx")
    options = {"soc_version": "Ascend310P3", "dynamic_dims": "1;2;4"}
    result, lines = build(GE, source, options, env=fake_cann)
    (command,) = result.commands
    assert "--input_format=ND" in command and "'--dynamic_dims=1;2;4'" in command
    assert "ATC pre-flight compile succeeded (the OM was discarded)." in result.notes
    assert any(line.startswith("ATC's Python:") for line in lines)


def test_preflight_without_soc_is_skipped_with_a_note(
    build: Build, tmp_path: Path, fake_cann: dict[str, str]
) -> None:
    source = models.save(models.convnet(), tmp_path / "src" / "c.onnx")
    result, _ = build(GE, source, env=fake_cann)
    assert result.commands == []
    assert any("no Ascend SoC was chosen" in note for note in result.notes)


def test_preflight_failure_fails_the_build_with_explanations(
    build: Build, tmp_path: Path, fake_cann: dict[str, str]
) -> None:
    source = models.save(models.custom_domain(), tmp_path / "src" / "c.onnx")
    with pytest.raises(AtcFailed, match="E19010") as caught:
        build(GE, source, {"soc_version": "Ascend310P3"}, env=fake_cann)
    assert "no parser for an operator" in caught.value.message
    assert not (tmp_path / "work" / ".atc-preflight").exists()


# Config -----------------------------------------------------------------------------------


def test_static_config_keeps_the_batch_dim_and_has_no_batching(tmp_path: Path) -> None:
    info = inspect_onnx(models.save(mlp14(batch=1), tmp_path / "m.onnx"))
    options = GE.parse_options({"static_model": True, "device_ids": "0,1"}, info=info)
    cfg = GE.make_config("mlp_npu", info, options, 2)
    assert cfg.max_batch_size == 0 and cfg.dynamic_batching is None
    assert [s.dims for s in cfg.inputs + cfg.outputs] == [[1, 16], [1, 10]]
    assert cfg.parameters == {
        "device_ids": "0,1",
        "session.ge.exec.precision_mode_v2": "fp16",
        "static_model": "1",
    }
    assert lint(cfg, info.signature_dims()) == []
    text = render_pbtxt(cfg)
    for line in ['backend: "npu_ge"', 'key: "static_model"', 'string_value: "1"', "dims: 1\n"]:
        assert line in text
    assert "dynamic_batching" not in text and "max_batch_size" not in text


def test_dynamic_config_batches_with_preferred_sizes(tmp_path: Path) -> None:
    info = inspect_onnx(models.save(mlp14(), tmp_path / "m.onnx"))
    options = GE.parse_options(
        {"preferred_batch_sizes": [4, 8], "precision_mode_v2": "origin"}, info=info
    )
    cfg = GE.make_config("mlp_npu", info, options, 1)
    assert cfg.max_batch_size == 8
    assert cfg.dynamic_batching is not None
    assert cfg.dynamic_batching.preferred_batch_size == [4, 8]
    assert cfg.parameters["session.ge.exec.precision_mode_v2"] == "origin"
    assert lint(cfg, info.signature_dims()) == []
    assert 'backend: "npu_ge"' in render_pbtxt(cfg)


def test_gear_config_sets_the_graph_options(tmp_path: Path) -> None:
    info = inspect_onnx(models.save(mlp14(), tmp_path / "m.onnx"))
    options = GE.parse_options({"dynamic_dims": "1;2;4;8"}, info=info)
    cfg = GE.make_config("mlp_npu", info, options, 1)
    assert cfg.max_batch_size == 0 and cfg.dynamic_batching is None
    assert cfg.parameters["graph.ge.inputShape"] == "x:-1,16"
    assert cfg.parameters["graph.ge.dynamicDims"] == "1;2;4;8"
    assert cfg.parameters["graph.ge.dynamicNodeType"] == "1"
    assert cfg.inputs[0].dims == [-1, 16]
    assert lint(cfg, info.signature_dims()) == []


def test_status_says_needs_cann(no_cann: dict[str, str], fake_cann: dict[str, str]) -> None:
    status = GE.status(no_cann)
    assert not status.available and str(status.reason).startswith("needs CANN:")
    assert GE.status(fake_cann).available
    assert GE.hardware_verified is False


def test_verify_plan_runs_the_onnx_on_the_cpu(tmp_path: Path) -> None:
    info = inspect_onnx(models.save(mlp14(), tmp_path / "m.onnx"))
    plan = GE.verify_plan(GE.parse_options({}), info)
    assert (plan.artifact_kind, plan.precision, plan.batch) == ("onnx", "fp32", 2)
    assert "not measured here" in plan.note

"""Tests for the acl target: ATC options, the OM build (fake CANN), config, and OM verification."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import onnx
import pytest

from model_store.compile.atc import AtcFailed, AtcUnavailable
from model_store.config import render_pbtxt
from model_store.config_lint import lint
from model_store.onnx_info import inspect_onnx
from model_store.targets import BuildCancelled, InvalidOptions, get_target
from model_store.verify import verify
from tests.unit.targets import models
from tests.unit.targets.conftest import Build

ACL = get_target("acl")
SOC = {"soc_version": "Ascend310P3"}


def _codes(found: list[Any]) -> list[str]:
    return [f.code for f in found]


@pytest.fixture
def conv_fixed(tmp_path: Path) -> Path:
    return models.save(models.convnet(batch=1), tmp_path / "src" / "conv.onnx")


@pytest.fixture
def mlp_path(tmp_path: Path) -> Path:
    return models.save(models.mlp(), tmp_path / "src" / "mlp.onnx")


# Options ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, "'soc_version'.*a value is required"),
        ({"soc_version": "910B4"}, "does not have the expected form"),
        ({"soc_version": "Ascend910B4 --log=debug"}, "does not have the expected form"),
        ({"soc_version": "ascend910b4"}, "does not have the expected form"),
        (
            {**SOC, "precision_mode": "force_fp16", "precision_mode_v2": "fp16"},
            "cannot both be set",
        ),
        ({**SOC, "dynamic_batch_size": [8]}, "has 1 gear.*E10035"),
        ({**SOC, "dynamic_batch_size": "8,8"}, "has 1 gear.*repeats count once"),
        ({**SOC, "input_format": "NHWC"}, "NCHW, ND, NCDHW and refuses anything else with E10001"),
        ({**SOC, "input_format": "CHWN"}, "Use ND for an input that is not NCHW"),
        ({**SOC, "dynamic_batching": True}, "needs batch gears"),
        ({**SOC, "input_shape": "x:1,-1"}, "only the batch axis"),
        ({**SOC, "input_shape": "x:-1,16"}, "dynamic batch \\(-1\\) but no gears"),
        ({**SOC, "target_opset": 10}, "'target_opset' is 10"),
        ({**SOC, "device_id": "0,1"}, "'device_id'"),
        ({**SOC, "log": "verbose"}, "not one of"),
        ({**SOC, "op_select_implmode": "fastest"}, "not one of"),
    ],
)
def test_invalid_options_are_refused(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidOptions, match=message):
        ACL.parse_options(raw)


@pytest.mark.parametrize(
    "soc",
    # What the runtime's rtGetSocVersion and npu-smi name on real hosts (docs/atc.md#soc-versions),
    # a name no list has yet, and an A3 product suffix.
    ["Ascend910B4-1", "Ascend910B2C", "Ascend310P5", "Ascend310P7", "Ascend310B4", "Ascend999",
     "Ascend910_9391", "Ascend910ProB"],
)  # fmt: skip
def test_any_soc_name_of_the_chips_form_is_taken(soc: str) -> None:
    assert ACL.parse_options({"soc_version": soc})["soc_version"] == soc


def test_input_shape_and_format_are_derived_from_the_model(conv_fixed: Path) -> None:
    resolved = ACL.parse_options(SOC, info=inspect_onnx(conv_fixed))
    assert resolved["input_shape"] == {"image": [1, 3, 16, 16]}
    assert resolved["input_format"] == "NCHW"
    assert resolved["dynamic_batching"] is False
    assert resolved["log"] == "error" and resolved["device_id"] == "0"


def test_a_partial_input_shape_is_completed_from_the_model(tmp_path: Path) -> None:
    model = models.mlp(batch=1)
    extra = onnx.helper.make_tensor_value_info("mask", onnx.TensorProto.FLOAT, [1, 4])
    model.graph.input.append(extra)
    info = inspect_onnx(models.save(model, tmp_path / "two.onnx"))
    resolved = ACL.parse_options({**SOC, "input_shape": "mask:1,4"}, info=info)
    assert resolved["input_shape"] == {"x": [1, 16], "mask": [1, 4]}


def test_gears_make_the_batch_dynamic(mlp_path: Path) -> None:
    resolved = ACL.parse_options(
        {**SOC, "dynamic_batch_size": "8,1,4,2"}, info=inspect_onnx(mlp_path)
    )
    assert resolved["dynamic_batch_size"] == [1, 2, 4, 8]
    assert resolved["input_shape"] == {"x": [-1, 16]}
    assert resolved["input_format"] == "ND"
    assert resolved["dynamic_batching"] is True


def test_input_format_offers_only_what_atc_takes_for_onnx() -> None:
    spec = next(s for s in ACL.option_specs() if s.name == "input_format")
    assert [value for value, _ in spec.choices or []] == ["NCHW", "ND", "NCDHW"]
    assert ACL.parse_options({**SOC, "input_format": "NCDHW"})["input_format"] == "NCDHW"


def test_a_repeated_gear_is_refused_as_ge_refuses_it() -> None:
    # Parsing merges repeats; the check itself refuses one that reaches it.
    options = ACL.parse_options({**SOC, "dynamic_batch_size": [1, 8]})
    with pytest.raises(InvalidOptions, match=r"twice.*E10039"):
        ACL.check_options({**options, "dynamic_batch_size": [1, 8, 8]})


# Model checks -----------------------------------------------------------------------------


def test_a_dynamic_batch_needs_gears(mlp_path: Path) -> None:
    info = inspect_onnx(mlp_path)
    found = ACL.check_model(info, ACL.parse_options(SOC))
    assert _codes(found) == ["acl_needs_gears"]
    assert "dynamic_batch_size" in found[0].advice
    assert ACL.check_model(info, ACL.parse_options({**SOC, "dynamic_batch_size": [1, 8]})) == []
    fixed = ACL.parse_options({**SOC, "input_shape": "x:2,16"})
    assert ACL.check_model(info, fixed) == []


def test_other_dynamic_dims_must_be_fixed(tmp_path: Path) -> None:
    info = inspect_onnx(models.save(models.dynamic_outputs(), tmp_path / "d.onnx"))
    found = ACL.check_model(info, ACL.parse_options({**SOC, "dynamic_batch_size": [1, 2]}))
    assert _codes(found) == ["acl_dynamic_dims"]
    assert "x:-1,1" in found[0].advice


def test_opset_and_custom_operators(tmp_path: Path) -> None:
    info = inspect_onnx(models.save(models.custom_domain(), tmp_path / "c.onnx"))
    found = ACL.check_model(info, ACL.parse_options({**SOC, "input_shape": "x:1,8"}))
    assert _codes(found) == ["non_standard_operator"]
    new = inspect_onnx(models.save(models.mlp(opset=20, batch=1), tmp_path / "n.onnx"))
    found = ACL.check_model(new, ACL.parse_options(SOC))
    assert _codes(found) == ["opset_outside_atc_range"]
    assert ACL.check_model(new, ACL.parse_options({**SOC, "target_opset": 17})) == []


# Build ------------------------------------------------------------------------------------


def test_build_without_cann_says_how_to_get_it(build: Build, conv_fixed: Path) -> None:
    with pytest.raises(AtcUnavailable) as caught:
        build(ACL, conv_fixed, SOC)
    message = caught.value.message
    assert caught.value.code == "cann_missing"
    assert "ATC_PATH" in message and "ASCEND_TOOLKIT_HOME" in message
    assert "restart the worker" in message


def test_build_with_cann_writes_model_om_and_the_exact_command(
    build: Build, conv_fixed: Path, fake_cann: dict[str, str]
) -> None:
    result, lines = build(ACL, conv_fixed, {**SOC, "precision_mode_v2": "origin"}, env=fake_cann)
    assert result.artifact_name == "model.om"
    assert sorted(p.name for p in result.artifact.parent.iterdir()) == ["model.om"]
    assert result.compiled_info is None
    (command,) = result.commands
    assert lines[0] == command  # the copyable command is the first log line
    assert command.startswith(fake_cann["ATC_PATH"] + " ")
    for flag in (
        f"--model={conv_fixed}",
        "--framework=5",
        "--soc_version=Ascend310P3",
        "--input_format=NCHW",
        "--input_shape=image:1,3,16,16",
        "--precision_mode_v2=origin",
        "--log=error",
    ):
        assert flag in command
    assert any("ATC run success" in line for line in lines)


def test_build_with_gears_and_opset_conversion(
    build: Build, tmp_path: Path, fake_cann: dict[str, str]
) -> None:
    source = models.save(models.mlp(opset=20), tmp_path / "src" / "m.onnx")
    options = {**SOC, "dynamic_batch_size": [1, 2, 4, 8], "target_opset": 17}
    result, lines = build(ACL, source, options, env=fake_cann)
    command = result.commands[0]
    assert lines[0] == command
    assert "--dynamic_batch_size=1,2,4,8" in command and "--input_shape=x:-1,16" in command
    assert "--input_format=ND" in command
    assert "Converted from opset 20 to 17 for ATC." in result.notes
    assert sorted(p.name for p in result.artifact.parent.iterdir()) == ["model.om"]


def test_atc_failure_is_explained(build: Build, tmp_path: Path, fake_cann: dict[str, str]) -> None:
    source = models.save(models.custom_domain(), tmp_path / "src" / "c.onnx")
    with pytest.raises(AtcFailed) as caught:
        build(ACL, source, {**SOC, "input_shape": "x:1,8"}, env=fake_cann)
    message = str(caught.value.message)
    assert message.startswith("ATC failed (exit status")
    assert "E19010" in message and "no parser for an operator" in message
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == []


def test_cancelling_stops_atc_while_it_runs(
    build: Build, conv_fixed: Path, fake_cann: dict[str, str], tmp_path: Path
) -> None:
    polls = iter([False] * 3 + [True] * 10_000)  # cancel once ATC is under way
    env = {**fake_cann, "FAKE_ATC_SLEEP": "30"}
    with pytest.raises(BuildCancelled, match="while ATC was running"):
        build(ACL, conv_fixed, SOC, env=env, cancelled=lambda: next(polls))
    assert list((tmp_path / "work").iterdir()) == []


def test_options_survive_a_second_parse(mlp_path: Path) -> None:
    info = inspect_onnx(mlp_path)
    once = ACL.parse_options({**SOC, "dynamic_batch_size": "1,2,4"}, info=info)
    assert ACL.parse_options(once, info=info) == once


# Config -----------------------------------------------------------------------------------


def test_fixed_batch_config(conv_fixed: Path) -> None:
    info = inspect_onnx(conv_fixed)
    options = ACL.parse_options({**SOC, "device_id": "3", "instance_count": 2}, info=info)
    cfg = ACL.make_config("conv_om", info, options, 4)
    assert cfg.max_batch_size == 0 and cfg.dynamic_batching is None
    assert [s.dims for s in cfg.inputs + cfg.outputs] == [[1, 3, 16, 16], [1, 10]]
    assert cfg.parameters == {"device_id": "3"}
    assert lint(cfg, info.signature_dims()) == []
    text = render_pbtxt(cfg)
    for line in ['backend: "acl"', 'key: "device_id"', 'string_value: "3"', "count: 2"]:
        assert line in text


def test_gear_config_batches_up_to_the_largest_gear(mlp_path: Path) -> None:
    info = inspect_onnx(mlp_path)
    options = ACL.parse_options({**SOC, "dynamic_batch_size": [2, 4, 8]}, info=info)
    cfg = ACL.make_config("mlp_om", info, options, 1)
    assert cfg.max_batch_size == 8
    assert [s.dims for s in cfg.inputs + cfg.outputs] == [[16], [10]]
    assert cfg.dynamic_batching is not None
    assert cfg.dynamic_batching.preferred_batch_size == [2, 4, 8]
    assert cfg.warmup[0].batch_size == 2  # the smallest gear
    assert lint(cfg, info.signature_dims()) == []


def test_fixed_shape_override_resolves_output_symbols(mlp_path: Path) -> None:
    info = inspect_onnx(mlp_path)
    options = ACL.parse_options({**SOC, "input_shape": "x:4,16"}, info=info)
    cfg = ACL.make_config("mlp_om", info, options, 1)
    assert [s.dims for s in cfg.inputs + cfg.outputs] == [[4, 16], [4, 10]]


def test_status(no_cann: dict[str, str], fake_cann: dict[str, str]) -> None:
    missing = ACL.status(no_cann)
    assert not missing.available and str(missing.reason).startswith("needs CANN:")
    found = ACL.status(fake_cann)
    assert found.available and "8.0.RC3" in found.reason
    assert ACL.hardware_verified is False and ACL.needs_cann is True


# Verification of the OM ---------------------------------------------------------------------


def test_verify_plan_follows_the_precision_mode(mlp_path: Path) -> None:
    info = inspect_onnx(mlp_path)
    gears = {**SOC, "dynamic_batch_size": [2, 4]}
    plan = ACL.verify_plan(ACL.parse_options(gears), info)
    assert (plan.artifact_kind, plan.precision, plan.batch) == ("om", "fp16", 2)
    assert plan.input_shapes == {"x": [2, 16]}
    for mode, precision in [
        ({"precision_mode_v2": "origin"}, "fp32"),
        ({"precision_mode": "must_keep_origin_dtype"}, "fp32"),
        ({"precision_mode": "allow_mix_precision"}, "mixed"),
        ({"precision_mode_v2": "mixed_float16"}, "mixed"),
    ]:
        assert ACL.verify_plan(ACL.parse_options({**gears, **mode}), info).precision == precision


def test_built_om_verifies_through_pyacl(
    build: Build, conv_fixed: Path, fake_cann: dict[str, str], fake_acl: ModuleType
) -> None:
    result, _ = build(ACL, conv_fixed, SOC, env=fake_cann)
    info = inspect_onnx(conv_fixed)
    plan = ACL.verify_plan(ACL.parse_options(SOC), info)
    report = verify(
        conv_fixed,
        result.artifact,
        plan.artifact_kind,
        precision=plan.precision,
        batch=plan.batch,
        input_shapes=plan.input_shapes,
    )
    assert report.status == "passed", report.reason
    assert report.samples_used == 4
    assert fake_acl._fake.leaks() in ({}, {"initialized": 1})


def test_om_is_not_run_without_pyacl(
    build: Build, conv_fixed: Path, fake_cann: dict[str, str], without_acl: None
) -> None:
    result, _ = build(ACL, conv_fixed, SOC, env=fake_cann)
    report = verify(conv_fixed, result.artifact, "om", precision="fp16")
    assert report.status == "not_run"
    assert str(report.reason).startswith("pyACL is not available on this worker")
    assert report.outputs == [] and report.samples_used == 0


def test_an_om_is_verified_on_the_npu_it_will_serve_on(
    mlp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not always device 0: the version's device_id (review C4)."""
    from model_store import verify as verify_module
    from model_store.ascend import om_runner

    info = inspect_onnx(mlp_path)
    plan = ACL.verify_plan({**SOC, "device_id": "3", "dynamic_batch_size": "1,2"}, info)
    assert plan.device_id == 3
    seen: list[int] = []

    def run_om(path: Any, inputs: Any, device_id: int = 0) -> dict[str, Any]:
        seen.append(device_id)
        return {}

    monkeypatch.setattr(om_runner, "acl_available", lambda: (True, ""))
    monkeypatch.setattr(om_runner, "run_om", run_om)
    runner, why = verify_module._om_runner(None, plan.device_id)
    assert runner is not None and why == ""
    runner(Path("model.om"), {})
    assert seen == [3]

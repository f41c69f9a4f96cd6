"""Config revisions planned from a real ONNX file: what changes, what needs a rebuild, the diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_store.config import parse_pbtxt
from model_store.onnx_info import OnnxInfo, inspect_onnx
from model_store.targets import get_target
from model_store.targets.options import InvalidOptions
from model_store.targets.revise import NothingChanged, normalize_changes, plan_revision
from tests.fixtures.triton import mlp_onnx_bytes


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> OnnxInfo:
    path = Path(tmp_path_factory.mktemp("revise")) / "model.onnx"
    path.write_bytes(mlp_onnx_bytes())
    return inspect_onnx(path)


def plan(target: str, info: OnnxInfo, changes: object, **original: object):  # type: ignore[no-untyped-def]
    chosen = get_target(target)
    stored = chosen.parse_options(original, info=info)
    return plan_revision(
        chosen,
        name="mlp",
        number=2,
        original=stored,
        changes=normalize_changes(changes),
        info=info,
    )


def test_scheduling_changes_reuse_the_onnxruntime_artifact(mlp: OnnxInfo) -> None:
    revision = plan(
        "onnxruntime",
        mlp,
        {
            "instance_count": 2,
            "max_batch_size": 8,
            "dynamic_batching": {
                "preferred_batch_size": [4, 8],
                "max_queue_delay_microseconds": 500,
            },
        },
    )
    assert revision.ok and revision.reuses_artifact
    assert revision.changed == {
        "instance_count": [1, 2],
        "preferred_batch_sizes": [[], [4, 8]],
        "max_queue_delay_us": [100, 500],
    }
    config = parse_pbtxt(revision.config_pbtxt)
    assert config.instance_count == 2
    assert config.dynamic_batching is not None
    assert config.dynamic_batching.preferred_batch_size == [4, 8]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    assert config.version_policy_specific == [2]
    # Only what changed shows in the diff: both sides are rendered for version 2.
    assert "+  count: 2\n" in revision.diff and "-  count: 1\n" in revision.diff
    assert "version_policy" not in revision.diff


def test_a_build_option_needs_a_rebuild_and_says_which(mlp: OnnxInfo) -> None:
    revision = plan("onnxruntime", mlp, {"fp16": True, "instance_count": 3})
    assert revision.rebuild == ["fp16"]
    assert not revision.reuses_artifact
    # The checks of the model run with the new options (FP16 on a CPU is worth a warning).
    assert "fp16_on_cpu" in {f.code for f in revision.findings}


def test_max_batch_size_zero_turns_the_batcher_off_with_it(mlp: OnnxInfo) -> None:
    revision = plan("onnxruntime", mlp, {"max_batch_size": 0}, preferred_batch_sizes=[4, 8])
    assert revision.options["dynamic_batching"] is False
    assert revision.options["preferred_batch_sizes"] == []
    config = parse_pbtxt(revision.config_pbtxt)
    assert config.max_batch_size == 0 and config.dynamic_batching is None
    # Without batching, the dims include the batch axis.
    assert config.inputs[0].dims == [-1, 4]


def test_lowering_max_batch_keeps_only_preferred_sizes_that_fit(mlp: OnnxInfo) -> None:
    revision = plan("onnxruntime", mlp, {"max_batch_size": 4}, preferred_batch_sizes=[2, 4, 8])
    assert revision.options["preferred_batch_sizes"] == [2, 4]


def test_npu_ge_devices_are_config_only_but_precision_is_not(mlp: OnnxInfo) -> None:
    devices = plan("npu_ge", mlp, {"device_ids": "0,1", "instance_count": 2})
    assert devices.reuses_artifact
    assert 'string_value: "0,1"' in devices.config_pbtxt
    precision = plan("npu_ge", mlp, {"precision_mode_v2": "origin"})
    assert precision.rebuild == ["precision_mode_v2"]


def test_acl_new_gears_are_a_new_atc_build(mlp: OnnxInfo) -> None:
    original = {"soc_version": "Ascend310P3", "dynamic_batch_size": [1, 2, 4]}
    gears = plan("acl", mlp, {"dynamic_batch_size": [1, 2, 4, 8]}, **original)
    assert gears.rebuild == ["dynamic_batch_size"]
    device = plan("acl", mlp, {"device_id": "1", "max_queue_delay_us": 300}, **original)
    assert device.reuses_artifact


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({}, "Send the options to change"),
        ([1], "Send the options to change"),
        ({"instance_count": 0}, "instance_count"),
        ({"instance_count": "two"}, "instance_count"),
        ({"no_such_option": 1}, "Unknown option"),
        ({"dynamic_batching": {"max_queue_delay": 5}}, "Unknown key(s) in 'dynamic_batching'"),
        ({"max_batch_size": 2, "preferred_batch_sizes": [4]}, "above max_batch_size"),
    ],
)
def test_bad_changes_are_refused_with_the_field_named(
    mlp: OnnxInfo, changes: object, message: str
) -> None:
    with pytest.raises(InvalidOptions) as refused:
        plan("onnxruntime", mlp, changes)
    assert message in refused.value.message


def test_a_change_to_the_same_values_is_nothing(mlp: OnnxInfo) -> None:
    with pytest.raises(NothingChanged) as refused:
        plan("onnxruntime", mlp, {"instance_count": 1, "dynamic_batching": True})
    assert refused.value.code == "no_change"

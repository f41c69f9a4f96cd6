"""Tests for model_store.config: dataclasses <-> config.pbtxt / load-API JSON, and lint."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from model_store.config import (
    DynamicBatching,
    ModelConfig,
    TensorSpec,
    Warmup,
    WarmupInput,
    from_protobuf,
    parse_pbtxt,
    render_pbtxt,
    to_json_dict,
    to_protobuf,
)
from model_store.config_lint import lint
from model_store.errors import InvalidConfig, InvalidTensorName
from model_store.names import validate_tensor_name

GOLDEN = Path(__file__).parent / "golden"


def batching_cpu_config() -> ModelConfig:
    """A CPU model with every field the hub writes."""
    return ModelConfig(
        name="resnet50",
        backend="onnxruntime",
        max_batch_size=8,
        inputs=[TensorSpec("input", "TYPE_FP32", [3, 224, 224])],
        outputs=[TensorSpec("logits", "TYPE_FP32", [1000])],
        dynamic_batching=DynamicBatching(
            preferred_batch_size=[4, 8], max_queue_delay_microseconds=500
        ),
        instance_count=2,
        instance_kind="KIND_CPU",
        version_policy_specific=[3],
        parameters={"intra_op_thread_count": "2", "enable_mem_arena": "1"},
        warmup=[Warmup("random_batch", 4, {"input": WarmupInput("TYPE_FP32", [3, 224, 224])})],
    )


def npu_ge_config() -> ModelConfig:
    """An Ascend GE-backend model: static graph, no batching, fixed shapes."""
    return ModelConfig(
        name="bert_npu",
        backend="npu_ge",
        max_batch_size=0,
        inputs=[
            TensorSpec("input_ids", "TYPE_INT64", [1, 128]),
            TensorSpec("attention_mask", "TYPE_INT64", [1, 128]),
        ],
        outputs=[TensorSpec("logits", "TYPE_FP32", [1, 2])],
        version_policy_specific=[1],
        parameters={"device_ids": "0,1", "static_model": "1"},
    )


CASES = {
    "onnxruntime_batching_cpu.pbtxt": batching_cpu_config,
    "npu_ge_static.pbtxt": npu_ge_config,
}


# Golden files --------------------------------------------------------------------


@pytest.mark.parametrize("golden", CASES)
def test_render_matches_the_golden_file(golden: str) -> None:
    assert render_pbtxt(CASES[golden]()) == (GOLDEN / golden).read_text(encoding="utf-8")


@pytest.mark.parametrize("golden", CASES)
def test_parsing_the_golden_file_gives_back_the_dataclass(golden: str) -> None:
    assert parse_pbtxt((GOLDEN / golden).read_text(encoding="utf-8")) == CASES[golden]()


@pytest.mark.parametrize("golden", CASES)
def test_parse_then_render_reproduces_the_golden_file(golden: str) -> None:
    text = (GOLDEN / golden).read_text(encoding="utf-8")
    assert render_pbtxt(parse_pbtxt(text)) == text


@pytest.mark.parametrize("golden", CASES)
def test_the_golden_configs_pass_lint(golden: str) -> None:
    assert lint(CASES[golden]()) == []


def test_protobuf_round_trip_keeps_every_modelled_field() -> None:
    cfg = batching_cpu_config()
    assert from_protobuf(to_protobuf(cfg)) == cfg


def test_zero_data_warmup_survives_a_round_trip() -> None:
    cfg = batching_cpu_config()
    cfg.warmup = [Warmup("zeros", 1, {"input": WarmupInput("TYPE_FP32", [3, 224, 224], False)})]
    text = render_pbtxt(cfg)
    assert "zero_data: true" in text
    assert parse_pbtxt(text) == cfg


def test_rendering_is_deterministic_whatever_the_parameter_order() -> None:
    cfg = npu_ge_config()
    reordered = replace(cfg, parameters=dict(reversed(cfg.parameters.items())))
    assert render_pbtxt(reordered) == render_pbtxt(cfg)


# Hostile tensor names ------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ['a"b', "a\\b", 'a\\"b', '"}\ninput { name: "pwned', "x\ny", "\\n", "entrée", "x'y"],
)
def test_tensor_names_cannot_break_out_of_their_quotes(name: str) -> None:
    cfg = replace(npu_ge_config(), inputs=[TensorSpec(name, "TYPE_FP32", [1])])
    text = render_pbtxt(cfg)
    parsed = parse_pbtxt(text)
    assert [t.name for t in parsed.inputs] == [name]
    assert len(parsed.outputs) == 1
    assert text.count("\ninput {") == 1


@pytest.mark.parametrize("name", ["x\ny", "x\x00y"])
def test_names_with_newlines_or_nul_are_refused_before_any_config_is_written(name: str) -> None:
    with pytest.raises(InvalidTensorName):
        validate_tensor_name(name)
    cfg = replace(npu_ge_config(), inputs=[TensorSpec(name, "TYPE_FP32", [1])])
    assert any("control" in problem for problem in lint(cfg))


def test_a_hostile_parameter_value_stays_a_value() -> None:
    cfg = replace(npu_ge_config(), parameters={"device_ids": '0"\n}\nbackend: "evil'})
    parsed = parse_pbtxt(render_pbtxt(cfg))
    assert parsed.backend == "npu_ge"
    assert parsed.parameters == cfg.parameters


# Parse errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('name: "x"\nmax_batch_size: "eight"\n', "at line 2, column 17"),
        ('name: "x"\ninput { name: "a" data_type: TYPE_FLOAT32 }\n', "TYPE_FLOAT32"),
        ('name: "x"\nnot_a_field: 1\n', "not_a_field"),
        ('name: "x"\ninput {\n', 'at line 2, column 7: Expected "}".'),
        ('name: "unterminated\n', "at line 1"),
    ],
)
def test_bad_pbtxt_raises_invalid_config_with_the_place_of_the_problem(
    text: str, expected: str
) -> None:
    with pytest.raises(InvalidConfig) as caught:
        parse_pbtxt(text)
    assert caught.value.code == "invalid_config"
    assert expected in caught.value.message
    assert caught.value.message.startswith("config.pbtxt cannot be read")


def test_unknown_data_types_and_kinds_are_reported_when_rendering() -> None:
    with pytest.raises(InvalidConfig, match="TYPE_FP32"):
        render_pbtxt(replace(npu_ge_config(), inputs=[TensorSpec("x", "float32", [1])]))
    with pytest.raises(InvalidConfig, match="KIND_CPU"):
        render_pbtxt(replace(npu_ge_config(), instance_kind="CPU"))


def test_parsing_a_minimal_config_fills_the_defaults() -> None:
    cfg = parse_pbtxt('name: "m"\nbackend: "onnxruntime"\n')
    assert cfg == ModelConfig(name="m", backend="onnxruntime")
    assert cfg.version_policy_specific is None
    assert cfg.dynamic_batching is None


def test_a_latest_version_policy_reads_as_the_default_policy() -> None:
    cfg = parse_pbtxt('name: "m"\nversion_policy { latest { num_versions: 1 } }\n')
    assert cfg.version_policy_specific is None


def test_an_empty_dynamic_batching_block_still_turns_batching_on() -> None:
    cfg = parse_pbtxt('name: "m"\nmax_batch_size: 4\ndynamic_batching { }\n')
    assert cfg.dynamic_batching == DynamicBatching()


# JSON for the load API -----------------------------------------------------------


def test_json_uses_model_config_proto_field_names_and_a_parameters_map() -> None:
    data = to_json_dict(batching_cpu_config())
    assert data["input"][0]["name"] == "input"
    assert data["input"][0]["data_type"] == "TYPE_FP32"
    assert [int(d) for d in data["input"][0]["dims"]] == [3, 224, 224]
    assert data["max_batch_size"] == 8
    assert data["parameters"] == {
        "intra_op_thread_count": {"string_value": "2"},
        "enable_mem_arena": {"string_value": "1"},
    }
    assert [int(v) for v in data["version_policy"]["specific"]["versions"]] == [3]
    assert data["instance_group"] == [{"count": 2, "kind": "KIND_CPU"}]
    assert "inputs" not in data and "dataType" not in json.dumps(data)


def test_json_for_the_load_api_is_serialisable_and_parses_back() -> None:
    from google.protobuf import json_format
    from tritonclient.grpc import model_config_pb2

    cfg = npu_ge_config()
    body = {"parameters": {"config": json.dumps(to_json_dict(cfg))}}
    msg = json_format.Parse(
        json.loads(json.dumps(body))["parameters"]["config"], model_config_pb2.ModelConfig()
    )
    assert from_protobuf(msg) == cfg


# Lint ----------------------------------------------------------------------------


def _problems(cfg: ModelConfig, **dims: list[int | str | None] | None) -> str:
    return "\n".join(str(problem) for problem in lint(cfg, dims or None))


def test_lint_finds_dynamic_batching_without_max_batch_size() -> None:
    cfg = replace(npu_ge_config(), parameters={}, dynamic_batching=DynamicBatching())
    assert "dynamic_batching needs max_batch_size > 0" in _problems(cfg)


def test_lint_finds_preferred_batch_sizes_above_max_batch_size() -> None:
    cfg = replace(batching_cpu_config(), dynamic_batching=DynamicBatching([4, 16, 0]))
    problems = _problems(cfg)
    assert "Preferred batch size 16" in problems
    assert "Preferred batch size 0" in problems
    assert "Preferred batch size 4" not in problems


def test_lint_finds_static_model_combined_with_dynamic_batching() -> None:
    cfg = replace(batching_cpu_config(), parameters={"static_model": "1"})
    assert "static_model=1" in _problems(cfg)


def test_lint_finds_missing_inputs_and_outputs() -> None:
    problems = _problems(replace(npu_ge_config(), inputs=[], outputs=[]))
    assert "no inputs" in problems
    assert "no outputs" in problems


def test_lint_finds_duplicate_tensor_names() -> None:
    spec = TensorSpec("x", "TYPE_FP32", [1])
    cfg = replace(npu_ge_config(), inputs=[spec, spec])
    assert "Input name 'x' is used more than once" in _problems(cfg)


def test_lint_finds_bad_dims_types_names_and_counts() -> None:
    cfg = replace(
        npu_ge_config(),
        name="../evil",
        backend=None,
        max_batch_size=-1,
        inputs=[TensorSpec("x", "TYPE_FLOAT", []), TensorSpec("y", "TYPE_FP32", [0, -2])],
        instance_count=0,
        instance_kind="KIND_NPU",
        version_policy_specific=[0, 2, 2],
    )
    problems = _problems(cfg)
    for expected in [
        "model name '../evil'",
        "Neither backend nor platform",
        "max_batch_size is -1",
        "'TYPE_FLOAT', which is not supported",
        "has no dims",
        "each must be >= 1 or -1",
        "instance count is 0",
        "'KIND_NPU'",
        "The version 0 is out of range",
        "lists a version twice",
    ]:
        assert expected in problems


def test_lint_finds_warmup_problems() -> None:
    cfg = replace(
        batching_cpu_config(),
        warmup=[Warmup("w", 16, {"nope": WarmupInput("TYPE_FP32", [1])})],
    )
    problems = _problems(cfg)
    assert "batch size 16" in problems
    assert "'nope', which is not an input" in problems
    assert "no data for input 'input'" in problems


def test_lint_accepts_config_dims_that_match_the_model_without_the_batch_dim() -> None:
    cfg = batching_cpu_config()
    assert lint(cfg, {"input": ["batch", 3, 224, 224], "logits": ["batch", 1000]}) == []


def test_lint_accepts_variable_config_dims_for_symbolic_model_dims() -> None:
    cfg = replace(batching_cpu_config(), inputs=[TensorSpec("input", "TYPE_FP32", [3, -1, -1])])
    assert lint(cfg, {"input": ["N", 3, "H", None], "logits": [None, 1000]}) == []


def test_lint_finds_config_dims_that_include_the_batch_dim_by_mistake() -> None:
    cfg = replace(
        batching_cpu_config(), inputs=[TensorSpec("input", "TYPE_FP32", [-1, 3, 224, 224])]
    )
    problems = _problems(cfg, input=["batch", 3, 224, 224], logits=["batch", 1000])
    assert "dims [-1, 3, 224, 224] in the config but [3, 224, 224] in the model" in problems
    assert "exclude the batch dimension" in problems


def test_lint_finds_batching_on_a_model_with_a_fixed_first_dim() -> None:
    problems = _problems(batching_cpu_config(), input=[1, 3, 224, 224], logits=[1, 1000])
    assert "no variable batch dimension" in problems


def test_lint_finds_fixed_config_dims_for_dynamic_model_dims() -> None:
    cfg = replace(npu_ge_config(), parameters={})
    problems = _problems(cfg, input_ids=["batch", "seq"], attention_mask=[1, 128], logits=[1, 2])
    assert "'input_ids' has dims [1, 128] in the config but ['batch', 'seq']" in problems


def test_lint_finds_tensors_the_model_does_not_have() -> None:
    problems = _problems(npu_ge_config(), input_ids=[1, 128], logits=[1, 2])
    assert "'attention_mask' is not an input or output of the model" in problems


def test_lint_skips_the_shape_check_when_the_model_rank_is_unknown() -> None:
    model = {"input_ids": None, "attention_mask": None, "logits": None}
    assert lint(npu_ge_config(), model) == []

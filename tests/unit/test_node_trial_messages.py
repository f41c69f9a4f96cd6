"""A ``node.trial`` message is checked as if a stranger sent it (workers/node/trials.py): names,
version, hash, the config through Triton's protobuf, the inputs and the load, before anything
is fetched or loaded. The trial itself runs in tests/integration/test_node_tuning.py."""

from __future__ import annotations

from typing import Any

import pytest

from model_store.perf.trials import random_inputs
from tests.fixtures.triton import mlp_config_pbtxt
from workers.node.trials import TrialRefused, checked

GOOD: dict[str, Any] = {
    "model": "mlp",
    "version": 1,
    "sha256": "a" * 64,
    "config": mlp_config_pbtxt("mlp"),
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 4]}],
    "load": {"kind": "concurrency", "levels": [1, 2], "step_seconds": 1.0},
    "max_in_flight": 2,
}


def test_a_good_message_is_taken_apart() -> None:
    request, cfg, inputs, load, in_flight = checked(dict(GOOD))
    assert (request.model, request.version, cfg.name) == ("mlp", 1, "mlp")
    assert load.levels == (1, 2) and in_flight == 2
    arrays = random_inputs(inputs)
    assert arrays["x"].shape == (1, 4) and str(arrays["x"].dtype) == "float32"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model": "../etc"}, ""),
        ({"version": "1; rm -rf /"}, ""),
        ({"sha256": "not-a-hash"}, "SHA-256"),
        ({"config": 'name: "other"\nbackend: "onnxruntime"'}, "names 'other'"),
        ({"config": "this is { not protobuf"}, "not valid"),
        ({"config": "x" * 70_000}, "at most"),
        ({"inputs": []}, "1 to 64 input"),
        ({"load": {"kind": "forever"}}, "load is not valid"),
        ({"load": {"kind": "rate", "rate_rps": -5}}, "load is not valid"),
        ({"load": {"kind": "concurrency", "levels": [1, 999]}}, "load is not valid"),
        ({"load": {"kind": "concurrency", "shell": "ls"}}, "load is not valid"),
        ({"max_in_flight": 10_000}, "max_in_flight"),
        ({"max_in_flight": True}, "max_in_flight"),
    ],
)
def test_hostile_messages_are_refused_with_what(change: dict[str, Any], message: str) -> None:
    with pytest.raises(TrialRefused) as refused:
        checked({**GOOD, **change})
    assert message in refused.value.message


@pytest.mark.parametrize(
    "specs",
    [
        [{"name": "x", "dtype": "object", "shape": [1]}],
        [{"name": "x", "dtype": "float32", "shape": [1, -4]}],
        [{"name": "x", "dtype": "float32", "shape": [1 << 20, 1 << 20]}],
        [{"name": "", "dtype": "float32", "shape": [1]}],
        [{"name": "x", "dtype": "float32", "shape": "1,4"}],
    ],
)
def test_inputs_a_node_would_not_build(specs: list[dict[str, Any]]) -> None:
    with pytest.raises(ValueError):
        random_inputs(specs)

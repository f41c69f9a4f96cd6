"""The v2 (Open Inference Protocol) JSON form: requests become the hub's own form, so the model's
checks apply; answers are flattened tensors with the protocol's datatypes."""

from __future__ import annotations

import numpy as np
import pytest

from model_store.inference.errors import InferenceInputError
from model_store.inference.v2 import (
    is_v2_request,
    payload_from_v2,
    requested_outputs,
    v2_answer,
)


def test_a_list_of_inputs_is_the_v2_form() -> None:
    assert is_v2_request({"inputs": []}) and not is_v2_request({"inputs": {"x": [1]}})


def test_inputs_become_the_hubs_data_shape_dtype_form() -> None:
    payload = payload_from_v2(
        [
            {"name": "x", "shape": [1, 2], "datatype": "FP32", "data": [1.0, 2.0]},
            {"name": "t", "shape": [1], "datatype": "BYTES", "data": "hi"},
        ]
    )
    assert payload == {
        "x": {"data": [1.0, 2.0], "shape": [1, 2], "dtype": "FP32"},
        "t": {"data": ["hi"], "shape": [1], "dtype": "STRING"},
    }


@pytest.mark.parametrize(
    ("inputs", "says"),
    [
        ([], "non-empty list"),
        ({"x": 1}, "non-empty list"),
        (["x"], "must be an object"),
        ([{"shape": [1], "datatype": "FP32", "data": [1]}], "no 'name'"),
        ([{"name": "x", "shape": [1], "datatype": "FP33", "data": [1]}], "'datatype' must be"),
        ([{"name": "x", "shape": [-1], "datatype": "FP32", "data": [1]}], "'shape'"),
        ([{"name": "x", "shape": [True], "datatype": "FP32", "data": [1]}], "'shape'"),
        ([{"name": "x", "shape": [1], "datatype": "FP32"}], "no 'data'"),
        ([{"name": "x", "shape": [1], "datatype": "FP32", "data": [1], "b": 1}], "unknown keys"),
        (
            [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}] * 2,
            "given twice",
        ),
    ],
)
def test_malformed_inputs_are_refused_naming_the_problem(inputs: object, says: str) -> None:
    with pytest.raises(InferenceInputError) as refused:
        payload_from_v2(inputs)
    assert says in refused.value.message and refused.value.code == "bad_format"


def test_requested_outputs() -> None:
    assert requested_outputs(None) is None
    assert requested_outputs([{"name": "y"}, {"name": "z", "parameters": {}}]) == ["y", "z"]
    with pytest.raises(InferenceInputError):
        requested_outputs([{"nom": "y"}])


def test_the_answer_flattens_each_tensor_with_its_datatype() -> None:
    outputs = {
        "y": np.arange(6, dtype=np.float32).reshape(2, 3),
        "k": np.array([[1, 2]], dtype=np.int64),
        "s": np.array([b"a", b"b"], dtype=object),
    }
    answer = v2_answer("m", 3, outputs, None)
    assert answer["model_name"] == "m" and answer["model_version"] == "3"
    by_name = {t["name"]: t for t in answer["outputs"]}
    assert by_name["y"] == {"name": "y", "datatype": "FP32", "shape": [2, 3],
                            "data": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]}  # fmt: skip
    assert by_name["k"]["datatype"] == "INT64" and by_name["s"]["data"] == ["a", "b"]
    assert [t["name"] for t in v2_answer("m", 3, outputs, ["k"])["outputs"]] == ["k"]

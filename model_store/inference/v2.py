"""The KServe v2 / Open Inference Protocol's JSON form of an inference request and answer.

Clients of Triton already speak it (``tritonclient.http``, curl scripts, KServe clients)::

    {"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32", "data": [0.1, ...]}],
     "outputs": [{"name": "y"}]}

answered as ``{"model_name", "model_version", "outputs": [{"name", "shape", "datatype",
"data"}]}`` with each tensor's data flattened in row-major order. The protocol:
https://github.com/kserve/open-inference-protocol/blob/main/specification/protocol/inference_rest.md
and Triton's own description of it,
https://github.com/triton-inference-server/server/blob/main/docs/protocol/README.md.

A request's inputs become the hub's own ``{"data", "shape", "dtype"}`` form, so that every
check of :func:`model_store.inference.decode.decode_inputs` (names, the datatype against the
model's, shape against data, the size limits) applies unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from model_store.inference.errors import InferenceInputError
from model_store.text import Message, say

#: The protocol's tensor datatypes and the numpy dtype each is carried in.
DATATYPES: dict[str, str] = {
    "BOOL": "bool", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32",
    "UINT64": "uint64", "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
    "FP16": "float16", "FP32": "float32", "FP64": "float64", "BYTES": "object",
}  # fmt: skip
_NUMPY_TO_DATATYPE = {numpy: v2 for v2, numpy in DATATYPES.items()}
_INPUT_KEYS = frozenset({"name", "shape", "datatype", "data", "parameters"})


def is_v2_request(body: Mapping[str, Any]) -> bool:
    """A v2 request carries its inputs as a list (the hub's own form is an object)."""
    return isinstance(body.get("inputs"), list)


def payload_from_v2(inputs: object) -> dict[str, dict[str, Any]]:
    """``{"inputs": [...]}``'s list as the hub's ``{name: {"data", "shape", "dtype"}}``.

    Raises:
        InferenceInputError: 400 naming the first malformed entry (the model-specific checks
            come after, in ``decode_inputs``).
    """
    if not isinstance(inputs, list) or not inputs:
        raise _bad(None, say("'inputs' must be a non-empty list of tensors."))
    payload: dict[str, dict[str, Any]] = {}
    for number, entry in enumerate(inputs, start=1):
        if not isinstance(entry, Mapping):
            raise _bad(
                None,
                say(
                    "Input %(number)s must be an object with name, shape, datatype, data.",
                    number=number,
                ),
            )
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise _bad(None, say("Input %(number)s has no 'name'.", number=number))
        unknown = sorted(str(k) for k in entry if k not in _INPUT_KEYS)
        if unknown:
            raise _bad(
                name,
                say("Input %(input)s: unknown keys %(keys)s.", input=repr(name), keys=str(unknown)),
            )
        if name in payload:
            raise _bad(name, say("Input %(input)s is given twice.", input=repr(name)))
        shape, datatype = entry.get("shape"), entry.get("datatype")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise _bad(
                name,
                say(
                    "Input %(input)s: 'shape' must be a list of sizes (0 or more).",
                    input=repr(name),
                ),
            )
        if datatype not in DATATYPES:
            raise _bad(
                name,
                say(
                    "Input %(input)s: 'datatype' must be one of %(datatypes)s.",
                    input=repr(name),
                    datatypes=", ".join(DATATYPES),
                ),
            )
        if "data" not in entry:
            # The binary extension puts the bytes after the JSON header instead.
            raise _bad(name, say("Input %(input)s has no 'data'.", input=repr(name)))
        data = entry["data"]
        payload[name] = {
            "data": data if isinstance(data, list) else [data],
            "shape": shape,
            # decode_inputs compares this with the model's own type (TYPE_FP32 -> FP32).
            "dtype": "STRING" if datatype == "BYTES" else datatype,
        }
    return payload


def requested_outputs(outputs: object) -> list[str] | None:
    """The output names ``"outputs": [{"name": ...}]`` asks for, or None for all.

    Raises:
        InferenceInputError: Not a list of objects with a name.
    """
    if outputs is None:
        return None
    if not isinstance(outputs, list) or not all(
        isinstance(o, Mapping) and isinstance(o.get("name"), str) for o in outputs
    ):
        raise _bad(None, say("'outputs' must be a list of objects with a 'name'."))
    return [str(o["name"]) for o in outputs]


def v2_answer(
    model: str, version: int, outputs: Mapping[str, np.ndarray], wanted: list[str] | None
) -> dict[str, Any]:
    """The protocol's answer for Triton's ``outputs`` (only ``wanted`` ones when given)."""
    names = list(outputs) if wanted is None else [n for n in wanted if n in outputs]
    return {
        "model_name": model,
        "model_version": str(version),
        "outputs": [tensor_json(name, outputs[name]) for name in names],
    }


def missing_outputs(outputs: Mapping[str, np.ndarray], wanted: list[str] | None) -> list[str]:
    return [n for n in wanted or [] if n not in outputs]


def tensor_json(name: str, array: np.ndarray) -> dict[str, Any]:
    """One tensor as the protocol writes it: name, datatype, shape, data flattened."""
    datatype = _NUMPY_TO_DATATYPE.get(array.dtype.name)
    if array.dtype.kind in ("S", "U", "O"):
        datatype = "BYTES"
        data: list[Any] = [
            v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            for v in array.ravel().tolist()
        ]
    else:
        data = array.ravel().tolist()
    return {"name": name, "datatype": datatype or "BYTES", "shape": list(array.shape), "data": data}


def _bad(name: str | None, message: Message) -> InferenceInputError:
    return InferenceInputError(message, code="bad_format", field=name)

"""An inference request's ``inputs`` as validated numpy arrays, ready for Triton.

Triton's own errors for a bad request are terse and name backend internals, so everything
is checked here first against the version's signature, with messages that name the input
and say what to change. Each input's value may be:

a) a JSON array (nested lists of numbers or bools; strings for a TYPE_STRING input);
b) ``{"data": [...], "shape": [...]}``: flat (or nested) values reshaped to ``shape``;
c) ``{"b64": "...", "shape": [...]}``: base64 of raw little-endian bytes in the input's dtype;
d) ``{"npy_b64": "..."}``: base64 of a ``.npy`` file (no pickles);
e) ``{"image_b64": "...", "preprocess": {...}}``: an image file, for image-like inputs.

Forms (b) and (c) may add ``"dtype"``; it must then name the input's own dtype.

Example:
    >>> decode_inputs(specs, {"input": {"image_b64": b64}}, Limits(),
    ...               default_preprocess=PRESETS["efficientnet"])["input"].shape
    (1, 3, 224, 224)
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from model_store.inference.coerce import coerce_dtype, fit_shape
from model_store.inference.errors import InferenceInputError
from model_store.inference.examples import example_payload, example_value
from model_store.inference.image import (
    PRESETS,
    Preprocess,
    decode_image,
    image_tensor_shape,
    image_to_tensor,
)
from model_store.inference.jsonable import encode_for_json
from model_store.inference.limits import Budget, Limits
from model_store.inference.signature import TensorSpec

__all__ = [
    "DEFAULT_PREPROCESS",
    "Limits",
    "decode_inputs",
    "encode_for_json",
    "example_payload",
    "example_value",
]

DEFAULT_PREPROCESS = PRESETS["imagenet"]
FORMS = (
    'a nested list such as [[1, 2], [3, 4]]; {"data": [...], "shape": [...]}; '
    '{"b64": "<base64 of raw little-endian bytes>", "shape": [...]}; '
    '{"npy_b64": "<base64 of a .npy file>"}; or, for image inputs, '
    '{"image_b64": "<base64 of a PNG or JPEG file>"}'
)
# numpy arrays have at most 32 axes (numpy 1.x); no model input has nearly that many.
MAX_RANK = 32
_FORM_KEYS: dict[str, frozenset[str]] = {
    "image_b64": frozenset({"image_b64", "preprocess"}),
    "npy_b64": frozenset({"npy_b64"}),
    "b64": frozenset({"b64", "shape", "dtype"}),
    "data": frozenset({"data", "shape", "dtype"}),
}


def _error(code: str, name: str | None, message: str) -> InferenceInputError:
    return InferenceInputError(message, code=code, field=name)


def decode_inputs(
    specs: list[TensorSpec],
    payload: object,
    limits: Limits,
    *,
    images: Mapping[str, bytes] | None = None,
    preprocess: Mapping[str, Preprocess] | None = None,
    default_preprocess: Preprocess = DEFAULT_PREPROCESS,
) -> dict[str, np.ndarray]:
    """Checks and converts every input of one request.

    Arrays come back in each input's dtype and full shape. A batch convenience applies:
    when a value has one axis fewer than the input and the input's first axis has any size
    (a batch axis), the value is taken as one item and a leading axis of 1 is added.

    Args:
        specs: The version's inputs, from :func:`specs_from_signature`.
        payload: The parsed JSON of the request's ``"inputs"``: input name -> value.
        limits: Caps for the whole request.
        images: Raw image files by input name (a multipart form's uploads); like form (e).
        preprocess: Preprocessing per input name, for images that do not bring their own.
        default_preprocess: For images that bring none and have no entry in ``preprocess``.

    Returns:
        Input name -> array, in the order of ``specs``.

    Raises:
        InferenceInputError: The first problem found, with ``field`` set to the input.
    """
    if not isinstance(payload, Mapping):
        raise _error(
            "bad_format",
            None,
            f"'inputs' must be an object of input name -> value, such as "
            f"{{{json.dumps(specs[0].name if specs else 'input')}: [[1.0, 2.0]]}}; got "
            f"{_type_name(payload)}.",
        )
    images = images or {}
    _check_names(specs, payload, images)
    budget = Budget(limits)
    arrays: dict[str, np.ndarray] = {}
    for spec in specs:
        chosen = (preprocess or {}).get(spec.name, default_preprocess)
        try:
            if spec.name in images:
                array = _from_image(spec, images[spec.name], chosen, limits, budget)
            else:
                array = _decode_value(spec, payload[spec.name], chosen, limits, budget)
            array = fit_shape(spec, array)
            budget.add(spec.name, array)
        except InferenceInputError as exc:
            if exc.field is not None:
                raise
            # Errors from image/preprocess helpers do not know the input's name.
            raise InferenceInputError(
                f"Input {spec.name!r}: {exc.message}",
                code=exc.code,
                field=spec.name,
                status=exc.status,
            ) from None
        arrays[spec.name] = array
    return arrays


def _type_name(value: object) -> str:
    names = {list: "a list", str: "a string", dict: "an object", type(None): "null"}
    return names.get(type(value), f"a {type(value).__name__}")


def _describe(spec: TensorSpec) -> str:
    return f"{spec.name!r} ({spec.triton_type.removeprefix('TYPE_')} {spec.describe_shape()})"


def _check_names(
    specs: list[TensorSpec], payload: Mapping[Any, Any], images: Mapping[str, bytes]
) -> None:
    expected = [s.name for s in specs]
    twice = [n for n in images if n in payload]
    if twice:
        raise _error(
            "bad_format",
            twice[0],
            f"Input {twice[0]!r} was sent twice, as a value and as an uploaded image. "
            "Send it once.",
        )
    given = [*payload, *images]
    extra = [str(n) for n in given if n not in expected]
    missing = [n for n in expected if n not in given]
    if not extra and not missing:
        return
    parts = []
    if extra:
        parts.append(f"{_names(extra)} {'is' if len(extra) == 1 else 'are'} not an input")
    if missing:
        parts.append(f"{_names(missing)} {'is' if len(missing) == 1 else 'are'} missing")
    takes = ", ".join(_describe(s) for s in specs) or "no inputs"
    raise _error(
        "extra_input" if extra else "missing_input",
        (extra or missing)[0],
        f"{'; '.join(parts).capitalize()}. The model takes: {takes}.",
    )


def _names(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names[:10]) + (" and more" if len(names) > 10 else "")


# The five forms -------------------------------------------------------------------------


def _decode_value(
    spec: TensorSpec, value: object, preprocess: Preprocess, limits: Limits, budget: Budget
) -> np.ndarray:
    if isinstance(value, list | tuple | int | float | str):
        return _from_nested(spec, value, limits, budget)
    if not isinstance(value, Mapping):
        raise _error(
            "bad_format", spec.name, f"Input {spec.name!r} is {_type_name(value)}. Send {FORMS}."
        )
    form = next((key for key in _FORM_KEYS if key in value), None)
    if form is None:
        raise _error(
            "bad_format",
            spec.name,
            f"Input {spec.name!r} is an object with keys {sorted(map(str, value))}. Send {FORMS}.",
        )
    unknown = sorted(str(k) for k in value if k not in _FORM_KEYS[form])
    if unknown:
        raise _error(
            "bad_format",
            spec.name,
            f"Input {spec.name!r}: the {form!r} form takes only {sorted(_FORM_KEYS[form])}; "
            f"remove {unknown}.",
        )
    if form == "image_b64":
        if "preprocess" in value:
            preprocess = Preprocess.from_dict(value["preprocess"])
        data = _b64(spec.name, value["image_b64"], limits.max_image_bytes, "image_b64")
        return _from_image(spec, data, preprocess, limits, budget)
    if form == "npy_b64":
        return _from_npy(spec, value["npy_b64"], limits, budget)
    _check_dtype_hint(spec, value.get("dtype"))
    shape = _shape(spec.name, value.get("shape"), required=form == "b64")
    if form == "b64":
        return _from_raw(spec, value["b64"], shape or (), limits, budget)
    return _from_data(spec, value["data"], shape, limits, budget)


def _from_nested(spec: TensorSpec, value: object, limits: Limits, budget: Budget) -> np.ndarray:
    """Form (a): nested lists, walked level by level so counts are known before numpy runs."""
    shape, leaves = _walk(spec, value, budget)
    budget.check(spec.name, len(leaves), len(leaves) * spec.numpy_dtype.itemsize)
    return _leaves_to_array(spec, leaves, shape, limits)


def _from_data(
    spec: TensorSpec, data: object, shape: tuple[int, ...] | None, limits: Limits, budget: Budget
) -> np.ndarray:
    """Form (b): values in row-major order, reshaped to ``shape`` when it is given."""
    if shape is not None:
        count = math.prod(shape)
        budget.check(spec.name, count, count * spec.numpy_dtype.itemsize)
    if not isinstance(data, list):
        raise _error(
            "bad_format", spec.name, f"Input {spec.name!r}: 'data' must be a list of values."
        )
    walked, leaves = _walk(spec, data, budget)
    if shape is None:
        shape = walked
    elif len(leaves) != math.prod(shape):
        raise _error(
            "wrong_shape",
            spec.name,
            f"Input {spec.name!r}: 'data' holds {len(leaves):,} values but 'shape' "
            f"{list(shape)} needs {math.prod(shape):,}.",
        )
    return _leaves_to_array(spec, leaves, shape, limits)


def _walk(spec: TensorSpec, value: object, budget: Budget) -> tuple[tuple[int, ...], list[Any]]:
    """The shape of rectangular nested lists and their leaves; refuses ragged ones.

    Iterative (no recursion limit) and stops as soon as a level outgrows the element budget,
    before numpy allocates anything.
    """
    shape: list[int] = []
    level: list[Any] = [value]
    while True:
        is_list = [isinstance(item, list | tuple) for item in level]
        if not any(is_list):
            return tuple(shape), level
        if not all(is_list):
            raise _ragged(spec, len(shape), "mixes lists and single values")
        lengths = {len(item) for item in level}
        if len(lengths) > 1:
            shown = ", ".join(map(str, sorted(lengths)[:5]))
            raise _ragged(spec, len(shape), f"has lists of lengths {shown}")
        if len(shape) >= MAX_RANK:
            raise _ragged(spec, len(shape), f"nests deeper than {MAX_RANK} levels")
        shape.append(lengths.pop())
        count = math.prod(shape)
        if count > budget.elements_left:
            budget.check(spec.name, count, 0, at_least=True)
        level = [leaf for item in level for leaf in item]


def _ragged(spec: TensorSpec, depth: int, what: str) -> InferenceInputError:
    return _error(
        "wrong_shape",
        spec.name,
        f"Input {spec.name!r} is a ragged nested list: level {depth + 1} {what}. Every row "
        f"must have the same length (the model takes {spec.describe_shape()}).",
    )


def _leaves_to_array(
    spec: TensorSpec, leaves: list[Any], shape: tuple[int, ...], limits: Limits
) -> np.ndarray:
    if spec.is_string:
        # Keep Python objects so numbers among strings are refused, not turned into text.
        raw = np.empty(len(leaves), dtype=object)
        raw[:] = leaves
    else:
        try:
            raw = np.array(leaves)
        except (ValueError, TypeError, OverflowError) as exc:
            raise _error(
                "wrong_dtype",
                spec.name,
                f"Input {spec.name!r} holds values numpy cannot read: {exc}.",
            ) from None
    return coerce_dtype(spec, raw.reshape(shape), limits)


def _from_raw(
    spec: TensorSpec, text: object, shape: tuple[int, ...], limits: Limits, budget: Budget
) -> np.ndarray:
    """Form (c): raw little-endian bytes, sized from ``shape`` before decoding."""
    if spec.is_string:
        raise _error(
            "bad_format",
            spec.name,
            f"Input {spec.name!r} is TYPE_STRING: raw bytes ('b64') are only for numeric "
            'inputs. Send a list of strings, e.g. ["some text"].',
        )
    count = math.prod(shape)
    expected = count * spec.numpy_dtype.itemsize
    budget.check(spec.name, count, expected)
    # Decode up to the request cap, not just ``expected``, so a wrong length gets the
    # precise wrong_shape message below rather than a vague size refusal.
    data = _b64(spec.name, text, limits.max_bytes, "b64")
    if len(data) != expected:
        raise _error(
            "wrong_shape",
            spec.name,
            f"Input {spec.name!r}: 'b64' holds {len(data):,} bytes, but shape {list(shape)} "
            f"of {spec.numpy_dtype.name} needs {expected:,} "
            f"({count:,} x {spec.numpy_dtype.itemsize}).",
        )
    if spec.numpy_dtype.kind == "b" and max(data, default=0) > 1:
        raise _error(
            "wrong_dtype",
            spec.name,
            f"Input {spec.name!r} is BOOL; its raw bytes must each be 0 or 1.",
        )
    little = np.frombuffer(data, dtype=spec.numpy_dtype.newbyteorder("<"))
    return little.astype(spec.numpy_dtype).reshape(shape)


def _from_npy(spec: TensorSpec, text: object, limits: Limits, budget: Budget) -> np.ndarray:
    """Form (d): a .npy file; its header is checked before the array is read."""
    # The header is at most 64 KiB on top of the data (numpy's format 2.0 ceiling we allow).
    data = _b64(spec.name, text, limits.max_bytes + 65536, "npy_b64")
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"format version {version} is not supported; use np.save")
    except (ValueError, OSError, SyntaxError, TypeError) as exc:
        raise _error(
            "bad_npy", spec.name, f"Input {spec.name!r}: 'npy_b64' is not a .npy file ({exc})."
        ) from None
    if dtype.hasobject:
        raise _error(
            "bad_npy",
            spec.name,
            f"Input {spec.name!r}: the .npy file holds Python objects, which would need "
            "unpickling; that is refused. Save a numeric or string array instead.",
        )
    count = math.prod(shape)
    budget.check(spec.name, count, count * dtype.itemsize)
    if len(data) - stream.tell() != count * dtype.itemsize:
        raise _error(
            "bad_npy",
            spec.name,
            f"Input {spec.name!r}: the .npy header says shape {list(shape)} of {dtype} "
            f"({count * dtype.itemsize:,} bytes) but {len(data) - stream.tell():,} bytes "
            "follow it; the file is truncated or padded.",
        )
    array = np.load(io.BytesIO(data), allow_pickle=False)
    return coerce_dtype(spec, array, limits)


def _from_image(
    spec: TensorSpec, data: bytes, preprocess: Preprocess, limits: Limits, budget: Budget
) -> np.ndarray:
    """Form (e) and uploads: checks the target size, then decodes and preprocesses."""
    shape = image_tensor_shape(spec, preprocess)  # not_an_image_input before any decoding
    count = math.prod(shape)
    budget.check(spec.name, count, count * spec.numpy_dtype.itemsize)
    if len(data) > limits.max_image_bytes:
        raise _error(
            "too_large",
            spec.name,
            f"Input {spec.name!r}: the image file is {len(data):,} bytes; the limit is "
            f"{limits.max_image_bytes:,}. Send a smaller file.",
        )
    target = max(*shape[1:], preprocess.resize_short)
    image = decode_image(
        data, limits.max_image_pixels, max_memory=limits.max_image_memory, target_side=target
    )
    return image_to_tensor(image, spec, preprocess)


# Pieces of the forms ---------------------------------------------------------------------


def _b64(name: str, text: object, max_bytes: int, key: str) -> bytes:
    """Decodes base64 strictly, after dropping a data: URL prefix and line breaks."""
    if not isinstance(text, str):
        raise _error("bad_format", name, f"Input {name!r}: {key!r} must be a base64 string.")
    text = text.strip()
    if text.startswith("data:"):
        header, comma, text = text.partition(",")
        if not comma or not header.endswith(";base64"):
            raise _error(
                "bad_base64",
                name,
                f"Input {name!r}: a data: URL must be base64, like 'data:image/png;base64,...'.",
            )
    if len(text) // 4 * 3 > max_bytes + 2:
        raise _error(
            "too_large",
            name,
            f"Input {name!r}: {key!r} decodes to about {len(text) // 4 * 3:,} bytes; the limit "
            f"is {max_bytes:,}.",
        )
    if len(text) % 4 == 0:
        # The common case (what every encoder writes) takes a fast path: the lenient decoder is
        # about a third faster than the strict one, and it skips any character outside the
        # alphabet, so a result of exactly the expected length proves there was none.
        try:
            data = base64.b64decode(text)
        except (binascii.Error, ValueError):
            data = None
        padding = 2 if text.endswith("==") else 1 if text.endswith("=") else 0
        if data is not None and len(data) == len(text) // 4 * 3 - padding:
            return data
    # Tools wrap base64 at 76 columns (the base64 command) and some drop the '=' padding.
    text = "".join(text.split())
    text += "=" * (-len(text) % 4)
    if len(text) // 4 * 3 > max_bytes + 2:
        raise _error(
            "too_large",
            name,
            f"Input {name!r}: {key!r} decodes to about {len(text) // 4 * 3:,} bytes; the limit "
            f"is {max_bytes:,}.",
        )
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _error(
            "bad_base64",
            name,
            f"Input {name!r}: {key!r} is not valid base64 (only A-Z, a-z, 0-9, '+', '/' and "
            "'=' padding). Encode the bytes with standard base64.",
        ) from None


def _shape(name: str, value: object, *, required: bool) -> tuple[int, ...] | None:
    if value is None and not required:
        return None
    if (
        not isinstance(value, list)
        or len(value) > MAX_RANK
        or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value)
    ):
        raise _error(
            "bad_format",
            name,
            f"Input {name!r}: 'shape' must be a list of whole numbers such as [1, 3, 224, 224]; "
            f"got {value!r}."[:300],
        )
    return tuple(value)


def _check_dtype_hint(spec: TensorSpec, hint: object) -> None:
    if hint is None:
        return
    own = {spec.numpy_dtype.name, spec.triton_type, spec.triton_type.removeprefix("TYPE_")}
    if not isinstance(hint, str) or hint not in own:
        raise _error(
            "wrong_dtype",
            spec.name,
            f"Input {spec.name!r} is {spec.triton_type} ({spec.numpy_dtype.name}) but 'dtype' "
            f"says {hint!r}. Send {spec.numpy_dtype.name} data, or leave 'dtype' out.",
        )

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
from model_store.text import Message, Said, joined, say, say_n

__all__ = [
    "DEFAULT_PREPROCESS",
    "Limits",
    "decode_inputs",
    "encode_for_json",
    "example_payload",
    "example_value",
]

DEFAULT_PREPROCESS = PRESETS["imagenet"]
FORMS = say(
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


def _error(code: str, name: str | None, message: Message) -> InferenceInputError:
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
            say(
                "'inputs' must be an object of input name -> value, such as "
                "{%(name)s: [[1.0, 2.0]]}; got %(got)s.",
                name=json.dumps(specs[0].name if specs else "input"),
                got=_type_name(payload),
            ),
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
                say("Input %(input)s: %(problem)s", input=repr(spec.name), problem=exc.message),
                code=exc.code,
                field=spec.name,
                status=exc.status,
            ) from None
        arrays[spec.name] = array
    return arrays


def _type_name(value: object) -> Message:
    if type(value) is list:
        return say("a list")
    if type(value) is str:
        return say("a string")
    if type(value) is dict:
        return say("an object")
    if value is None:
        return say("null")
    return say("a %(type)s", type=type(value).__name__)


def _describe(spec: TensorSpec) -> Said:
    kind = spec.triton_type.removeprefix("TYPE_")
    if not spec.rank_known:  # "any shape" is words, said with the rest of the description
        return say("%(name)s (%(type)s any shape)", name=repr(spec.name), type=kind)
    return f"{spec.name!r} ({kind} {spec.describe_shape()!s})"  # a known rank: dims, no words


def _check_names(
    specs: list[TensorSpec], payload: Mapping[Any, Any], images: Mapping[str, bytes]
) -> None:
    expected = [s.name for s in specs]
    twice = [n for n in images if n in payload]
    if twice:
        raise _error(
            "bad_format",
            twice[0],
            say(
                "Input %(input)s was sent twice, as a value and as an uploaded image. "
                "Send it once.",
                input=repr(twice[0]),
            ),
        )
    given = [*payload, *images]
    extra = [str(n) for n in given if n not in expected]
    missing = [n for n in expected if n not in given]
    if not extra and not missing:
        return
    # The names are shown lower-cased, as the English message always did (it capitalised the
    # sentence, whose first character is a quote).
    parts: list[Said] = []
    if extra:
        parts.append(
            say_n(
                "%(names)s is not an input",
                "%(names)s are not an input",
                len(extra),
                names=_names([n.lower() for n in extra]),
            )
        )
    if missing:
        parts.append(
            say_n(
                "%(names)s is missing",
                "%(names)s are missing",
                len(missing),
                names=_names([n.lower() for n in missing]),
            )
        )
    described = [_describe(s) for s in specs]
    plain = [d for d in described if isinstance(d, str)]
    takes: Said = (
        ", ".join(plain) if len(plain) == len(described) else joined(described, ", ")
    ) or say("no inputs")
    raise _error(
        "extra_input" if extra else "missing_input",
        (extra or missing)[0],
        say(
            "%(problems)s. The model takes: %(takes)s.",
            problems=joined(parts, "; "),
            takes=takes,
        ),
    )


def _names(names: list[str]) -> Said:
    shown = ", ".join(repr(n) for n in names[:10])
    return say("%(names)s and more", names=shown) if len(names) > 10 else shown


# The five forms -------------------------------------------------------------------------


def _decode_value(
    spec: TensorSpec, value: object, preprocess: Preprocess, limits: Limits, budget: Budget
) -> np.ndarray:
    if isinstance(value, list | tuple | int | float | str):
        return _from_nested(spec, value, limits, budget)
    if not isinstance(value, Mapping):
        raise _error(
            "bad_format",
            spec.name,
            say(
                "Input %(input)s is %(got)s. Send %(forms)s.",
                input=repr(spec.name),
                got=_type_name(value),
                forms=FORMS,
            ),
        )
    form = next((key for key in _FORM_KEYS if key in value), None)
    if form is None:
        raise _error(
            "bad_format",
            spec.name,
            say(
                "Input %(input)s is an object with keys %(keys)s. Send %(forms)s.",
                input=repr(spec.name),
                keys=str(sorted(map(str, value))),
                forms=FORMS,
            ),
        )
    unknown = sorted(str(k) for k in value if k not in _FORM_KEYS[form])
    if unknown:
        raise _error(
            "bad_format",
            spec.name,
            say(
                "Input %(input)s: the %(form)s form takes only %(keys)s; remove %(unknown)s.",
                input=repr(spec.name),
                form=repr(form),
                keys=str(sorted(_FORM_KEYS[form])),
                unknown=str(unknown),
            ),
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
            "bad_format",
            spec.name,
            say("Input %(input)s: 'data' must be a list of values.", input=repr(spec.name)),
        )
    walked, leaves = _walk(spec, data, budget)
    if shape is None:
        shape = walked
    elif len(leaves) != math.prod(shape):
        raise _error(
            "wrong_shape",
            spec.name,
            say(
                "Input %(input)s: 'data' holds %(count)s values but 'shape' %(shape)s needs "
                "%(needed)s.",
                input=repr(spec.name),
                count=f"{len(leaves):,}",
                shape=str(list(shape)),
                needed=f"{math.prod(shape):,}",
            ),
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
            raise _ragged(spec, len(shape), say("mixes lists and single values"))
        lengths = {len(item) for item in level}
        if len(lengths) > 1:
            shown = ", ".join(map(str, sorted(lengths)[:5]))
            raise _ragged(spec, len(shape), say("has lists of lengths %(lengths)s", lengths=shown))
        if len(shape) >= MAX_RANK:
            raise _ragged(
                spec, len(shape), say("nests deeper than %(levels)s levels", levels=MAX_RANK)
            )
        shape.append(lengths.pop())
        count = math.prod(shape)
        if count > budget.elements_left:
            budget.check(spec.name, count, 0, at_least=True)
        level = [leaf for item in level for leaf in item]


def _ragged(spec: TensorSpec, depth: int, what: Message) -> InferenceInputError:
    return _error(
        "wrong_shape",
        spec.name,
        say(
            "Input %(input)s is a ragged nested list: level %(level)s %(what)s. Every row "
            "must have the same length (the model takes %(shape)s).",
            input=repr(spec.name),
            level=depth + 1,
            what=what,
            shape=spec.describe_shape(),
        ),
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
                say(
                    "Input %(input)s holds values numpy cannot read: %(error)s.",
                    input=repr(spec.name),
                    error=str(exc),
                ),
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
            say(
                "Input %(input)s is TYPE_STRING: raw bytes ('b64') are only for numeric "
                'inputs. Send a list of strings, e.g. ["some text"].',
                input=repr(spec.name),
            ),
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
            say(
                "Input %(input)s: 'b64' holds %(got)s bytes, but shape %(shape)s of %(dtype)s "
                "needs %(needed)s (%(count)s x %(itemsize)s).",
                input=repr(spec.name),
                got=f"{len(data):,}",
                shape=str(list(shape)),
                dtype=spec.numpy_dtype.name,
                needed=f"{expected:,}",
                count=f"{count:,}",
                itemsize=spec.numpy_dtype.itemsize,
            ),
        )
    if spec.numpy_dtype.kind == "b" and max(data, default=0) > 1:
        raise _error(
            "wrong_dtype",
            spec.name,
            say(
                "Input %(input)s is BOOL; its raw bytes must each be 0 or 1.", input=repr(spec.name)
            ),
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
            "bad_npy",
            spec.name,
            say(
                "Input %(input)s: 'npy_b64' is not a .npy file (%(error)s).",
                input=repr(spec.name),
                error=str(exc),
            ),
        ) from None
    if dtype.hasobject:
        raise _error(
            "bad_npy",
            spec.name,
            say(
                "Input %(input)s: the .npy file holds Python objects, which would need "
                "unpickling; that is refused. Save a numeric or string array instead.",
                input=repr(spec.name),
            ),
        )
    count = math.prod(shape)
    budget.check(spec.name, count, count * dtype.itemsize)
    if len(data) - stream.tell() != count * dtype.itemsize:
        raise _error(
            "bad_npy",
            spec.name,
            say(
                "Input %(input)s: the .npy header says shape %(shape)s of %(dtype)s "
                "(%(needed)s bytes) but %(got)s bytes follow it; the file is truncated or "
                "padded.",
                input=repr(spec.name),
                shape=str(list(shape)),
                dtype=str(dtype),
                needed=f"{count * dtype.itemsize:,}",
                got=f"{len(data) - stream.tell():,}",
            ),
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
            say(
                "Input %(input)s: the image file is %(size)s bytes; the limit is %(limit)s. "
                "Send a smaller file.",
                input=repr(spec.name),
                size=f"{len(data):,}",
                limit=f"{limits.max_image_bytes:,}",
            ),
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
        raise _error(
            "bad_format",
            name,
            say(
                "Input %(input)s: %(key)s must be a base64 string.", input=repr(name), key=repr(key)
            ),
        )
    text = text.strip()
    if text.startswith("data:"):
        header, comma, text = text.partition(",")
        if not comma or not header.endswith(";base64"):
            raise _error(
                "bad_base64",
                name,
                say(
                    "Input %(input)s: a data: URL must be base64, like "
                    "'data:image/png;base64,...'.",
                    input=repr(name),
                ),
            )
    if len(text) // 4 * 3 > max_bytes + 2:
        raise _error(
            "too_large",
            name,
            _too_big(name, key, len(text) // 4 * 3, max_bytes),
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
            _too_big(name, key, len(text) // 4 * 3, max_bytes),
        )
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _error(
            "bad_base64",
            name,
            say(
                "Input %(input)s: %(key)s is not valid base64 (only A-Z, a-z, 0-9, '+', '/' and "
                "'=' padding). Encode the bytes with standard base64.",
                input=repr(name),
                key=repr(key),
            ),
        ) from None


def _too_big(name: str, key: str, size: int, max_bytes: int) -> Message:
    return say(
        "Input %(input)s: %(key)s decodes to about %(size)s bytes; the limit is %(limit)s.",
        input=repr(name),
        key=repr(key),
        size=f"{size:,}",
        limit=f"{max_bytes:,}",
    )


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
            say(
                "Input %(input)s: 'shape' must be a list of whole numbers such as "
                "[1, 3, 224, 224]; got %(got)s.",
                input=repr(name),
                got=_cut(repr(value), 200),
            ),
        )
    return tuple(value)


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters for a message, marked with "..." when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_dtype_hint(spec: TensorSpec, hint: object) -> None:
    if hint is None:
        return
    own = {spec.numpy_dtype.name, spec.triton_type, spec.triton_type.removeprefix("TYPE_")}
    if not isinstance(hint, str) or hint not in own:
        raise _error(
            "wrong_dtype",
            spec.name,
            say(
                "Input %(input)s is %(dtype)s (%(numpy)s) but 'dtype' says %(hint)s. "
                "Send %(numpy)s data, or leave 'dtype' out.",
                input=repr(spec.name),
                dtype=spec.triton_type,
                numpy=spec.numpy_dtype.name,
                hint=repr(hint),
            ),
        )

"""The input forms of :mod:`model_store.inference.decode`, one decoder each: nested lists (a),
``data`` with a ``shape`` (b), raw bytes (c), a ``.npy`` file (d) and an image file (e).

Apart from :mod:`model_store.inference.decode`, which checks a request's names and picks the
form of each value, because each decoder here turns one value into one array and sizes it
against the budget before numpy allocates anything.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

from model_store.dtypes import npy_header
from model_store.inference.coerce import coerce_dtype
from model_store.inference.decode_fields import MAX_RANK, _b64, _error
from model_store.inference.errors import InferenceInputError
from model_store.inference.image import (
    Preprocess,
    decode_image,
    image_tensor_shape,
    image_to_tensor,
)
from model_store.inference.limits import Budget, Limits
from model_store.inference.signature import TensorSpec
from model_store.text import Message, say


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
        shape, dtype = npy_header(stream)
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

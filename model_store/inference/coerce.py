"""Fitting a decoded array to an input's dtype and shape, or saying exactly why it does not fit.

Values are converted only when nothing is lost: bools and integers go into float inputs;
floats go into integer inputs only when every value is whole and in range; a finite value
that would overflow the target float type (70000 into FP16) is refused rather than sent as
infinity. NaN and infinity that the sender wrote are legal and kept. Text never becomes a
number, and numbers never silently become text.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from model_store.inference.errors import InferenceInputError
from model_store.inference.limits import Limits
from model_store.inference.signature import TensorSpec
from model_store.text import Said, say


def _wrong_dtype(spec: TensorSpec, got: Said, advice: Said) -> InferenceInputError:
    """``got`` and ``advice`` are :func:`~model_store.text.say` sentences or plain data."""
    if spec.is_string:
        kind: Said = say("STRING (text)")
    else:
        kind = f"{spec.triton_type.removeprefix('TYPE_')} ({spec.numpy_dtype.name})"
    return InferenceInputError(
        say(
            "Input %(input)s is %(kind)s; got %(got)s. %(advice)s",
            input=repr(spec.name),
            kind=kind,
            got=got,
            advice=advice,
        ),
        code="wrong_dtype",
        field=spec.name,
    )


def _first(values: np.ndarray, bad: np.ndarray) -> Any:
    """The first value where ``bad`` holds, as a plain Python value for messages."""
    return values[bad].flat[0].item()


def coerce_dtype(spec: TensorSpec, raw: np.ndarray, limits: Limits) -> np.ndarray:
    """Converts ``raw`` (any dtype numpy inferred or a .npy file held) to ``spec``'s dtype.

    Raises:
        InferenceInputError: ``wrong_dtype`` naming the first offending value, or
            ``too_large`` for an oversized string.
    """
    if spec.is_string:
        return _to_bytes(spec, raw, limits)
    kind = raw.dtype.kind
    if kind in "US":
        text = raw.flat[0] if raw.size else ""
        raise _wrong_dtype(spec, say("text (%(text)s)", text=repr(text)), say("Send numbers."))
    if kind == "O":
        raise _explain_objects(spec, raw)
    if kind not in "biuf":
        raise _wrong_dtype(
            spec, say("%(dtype)s data", dtype=str(raw.dtype)), say("Send real numbers.")
        )
    target = spec.numpy_dtype
    if target.kind == "b":
        return _to_bool(spec, raw)
    if target.kind in "iu":
        return _to_int(spec, raw)
    return _to_float(spec, raw)


def _to_bool(spec: TensorSpec, raw: np.ndarray) -> np.ndarray:
    if raw.dtype.kind != "b":
        bad = (raw != 0) & (raw != 1)
        if bad.any():
            raise _wrong_dtype(spec, repr(_first(raw, bad)), say("Send true/false (or 0/1)."))
    return raw.astype(np.bool_)


def _to_int(spec: TensorSpec, raw: np.ndarray) -> np.ndarray:
    target = spec.numpy_dtype
    if raw.dtype.kind == "f":
        bad = ~np.isfinite(raw) | (raw != np.trunc(raw))
        if bad.any():
            raise _wrong_dtype(spec, repr(_first(raw, bad)), say("Send whole numbers."))
    if raw.size and raw.dtype.kind != "b":
        info = np.iinfo(target)
        # Python compares int and float exactly, so 2**63 as a float is out of INT64 range.
        low, high = raw.min().item(), raw.max().item()
        for value in (low, high):
            if not info.min <= value <= info.max:
                raise _wrong_dtype(
                    spec,
                    repr(value),
                    say("Values must be from %(min)s to %(max)s.", min=info.min, max=info.max),
                )
    return raw.astype(target)


def _to_float(spec: TensorSpec, raw: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # overflow is detected and explained just below
        converted = raw.astype(spec.numpy_dtype)
    if raw.dtype.kind != "b" and raw.size:
        overflow = np.isfinite(raw) & ~np.isfinite(converted)
        if overflow.any():
            largest = np.finfo(spec.numpy_dtype).max.item()
            raise _wrong_dtype(
                spec,
                repr(_first(raw, overflow)),
                say("Values must be within ±%(largest)s.", largest=f"{largest:g}"),
            )
    return converted


def _explain_objects(spec: TensorSpec, raw: np.ndarray) -> InferenceInputError:
    """Why an object array (numpy's fallback for mixed or odd values) is not numbers."""
    for item in raw.flat:
        if item is None:
            return _wrong_dtype(spec, "null", say("Send numbers (NaN may be written as NaN)."))
        if isinstance(item, bool | float):
            continue
        if isinstance(item, int):
            # numpy falls back to objects for integers beyond 64 bits.
            return _wrong_dtype(spec, repr(item), say("That integer is out of range."))
        if isinstance(item, str | bytes):
            return _wrong_dtype(spec, say("text (%(text)s)", text=repr(item)), say("Send numbers."))
        return _wrong_dtype(
            spec, say("a %(type)s", type=type(item).__name__), say("Send numbers only.")
        )
    return _wrong_dtype(spec, say("values that are not numbers"), say("Send numbers only."))


def _to_bytes(spec: TensorSpec, raw: np.ndarray, limits: Limits) -> np.ndarray:
    """Text or bytes to the object array of bytes that Triton's BYTES type takes."""
    if raw.dtype.kind in "biufc":
        first = raw.flat[0].item() if raw.size else ""
        raise _wrong_dtype(
            spec,
            say("numbers (%(first)s)", first=repr(first)),
            say('Send strings, e.g. ["some text"].'),
        )
    out = np.empty(raw.shape, dtype=object)
    for index, item in enumerate(raw.flat):
        if isinstance(item, str):
            item = item.encode("utf-8")
        elif not isinstance(item, bytes):
            got = "null" if item is None else f"{item!r}"
            raise _wrong_dtype(spec, got, say('Send strings, e.g. ["some text"].'))
        if len(item) > limits.max_string_bytes:
            raise InferenceInputError(
                say(
                    "Input %(input)s has a string of %(size)s bytes; the limit is "
                    "%(limit)s bytes per string.",
                    input=repr(spec.name),
                    size=f"{len(item):,}",
                    limit=f"{limits.max_string_bytes:,}",
                ),
                code="too_large",
                field=spec.name,
            )
        out.flat[index] = item
    return out


def fit_shape(spec: TensorSpec, array: np.ndarray) -> np.ndarray:
    """Checks ``array`` against the input's dims; may add a leading batch axis of 1.

    The batch convenience: when the array has one axis fewer than the model and the
    model's first axis has any size, the array is taken as a single item of the batch.

    Raises:
        InferenceInputError: ``wrong_shape`` naming both shapes.
    """
    if spec.rank_known and spec.rank >= 1 and spec.dims[0] is None and array.ndim == spec.rank - 1:
        array = array[np.newaxis]
    takes = say(
        "the model takes %(shape)s%(free)s",
        shape=spec.describe_shape(),
        free=spec.describe_free_dims(),
    )
    if 0 in array.shape:
        raise InferenceInputError(
            say(
                "Input %(input)s has shape %(shape)s, with an empty axis; every "
                "axis needs at least one element (%(takes)s).",
                input=repr(spec.name),
                shape=str(list(array.shape)),
                takes=takes,
            ),
            code="wrong_shape",
            field=spec.name,
        )
    if not spec.rank_known:
        return array
    if array.ndim != spec.rank:
        raise InferenceInputError(
            say(
                "Input %(input)s has shape %(shape)s (%(ndim)s axes); %(takes)s (%(rank)s axes).",
                input=repr(spec.name),
                shape=str(list(array.shape)),
                ndim=array.ndim,
                takes=takes,
                rank=spec.rank,
            ),
            code="wrong_shape",
            field=spec.name,
        )
    if any(d is not None and d != n for d, n in zip(spec.dims, array.shape, strict=True)):
        raise InferenceInputError(
            say(
                "Input %(input)s has shape %(shape)s; %(takes)s.",
                input=repr(spec.name),
                shape=str(list(array.shape)),
                takes=takes,
            ),
            code="wrong_shape",
            field=spec.name,
        )
    return array

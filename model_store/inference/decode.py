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

Each form has its decoder in :mod:`model_store.inference.decode_forms`, and the fields they share
(base64, ``shape``, ``dtype``) are checked in :mod:`model_store.inference.decode_fields`; this
module checks the request as a whole and picks the form of each value.

Example:
    >>> decode_inputs(specs, {"input": {"image_b64": b64}}, Limits(),
    ...               default_preprocess=PRESETS["efficientnet"])["input"].shape
    (1, 3, 224, 224)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from model_store.inference.coerce import fit_shape
from model_store.inference.decode_fields import _b64, _check_dtype_hint, _error, _shape
from model_store.inference.decode_forms import (
    _from_data,
    _from_image,
    _from_nested,
    _from_npy,
    _from_raw,
)
from model_store.inference.errors import InferenceInputError
from model_store.inference.examples import example_payload, example_value
from model_store.inference.image import PRESETS, Preprocess
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
_FORM_KEYS: dict[str, frozenset[str]] = {
    "image_b64": frozenset({"image_b64", "preprocess"}),
    "npy_b64": frozenset({"npy_b64"}),
    "b64": frozenset({"b64", "shape", "dtype"}),
    "data": frozenset({"data", "shape", "dtype"}),
}


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

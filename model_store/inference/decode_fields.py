"""The fields the input forms of :mod:`model_store.inference.decode` share: base64 text
(``"b64"``, ``"npy_b64"``, ``"image_b64"``), ``"shape"`` and ``"dtype"``, and how a decoding
step builds its error.

Apart from the forms (:mod:`model_store.inference.decode_forms`) because each field is checked
the same way whichever form carries it.
"""

from __future__ import annotations

import base64
import binascii

from model_store.inference.errors import InferenceInputError
from model_store.inference.signature import TensorSpec
from model_store.text import Message, say

# numpy arrays have at most 32 axes (numpy 1.x); no model input has nearly that many.
MAX_RANK = 32


def _error(code: str, name: str | None, message: Message) -> InferenceInputError:
    return InferenceInputError(message, code=code, field=name)


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

"""Arrays as JSON-safe nested lists, for API answers and the page.

Floats are not rounded: ``tolist()`` gives the Python float nearest each value (exactly the
float32 value for float32 arrays), so a list sent back into a float32 input reproduces the
array bit for bit, and the page decides how many digits to show. JSON has no NaN or
infinity (browsers' ``JSON.parse`` rejects Python's ``NaN`` token), so those become null.
Bytes (Triton BYTES) become text, undecodable bytes shown as U+FFFD.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def encode_for_json(array: Any) -> list[Any]:
    """Returns ``array`` as nested lists of JSON-safe values.

    A 0-d array comes back as a one-element list, so the result is always a list.

    Example:
        >>> encode_for_json(np.array([1.5, np.nan], dtype=np.float32))
        [1.5, None]
    """
    values = np.asarray(array)
    if values.ndim == 0:
        values = values.reshape(1)
    if values.dtype.kind == "f":
        finite = np.isfinite(values)
        if finite.all():
            result: list[Any] = values.tolist()
            return result
        boxed = values.astype(np.float64).astype(object)
        boxed[~finite] = None
        return list(boxed.tolist())
    if values.dtype.kind in "OS":
        strings = np.empty(values.shape, dtype=object)
        for index, item in enumerate(values.flat):
            strings.flat[index] = _text(item)
        return list(strings.tolist())
    return list(values.tolist())


def _text(item: object) -> object:
    if isinstance(item, bytes):
        return item.decode("utf-8", errors="replace")
    if item is None or isinstance(item, str | bool | int):
        return item
    if isinstance(item, float):
        return item if np.isfinite(item) else None
    return str(item)

"""Model outputs as something a page can show, and class labels as a list.

A classifier's raw output is a thousand floats; a person wants "espresso, 97 %". An output
that looks like one row of class scores is therefore described with its top-k classes as
well as its values. Scores that already are probabilities (in [0, 1], summing to 1) are
shown as given, anything else goes through a softmax, and the answer says which, because a
softmax over an output that was not logits would be a made-up number.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from model_store.inference.errors import InferenceInputError
from model_store.inference.jsonable import encode_for_json
from model_store.text import Message, say

PROBABILITY_SUM_TOLERANCE = 1e-3
# Control characters other than tab and line breaks: a sign of a binary file.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def describe_outputs(
    outputs: Mapping[str, np.ndarray],
    labels: Sequence[str] | None = None,
    top_k: int = 5,
    max_values: int = 1000,
) -> list[dict[str, Any]]:
    """Describes each output, in name order.

    Each dict has ``name``, ``dtype`` (numpy name), ``shape``, ``kind``
    (``"classification"`` or ``"values"``), ``values`` (flat, JSON-safe, at most
    ``max_values``, NaN/infinity as null), ``truncated`` and ``non_finite`` (count over the
    whole output). A float output of shape ``[N]``, ``[1, N]`` or ``[B, N]`` with N >= 2
    and a finite first row is a classification: it adds ``rows`` (B), ``probabilities``
    (``"softmax"`` or ``"as given"``) and ``top_k``, a list of ``{"index", "label",
    "score", "probability"}`` for the first row, best first.
    """
    return [
        _describe(name, np.asarray(outputs[name]), labels, top_k, max_values)
        for name in sorted(outputs)
    ]


def _describe(
    name: str, array: np.ndarray, labels: Sequence[str] | None, top_k: int, max_values: int
) -> dict[str, Any]:
    flat = array.reshape(-1)
    is_float = array.dtype.kind == "f"
    entry: dict[str, Any] = {
        "name": name,
        "dtype": array.dtype.name,
        "shape": list(array.shape),
        "kind": "values",
        "values": encode_for_json(flat[: max(max_values, 0)]),
        "truncated": flat.size > max_values,
        "non_finite": int(flat.size - np.count_nonzero(np.isfinite(flat))) if is_float else 0,
    }
    row = _score_row(array)
    if row is not None:
        entry["kind"] = "classification"
        entry["rows"] = 1 if array.ndim == 1 else array.shape[0]
        entry.update(_top_k(row, labels, top_k))
    return entry


def _score_row(array: np.ndarray) -> np.ndarray | None:
    """The row of class scores, if the output looks like a classifier's."""
    if array.dtype.kind != "f" or array.ndim not in (1, 2) or array.size == 0:
        return None
    row = array if array.ndim == 1 else array[0]
    if row.size < 2 or not np.isfinite(row).all():
        return None  # a NaN makes any ranking meaningless; show the values instead
    return row.astype(np.float64)


def _top_k(row: np.ndarray, labels: Sequence[str] | None, top_k: int) -> dict[str, Any]:
    looks_like_probabilities = bool(
        np.all((row >= 0) & (row <= 1)) and abs(row.sum() - 1) <= PROBABILITY_SUM_TOLERANCE
    )
    if looks_like_probabilities:
        probabilities, how = row, "as given"
    else:
        shifted = np.exp(row - row.max())  # subtracting the max keeps exp from overflowing
        probabilities, how = shifted / shifted.sum(), "softmax"
    # Stable sort of the negated scores: ties keep the lower index first.
    order = np.argsort(-row, kind="stable")[: max(top_k, 0)]
    best = [
        {
            "index": int(i),
            "label": (labels[i] or None) if labels and i < len(labels) else None,
            "score": float(row[i]),
            "probability": float(probabilities[i]),
        }
        for i in order
    ]
    return {"probabilities": how, "top_k": best}


# Labels ---------------------------------------------------------------------------------


def _bad(message: Message) -> InferenceInputError:
    return InferenceInputError(message, code="bad_labels")


def parse_labels(text: str | bytes, max_labels: int = 100_000, max_len: int = 200) -> list[str]:
    """Reads class labels: one per line, a JSON list, or a JSON object by index.

    Lines are stripped and trailing empty lines dropped; empty lines in between are kept (as
    ``""``) so indexes stay aligned. A JSON object maps ``"0"``, ``"1"``... to a label, or to
    a list whose last item is the label (``imagenet_class_index.json``); gaps become ``""``.

    Raises:
        InferenceInputError: ``bad_labels`` for binary, empty or oversized input.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise _bad(say("The labels file is not UTF-8 text.")) from None
    # Cheap bound before any splitting: every label plus its line break, and some slack.
    if len(text) > max_labels * (max_len + 2) + 4096:
        raise _bad(
            say("The labels file is too large (%(count)s characters).", count=f"{len(text):,}")
        )
    text = text.removeprefix("\ufeff")
    if _CONTROL.search(text):
        raise _bad(say("The labels file looks binary; send plain text with one label per line."))
    stripped = text.strip()
    if not stripped:
        raise _bad(say("The labels file is empty; send one label per line."))
    labels = _from_json(stripped, max_labels) if stripped[0] in "[{" else None
    if labels is None:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        labels = [line.strip() for line in lines]
        while labels and not labels[-1]:
            labels.pop()
    if len(labels) > max_labels:
        raise _bad(
            say(
                "The file has %(count)s labels; the limit is %(limit)s.",
                count=f"{len(labels):,}",
                limit=f"{max_labels:,}",
            )
        )
    for number, label in enumerate(labels):
        if len(label) > max_len:
            raise _bad(
                say(
                    "Label %(number)s is %(length)s characters; labels are at most %(limit)s.",
                    number=number,
                    length=f"{len(label):,}",
                    limit=max_len,
                )
            )
    return labels


def _from_json(text: str, max_labels: int) -> list[str] | None:
    """Labels from a JSON list or object; None if the text is not JSON (then it is lines)."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(parsed, list):
        if not all(isinstance(item, str) for item in parsed):
            raise _bad(say("A JSON labels list must hold only strings."))
        return [item.strip() for item in parsed]
    if isinstance(parsed, dict):
        return _from_index_object(parsed, max_labels)
    return None


def _from_index_object(parsed: dict[str, Any], max_labels: int) -> list[str]:
    by_index: dict[int, str] = {}
    for key, value in parsed.items():
        # isascii: str.isdigit also accepts "²", which int() refuses; the length check
        # keeps int() away from its digit limit.
        if not (key.isascii() and key.isdigit() and len(key) <= 9) or int(key) >= max_labels:
            raise _bad(
                say(
                    "A JSON labels object must map class indexes (0 to %(last)s) to "
                    'labels, like {"0": "tench"}; %(key)s is not one.',
                    last=max_labels - 1,
                    key=repr(key[:50]),
                )
            )
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = value[-1]  # imagenet_class_index.json: {"0": ["n01440764", "tench"]}
        if not isinstance(value, str):
            raise _bad(say("The label for class %(key)s is not a string.", key=key))
        by_index[int(key)] = value.strip()
    labels = [""] * (max(by_index, default=-1) + 1)
    for index, label in by_index.items():
        labels[index] = label
    return labels

"""Class names a model can be given with one click, instead of a labels file.

Two sources (docs/labels.md#where-labels-come-from):

* **ImageNet-1k**, shipped in ``labels/imagenet-1k.txt``: offered when an output of the
  version's signature looks like one row of ImageNet scores (a float output of rank 1 or 2
  whose last axis is 1000, or 1001 for TensorFlow-style models whose class 0 is
  "background").
* **The ONNX file's metadata** (``metadata_props``): exporters leave class names under keys
  such as ``names`` (Ultralytics, a Python ``dict`` written with ``str()``), ``class_names``
  or ``labels`` (JSON). :func:`names_from_metadata` reads them once, at validation, and the
  result is stored with the version's ONNX summary.

Nothing in a model file is ever executed: JSON goes through :func:`json.loads`, and the
Python form is parsed with :func:`ast.parse` and accepted only when the tree is a plain
list, tuple or dict of string and integer constants, whose values are then read off the
tree. Every value is bounded before it is parsed, and the names after.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

IMAGENET_1K = "imagenet-1k"
MODEL_FILE = "model-file"
SOURCES = (IMAGENET_1K, MODEL_FILE)

#: Metadata keys that carry class names, most specific first; matched ignoring case, ``_``,
#: ``-`` and spaces (so ``class_names``, ``classNames`` and ``Class Names`` are one key).
LABEL_KEYS = ("classnames", "classlabels", "labels", "classes", "names")
#: The longest metadata value read as class names (100k short names fit; a bigger value
#: is not parsed at all).
MAX_METADATA_CHARS = 2 << 20
#: As ``parse_labels``: at most this many names, each at most this many characters.
MAX_LABELS = 100_000
MAX_LABEL_CHARS = 200

_IMAGENET_FILE = Path(__file__).resolve().parent / "labels" / "imagenet-1k.txt"
_IMAGENET_SIZES = (1000, 1001)
_FLOATS = {"float16", "float32", "float64", "bfloat16"}
# Any control character (line breaks included) inside one name: not a class name.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_KEY_NOISE = re.compile(r"[\s_\-.]+")


@dataclass(frozen=True)
class MetadataNames:
    """Class names found in a model file: the metadata key they came from, and the names."""

    key: str
    names: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "names": list(self.names)}

    @classmethod
    def from_dict(cls, raw: object) -> MetadataNames | None:
        """What :meth:`to_dict` stored, or None for anything else (an older summary)."""
        if not isinstance(raw, Mapping):
            return None
        key, names = raw.get("key"), raw.get("names")
        if not isinstance(key, str) or not isinstance(names, list) or not names:
            return None
        if not all(isinstance(n, str) for n in names):
            return None
        return cls(key, names)


@dataclass(frozen=True)
class LabelOffer:
    """One set of class names the Try it tab offers.

    Attributes:
        source: ``"imagenet-1k"`` or ``"model-file"``.
        count: How many names it sets (1000 or 1001 for ImageNet).
        key: The metadata key (model file only).
        output: The output that looks like ImageNet scores (ImageNet only).
    """

    source: str
    count: int
    key: str = ""
    output: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source": self.source, "count": self.count}
        if self.key:
            data["key"] = self.key
        if self.output:
            data["output"] = self.output
        return data


# ImageNet ------------------------------------------------------------------------------


@cache
def _imagenet_names() -> tuple[str, ...]:
    names = tuple(_IMAGENET_FILE.read_text(encoding="utf-8").splitlines())
    if len(names) != 1000:  # a broken installation, not a user's mistake
        raise RuntimeError(f"{_IMAGENET_FILE} holds {len(names)} names, not 1000")
    return names


def imagenet_labels(classes: int = 1000) -> list[str]:
    """The ImageNet-1k class names in index order; for 1001 classes ``"background"`` first.

    Raises:
        ValueError: ``classes`` is neither 1000 nor 1001.
    """
    if classes not in _IMAGENET_SIZES:
        raise ValueError(f"ImageNet-1k has 1000 classes (1001 with background), not {classes}")
    names = list(_imagenet_names())
    return ["background", *names] if classes == 1001 else names


def imagenet_output(signature: Mapping[str, Any]) -> tuple[str, int] | None:
    """The first output that looks like ImageNet scores, and its class count; else None.

    ``signature`` is a version's stored signature (``{"outputs": [{"name", "numpy",
    "dims"}, ...]}``): a float output of rank 1 or 2 (the ranks Try it ranks as top-k)
    whose last axis is 1000 or 1001.
    """
    outputs = signature.get("outputs") if isinstance(signature, Mapping) else None
    for output in outputs if isinstance(outputs, list) else []:
        if not isinstance(output, Mapping):
            continue
        dims = output.get("dims")
        if not isinstance(dims, list) or not 1 <= len(dims) <= 2:
            continue
        last = dims[-1]
        sized = isinstance(last, int) and not isinstance(last, bool) and last in _IMAGENET_SIZES
        if sized and output.get("numpy") in _FLOATS:
            return str(output.get("name", "")), last
    return None


# The model file's metadata ---------------------------------------------------------------


def names_from_metadata(
    props: Mapping[str, str] | Iterable[tuple[str, str]],
) -> MetadataNames | None:
    """Class names under the first label key (:data:`LABEL_KEYS` order) whose value reads as
    names; None when no key does. A value that does not read (too big, not a list or map
    of names, code) is skipped, never an error: the file is valid without it."""
    items = props.items() if isinstance(props, Mapping) else props
    by_key: dict[str, tuple[str, str]] = {}
    for key, value in items:
        if not isinstance(key, str) or not isinstance(value, str):
            continue
        normal = _KEY_NOISE.sub("", key).lower()
        if normal in LABEL_KEYS:
            by_key.setdefault(normal, (key, value))
    for wanted in LABEL_KEYS:
        if wanted not in by_key:
            continue
        key, value = by_key[wanted]
        names = parse_metadata_names(value)
        if names is not None:
            return MetadataNames(key, names)
    return None


def parse_metadata_names(text: str) -> list[str] | None:
    """Class names from one metadata value, or None if it holds none.

    Accepted: a JSON list of strings; a JSON object of index -> name; the same as a Python
    literal (``{0: 'person', 1: 'bicycle'}``, ``['cat', 'dog']``); one name per line (two
    lines or more). A map's gaps become ``""``. A map inside a one-item list (one map per
    output) is read as that map.
    """
    if not isinstance(text, str) or len(text) > MAX_METADATA_CHARS:
        return None
    stripped = text.strip().removeprefix("\ufeff")
    if not stripped:
        return None
    if stripped[0] in "[{(":
        parsed = _json(stripped)
        if parsed is None:
            parsed = _python_literal(stripped)
        names = _names(parsed)
    else:
        lines = [line.strip() for line in stripped.replace("\r\n", "\n").split("\n")]
        names = lines if len(lines) >= 2 else None
    if not names or len(names) > MAX_LABELS or not any(names):
        return None
    if any(len(n) > MAX_LABEL_CHARS or _CONTROL.search(n) for n in names):
        return None
    return names


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _python_literal(text: str) -> object:
    """A plain list, tuple or dict of int and str constants written as Python; else None.

    The tree is checked node by node and the values read off it: nothing is evaluated.
    """
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if isinstance(tree, ast.List | ast.Tuple) and len(tree.elts) == 1:
        tree = tree.elts[0] if isinstance(tree.elts[0], ast.Dict) else tree
    if isinstance(tree, ast.List | ast.Tuple):
        values = [_constant(e, str) for e in tree.elts]
        return None if any(v is None for v in values) else values
    if isinstance(tree, ast.Dict):
        mapping: dict[object, object] = {}
        for key_node, value_node in zip(tree.keys, tree.values, strict=True):
            key = _constant(key_node, (int, str)) if key_node is not None else None
            value = _constant(value_node, str)
            if key is None or value is None:
                return None
            mapping[key] = value
        return mapping
    return None


def _constant(node: ast.AST, kinds: type | tuple[type, ...]) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, kinds):
        return None if isinstance(node.value, bool) else node.value
    return None


def _names(parsed: object) -> list[str] | None:
    if isinstance(parsed, list | tuple) and len(parsed) == 1 and isinstance(parsed[0], dict):
        parsed = parsed[0]  # one map per output, and one output
    if isinstance(parsed, list | tuple):
        if len(parsed) > MAX_LABELS or not all(isinstance(n, str) for n in parsed):
            return None
        return [n.strip() for n in parsed]
    if isinstance(parsed, dict):
        return _from_index_map(parsed)
    return None


def _from_index_map(parsed: dict[Any, Any]) -> list[str] | None:
    if len(parsed) > MAX_LABELS:
        return None
    by_index: dict[int, str] = {}
    for key, value in parsed.items():
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = value[-1]  # as imagenet_class_index.json: {"0": ["n01440764", "tench"]}
        if isinstance(key, bool) or not isinstance(value, str):
            return None
        if isinstance(key, str):
            # isascii: str.isdigit also accepts "²"; the length keeps int() cheap.
            if not (key.isascii() and key.isdigit() and len(key) <= 9):
                return None
            key = int(key)
        if not isinstance(key, int) or not 0 <= key < MAX_LABELS:
            return None
        by_index[key] = value.strip()
    if not by_index:
        return None
    names = [""] * (max(by_index) + 1)
    for index, name in by_index.items():
        names[index] = name
    return names


# What Try it offers -----------------------------------------------------------------------


def label_offers(
    signature: Mapping[str, Any], onnx_summary: Mapping[str, Any] | None
) -> list[LabelOffer]:
    """The class names a version offers, ImageNet first: from its signature (an
    ImageNet-sized output) and from its ONNX summary (names found in the file)."""
    offers = []
    found = imagenet_output(signature)
    if found is not None:
        output, classes = found
        offers.append(LabelOffer(IMAGENET_1K, classes, output=output))
    stored = MetadataNames.from_dict((onnx_summary or {}).get("class_names"))
    if stored is not None:
        offers.append(LabelOffer(MODEL_FILE, len(stored.names), key=stored.key))
    return offers


def offered_labels(
    source: str, signature: Mapping[str, Any], onnx_summary: Mapping[str, Any] | None
) -> list[str] | None:
    """The names of the offer ``source`` for this version, or None when it is not offered."""
    if source == IMAGENET_1K:
        found = imagenet_output(signature)
        return imagenet_labels(found[1]) if found is not None else None
    if source == MODEL_FILE:
        stored = MetadataNames.from_dict((onnx_summary or {}).get("class_names"))
        return list(stored.names) if stored is not None else None
    return None

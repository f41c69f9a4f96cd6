"""The Try it form, read into the same request body the infer API takes.

The panel posts one multipart form: per input ``i`` a hidden ``input-i`` (its name) and
``kind-i`` (``image`` or ``tensor``); an image input sends its photo as the file ``image-i``
and its preprocessing as ``pp-i-<field>``; a tensor input sends JSON in ``tensor-i`` or a
``.npy`` file as ``npy-i``. Besides them: ``version``, ``compare`` with ``compare_version``,
and ``top_k``. Inputs are indexed rather than named by their tensor names, which an uploader
chooses and may be anything.

What comes out is exactly what ``POST /api/v1/models/{name}/infer`` accepts (``image_b64``,
``npy_b64``, nested lists), so the page and the API share ``webapp.registry.inference.run``
and a saved example is the same whichever way it was saved.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

from django.http import QueryDict
from django.utils.datastructures import MultiValueDict

from model_store.inference import InferenceInputError
from webapp.registry.inference import MAX_TOP_K

#: Inputs a form may name; a signature has a handful, this bounds a hostile form.
MAX_INPUTS = 64


@dataclass(frozen=True)
class RunOptions:
    """Which versions run and how many classes to list."""

    version: int | None
    compare: int | None
    top_k: int

    @property
    def versions(self) -> list[int | None]:
        return [self.version, self.compare] if self.compare is not None else [self.version]


def _whole(value: str, what: str, low: int, high: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise InferenceInputError(
            f"{what} must be a whole number from {low} to {high}.", code="invalid_field"
        ) from None
    if not low <= number <= high:
        raise InferenceInputError(
            f"{what} must be a whole number from {low} to {high}.", code="invalid_field"
        )
    return number


def run_options(post: QueryDict) -> RunOptions:
    """``version`` (the serving one when empty), the version to compare with, ``top_k``."""
    raw = post.get("version", "").strip()
    version = _whole(raw, "The version", 1, 2**31 - 1) if raw else None
    compare = None
    other = post.get("compare_version", "").strip()
    if post.get("compare") and other:
        compare = _whole(other, "The version to compare with", 1, 2**31 - 1)
        if compare == version:
            compare = None
    top_k = _whole(post.get("top_k", "") or "5", "Top-k", 1, MAX_TOP_K)
    return RunOptions(version=version, compare=compare, top_k=top_k)


def _triple(value: str, what: str) -> list[float]:
    parts = [p for p in re.split(r"[,\s]+", value.strip()) if p]
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        numbers = []
    if len(numbers) == 1:
        numbers = numbers * 3
    if len(numbers) != 3:
        raise InferenceInputError(
            f"{what} needs three numbers, for R, G and B.", code="bad_preprocess"
        )
    return numbers


def preprocess(post: QueryDict, index: int) -> dict[str, Any]:
    """The preprocessing fields of image input ``index``, as the API's ``preprocess`` object."""

    def get(field: str) -> str:
        return post.get(f"pp-{index}-{field}", "").strip()

    crop = get("crop")
    return {
        "resize_short": _whole(get("resize_short") or "0", "Resize short side", 0, 1 << 16),
        "crop": _whole(crop, "Centre crop", 1, 1 << 16) if crop else None,
        "mean": _triple(get("mean"), "Mean"),
        "std": _triple(get("std"), "Std"),
        "color": get("color") or "RGB",
        "layout": get("layout") or None,
    }


def _b64(upload: Any) -> str:
    return base64.b64encode(upload.read()).decode("ascii")


def inputs(post: QueryDict, files: MultiValueDict[str, Any]) -> dict[str, Any]:
    """The ``inputs`` object of an infer request, from the form's fields and files.

    Raises:
        InferenceInputError: A photo is missing, JSON does not parse, or preprocessing is
            malformed; the message names the input.
    """
    body: dict[str, Any] = {}
    for index in range(MAX_INPUTS):
        name = post.get(f"input-{index}")
        if name is None:
            break
        if post.get(f"kind-{index}") == "image":
            photo = files.get(f"image-{index}")
            if photo is None:
                raise InferenceInputError(
                    f"Choose a photo for {name} (drop, pick, paste or click a sample).",
                    code="missing_input",
                    field=name,
                )
            body[name] = {"image_b64": _b64(photo), "preprocess": preprocess(post, index)}
            continue
        npy = files.get(f"npy-{index}")
        if npy is not None:
            body[name] = {"npy_b64": _b64(npy)}
            continue
        try:
            body[name] = json.loads(post.get(f"tensor-{index}", ""))
        except ValueError as exc:
            raise InferenceInputError(
                f"The values of {name} are not valid JSON: {exc}.", code="bad_json", field=name
            ) from None
    return body

"""The Try it form, read into the same request body the infer API takes.

The panel posts one multipart form: per input ``i`` a hidden ``input-i`` (its name) and
``kind-i`` (``image`` or ``tensor``); an image input sends its photo as the file ``image-i``
and its preprocessing as ``pp-i-<field>``; a tensor input sends JSON in ``tensor-i`` or a
``.npy`` file as ``npy-i``. Besides them: ``version``, ``compare`` with ``compare_version``,
and ``top_k``. Inputs are indexed rather than named by their tensor names, which an uploader
chooses and may be anything.

What comes out is exactly what ``POST /api/v1/models/{name}/infer`` accepts (``image_b64``,
``npy_b64``, nested lists), so the page and the API share ``webapp.registry.tryit.inference.run``
and a saved example is the same whichever way it was saved.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, replace
from typing import Any, cast

from django.http import QueryDict
from django.utils.datastructures import MultiValueDict
from django.utils.translation import gettext

from model_store.inference import (
    PRESETS,
    InferenceInputError,
    Preprocess,
    TensorSpec,
    image_tensor_shape,
)
from model_store.inference.signature import CHANNEL_AXIS, LAYOUTS, Layout
from webapp.errors import HubError
from webapp.registry.tryit.inference import MAX_TOP_K
from webapp.text import localize

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
    message = gettext("%(what)s must be a whole number from %(low)s to %(high)s.") % {
        "what": what,
        "low": low,
        "high": high,
    }
    try:
        number = int(value.strip())
    except ValueError:
        raise InferenceInputError(message, code="invalid_field") from None
    if not low <= number <= high:
        raise InferenceInputError(message, code="invalid_field")
    return number


def run_options(post: QueryDict) -> RunOptions:
    """``version`` (the serving one when empty), the version to compare with, ``top_k``."""
    raw = post.get("version", "").strip()
    version = _whole(raw, gettext("The version"), 1, 2**31 - 1) if raw else None
    compare = None
    other = post.get("compare_version", "").strip()
    if post.get("compare") and other:
        compare = _whole(other, gettext("The version to compare with"), 1, 2**31 - 1)
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
            gettext("%(what)s needs three numbers, for R, G and B.") % {"what": what},
            code="bad_preprocess",
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
        "mean": _triple(get("mean"), gettext("Mean")),
        "std": _triple(get("std"), gettext("Std")),
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
                    gettext("Choose a photo for %(input)s (drop, pick, paste or click a sample).")
                    % {"input": name},
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
                gettext("The values of %(input)s are not valid JSON: %(problem)s.")
                % {"input": name, "problem": exc},
                code="bad_json",
                field=name,
            ) from None
    return body


# ---------------------------------------------------------------- marking an input as an image
# The operator's small form on each input that could take a photo: ``input`` (its name),
# ``image`` ("1" to treat it as an image, "0" for a tensor), and when marking, ``preset`` (a
# key of PRESETS, or "saved" to keep the model's own preprocessing) and, for an input whose
# channel axis has no fixed size, ``layout`` (NCHW or NHWC).

#: The ``preset`` value that keeps the model's saved (custom) preprocessing.
KEEP_SAVED = "saved"


@dataclass(frozen=True)
class ImageMarking:
    """What the form asks: treat ``input`` as an image (with ``preprocess``) or as a tensor."""

    input: str
    image: bool
    preprocess: Preprocess | None = None


def possible_layouts(spec: TensorSpec) -> list[Layout]:
    """Layouts in which ``spec`` could hold a photo: a rank-4 float tensor whose channel axis
    has 1 or 3 entries, or any number (then the layout must be chosen); empty when none."""
    if not spec.rank_known or spec.rank != 4 or spec.numpy_dtype.kind != "f":
        return []
    return [layout for layout in LAYOUTS if spec.dims[CHANNEL_AXIS[layout]] in (1, 3, None)]


def image_marking(post: QueryDict, specs: list[TensorSpec], saved: Preprocess) -> ImageMarking:
    """Reads and checks the marking form against the serving version's inputs.

    Raises:
        HubError: 400 naming what is wrong (unknown input, a shape that cannot take a photo,
            an unknown preset or layout).
        InferenceInputError: The chosen preprocessing cannot fill this input (e.g. its height
            and width are free and the preset does not crop to a size).
    """
    name = post.get("input", "")
    spec = next((s for s in specs if s.name == name), None)
    if spec is None:
        known = ", ".join(s.name for s in specs) or "none"
        raise HubError(
            gettext("The serving version has no input %(input)s (its inputs: %(known)s).")
            % {"input": repr(name), "known": known},
            "invalid_field",
        )
    choice = post.get("image")
    if choice not in ("0", "1"):
        raise HubError(
            gettext("Say whether the input takes a photo (image=1) or a tensor (image=0)."),
            "invalid_field",
        )
    if choice == "0":
        return ImageMarking(name, image=False)
    layouts = possible_layouts(spec)
    if not layouts:
        raise HubError(
            gettext(
                "%(input)s (%(type)s, %(shape)s) cannot take a photo: image "
                "inputs are 4-D float tensors with 1 or 3 channels, [batch, 3, H, W] or "
                "[batch, H, W, 3]."
            )
            % {"input": name, "type": spec.triton_type, "shape": localize(spec.describe_shape())},
            "not_an_image_input",
        )
    preset = post.get("preset", "")
    if preset == KEEP_SAVED:
        chosen = saved
    elif preset in PRESETS:
        chosen = PRESETS[preset]
    else:
        raise HubError(
            gettext("Choose a preprocessing preset: one of %(presets)s.")
            % {"presets": ", ".join(PRESETS)},
            "invalid_field",
        )
    layout = post.get("layout")
    if layout is not None:
        if layout not in layouts:
            raise HubError(
                gettext("%(input)s can hold a photo in layout %(layouts)s, not %(layout)s.")
                % {"input": name, "layouts": " or ".join(layouts), "layout": repr(layout)},
                "invalid_field",
            )
        chosen = replace(chosen, layout=cast(Layout, layout))
    image_tensor_shape(spec, chosen)  # the same check a photo meets before it is decoded
    return ImageMarking(name, image=True, preprocess=chosen)

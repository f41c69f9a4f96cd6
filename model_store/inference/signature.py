"""A model version's stored signature as typed tensor specs, and which inputs look like images.

The signature is stored as JSON with full ONNX dims: an int for a fixed size, a symbol
(``"batch"``) or null for an unknown one, and sometimes ``-1`` or ``0`` for unknown too (as
``model_store.verify`` treats them). Code that checks requests only cares whether an axis is
fixed, so :class:`TensorSpec` keeps ``None`` for every unknown axis and the symbol apart, for
messages.

Example:
    >>> sig = {"inputs": [{"name": "input", "dtype": "TYPE_FP32",
    ...                    "dims": ["batch", 3, 224, 224]}]}
    >>> (spec,) = specs_from_signature(sig)
    >>> spec.dims, spec.describe_shape(), image_layout(spec)
    ((None, 3, 224, 224), '[batch, 3, 224, 224]', 'NCHW')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from model_store.dtypes import numpy_to_triton, triton_to_numpy
from model_store.errors import InvalidConfig, UnsupportedDataType
from model_store.text import Said, say

Layout = Literal["NCHW", "NHWC"]
# Axis holding the colour channels in each layout of a rank-4 image batch.
CHANNEL_AXIS: dict[Layout, int] = {"NCHW": 1, "NHWC": 3}
HEIGHT_WIDTH_AXES: dict[Layout, tuple[int, int]] = {"NCHW": (2, 3), "NHWC": (1, 2)}
# In order of preference when a shape fits both.
LAYOUTS: tuple[Layout, ...] = ("NCHW", "NHWC")
UNKNOWN_DIM = "?"


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a model version.

    Attributes:
        name: Tensor name.
        triton_type: Triton type, e.g. ``"TYPE_FP32"`` (``"TYPE_STRING"`` for BYTES).
        numpy_dtype: The matching numpy dtype (``object`` for strings).
        dims: One entry per axis: the fixed size, or None when any size is accepted.
        dim_names: The ONNX symbol of each unknown axis (``"batch"``), else None.
        rank_known: False when the model does not say how many axes the tensor has;
            ``dims`` is then empty and any shape is accepted.
    """

    name: str
    triton_type: str
    numpy_dtype: np.dtype[Any]
    dims: tuple[int | None, ...]
    dim_names: tuple[str | None, ...]
    rank_known: bool = True

    @property
    def rank(self) -> int:
        """Number of axes (0 when the rank is unknown; check ``rank_known``)."""
        return len(self.dims)

    @property
    def is_string(self) -> bool:
        """Whether the tensor carries bytes strings (Triton BYTES)."""
        return self.triton_type == "TYPE_STRING"

    def describe_shape(self) -> Said:
        """The shape as people read it, e.g. ``"[batch, 3, 224, 224]"`` (``?`` = unnamed)."""
        if not self.rank_known:
            return say("any shape")
        parts = [
            str(d) if d is not None else (n or UNKNOWN_DIM)
            for d, n in zip(self.dims, self.dim_names, strict=True)
        ]
        return f"[{', '.join(parts)}]"

    def describe_free_dims(self) -> Said:
        """Explains the shape's unknown axes, e.g. ``" (batch: any size)"``; empty if none."""
        free = [
            n or UNKNOWN_DIM for d, n in zip(self.dims, self.dim_names, strict=True) if d is None
        ]
        if not free:
            return ""
        unique = list(dict.fromkeys(free))
        return say(" (%(axes)s: any size)", axes=", ".join(unique))


def specs_from_signature(sig: Mapping[str, Any], which: str = "inputs") -> list[TensorSpec]:
    """Reads the inputs (or outputs) of a stored signature.

    Args:
        sig: ``{"inputs": [...], "outputs": [...]}`` as the compile job stores it.
        which: ``"inputs"`` or ``"outputs"``.

    Returns:
        One spec per tensor, in the signature's order; empty when the signature has none yet.

    Raises:
        InvalidConfig: If the stored signature is malformed (a bug or a hand edit).
        UnsupportedDataType: If a tensor has no Triton type, so it cannot be sent at all.
    """
    if which not in ("inputs", "outputs"):
        raise ValueError(f"which must be 'inputs' or 'outputs', not {which!r}")
    tensors = sig.get(which) or []
    if not isinstance(tensors, list):
        raise InvalidConfig(
            say("The stored signature's %(which)s is not a list.", which=repr(which))
        )
    return [_spec(entry, which) for entry in tensors]


def _spec(entry: object, which: str) -> TensorSpec:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise InvalidConfig(
            say("An entry of the stored signature's %(which)s has no name.", which=repr(which))
        )
    name: str = entry["name"]
    triton_type = _triton_type(name, entry.get("dtype"), entry.get("numpy"))
    raw_dims = entry.get("dims")
    if raw_dims is None:
        return TensorSpec(name, triton_type, triton_to_numpy(triton_type), (), (), False)
    if not isinstance(raw_dims, list):
        raise InvalidConfig(
            say(
                "Tensor %(name)s in the stored signature has dims that are not a list.",
                name=repr(name),
            )
        )
    dims: list[int | None] = []
    names: list[str | None] = []
    for dim in raw_dims:
        # bool is an int subclass; a stored True is a corrupt signature, not size 1.
        if isinstance(dim, int) and not isinstance(dim, bool):
            # -1 and 0 both mean "unknown", as in model_store.verify.
            dims.append(dim if dim > 0 else None)
            names.append(None)
        elif isinstance(dim, str) or dim is None:
            dims.append(None)
            names.append(dim or None)
        else:
            raise InvalidConfig(
                say(
                    "Tensor %(name)s in the stored signature has a bad dim %(dim)s.",
                    name=repr(name),
                    dim=repr(dim),
                )
            )
    return TensorSpec(name, triton_type, triton_to_numpy(triton_type), tuple(dims), tuple(names))


def _triton_type(name: str, dtype: object, numpy_name: object) -> str:
    """The Triton type, from ``dtype`` or, failing that, the numpy name."""
    if isinstance(dtype, str):
        triton_to_numpy(dtype)  # raises UnsupportedDataType for unknown names
        return dtype
    if isinstance(numpy_name, str):
        try:
            return numpy_to_triton(numpy_name)
        except TypeError:
            pass  # not a numpy dtype name either; reported below
    raise UnsupportedDataType(
        say(
            "Tensor %(name)s has no Triton data type (it may be a sequence or map, or use a "
            "type Triton lacks), so it cannot be sent or received. Export the model with a "
            "plain tensor.",
            name=repr(name),
        )
    )


def image_layout(spec: TensorSpec) -> Layout | None:
    """Whether an input looks like a batch of images, and in which layout.

    An image input is a rank-4 float tensor whose channel axis (1 for NCHW, 3 for NHWC) is
    fixed at 1 (grey) or 3 (colour). When both axes qualify (e.g. ``[1, 3, 3, 3]``) NCHW wins,
    as it is what PyTorch and most ONNX exports use.

    Returns:
        ``"NCHW"``, ``"NHWC"`` or None when the input is not image-like.
    """
    if spec.rank != 4 or spec.numpy_dtype.kind != "f":
        return None
    for layout in LAYOUTS:
        if spec.dims[CHANNEL_AXIS[layout]] in (1, 3):
            return layout
    return None


def image_size(spec: TensorSpec, layout: Layout) -> tuple[int | None, int | None]:
    """The (height, width) a rank-4 image input fixes, None for an axis of any size."""
    if spec.rank != 4:
        raise ValueError(f"{spec.name!r} has rank {spec.rank}, not 4; it is not an image batch")
    h_axis, w_axis = HEIGHT_WIDTH_AXES[layout]
    return spec.dims[h_axis], spec.dims[w_axis]

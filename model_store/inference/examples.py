"""Example inputs that fit a signature: what the Try it panel and the API docs pre-fill.

Values are plain nested lists (what a person would type into JSON), not arrays in the
input's dtype, so random floats stay short (4 decimals) instead of float32 noise.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from model_store.inference.signature import TensorSpec


def example_value(
    spec: TensorSpec, fill: Literal["zeros", "random"] = "zeros", seed: int = 0
) -> Any:
    """A value that fits the input, as nested lists (a bare value for a rank-0 input).

    Axes of any size get 1. ``"random"`` gives normal floats rounded to 4 decimals,
    integers from 0 to 9 and fair-coin bools; strings are always ``"text"``.
    """
    shape = [d or 1 for d in spec.dims] if spec.rank_known else [1]
    if spec.is_string:
        return np.full(shape, "text", dtype=object).tolist()
    if fill == "zeros":
        return np.zeros(shape, dtype=spec.numpy_dtype).tolist()
    if fill != "random":
        raise ValueError(f"fill must be 'zeros' or 'random', not {fill!r}")
    rng = np.random.default_rng(seed)
    kind = spec.numpy_dtype.kind
    if kind == "f":
        return np.round(rng.standard_normal(shape), 4).tolist()
    if kind == "b":
        return (rng.random(shape) < 0.5).tolist()
    return rng.integers(0, 10, size=shape).astype(spec.numpy_dtype).tolist()


def example_payload(
    specs: list[TensorSpec], fill: Literal["zeros", "random"] = "zeros", seed: int = 0
) -> dict[str, Any]:
    """An ``"inputs"`` object that :func:`decode_inputs` accepts, one entry per input."""
    return {spec.name: example_value(spec, fill, seed + i) for i, spec in enumerate(specs)}

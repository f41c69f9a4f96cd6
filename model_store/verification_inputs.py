"""The inputs a verification runs on: user samples checked against the model's signature,
and seeded random samples for every input, with concrete sizes for its dynamic dims."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from model_store.errors import ModelStoreError
from model_store.onnx_info import OnnxInfo, TensorInfo

Sample = dict[str, np.ndarray]

#: Size used for a dynamic dim that is not the batch axis: spatial axes of
#: 4-D inputs (N, C, H, W) get 64 (deep CNNs downsample by 32), others 16
#: (sequence lengths, counts). Override with ``dim_sizes``.
SPATIAL_DIM_SIZE = 64
OTHER_DIM_SIZE = 16
#: Random integer inputs are drawn from [0, INT_HIGH): valid as indices into
#: any embedding table or class list, and as sizes/flags.
INT_HIGH = 10


class VerificationInputError(ModelStoreError):
    """Verification cannot start: bad samples, unknown shapes, or the source itself fails."""

    code = "verification_inputs"


def check_samples(info: OnnxInfo, samples: Sequence[Mapping[str, Any]]) -> None:
    """Checks user samples against the model's signature.

    Raises:
        VerificationInputError: Naming the sample, the input and what is wrong.
    """
    expected = {t.name: t for t in info.inputs}
    for number, sample in enumerate(samples, start=1):
        if not isinstance(sample, Mapping):
            raise VerificationInputError(
                f"Sample {number} is not a mapping of input names to arrays."
            )
        missing = sorted(set(expected) - set(sample))
        extra = sorted(set(sample) - set(expected))
        if missing or extra:
            raise VerificationInputError(
                f"Sample {number} does not match the model's inputs "
                f"({', '.join(expected)}): missing {missing or 'none'}, unknown {extra or 'none'}."
            )
        for name, tensor in expected.items():
            _check_array(number, tensor, sample[name])


def _check_array(number: int, tensor: TensorInfo, array: object) -> None:
    where = f"Sample {number}, input {tensor.name!r}"
    if not isinstance(array, np.ndarray):
        raise VerificationInputError(
            f"{where}: expected a numpy array, got {type(array).__name__}."
        )
    if tensor.numpy_dtype is None or array.dtype != np.dtype(tensor.numpy_dtype):
        raise VerificationInputError(
            f"{where}: dtype {array.dtype} does not match the model's {tensor.numpy_dtype} "
            f"({tensor.onnx_type}). Convert it with .astype('{tensor.numpy_dtype}')."
        )
    if tensor.dims is not None:
        shape_ok = array.ndim == len(tensor.dims) and all(
            not (isinstance(d, int) and d > 0) or d == size
            for d, size in zip(tensor.dims, array.shape, strict=False)
        )
        if not shape_ok:
            shown = ["?" if not (isinstance(d, int) and d > 0) else d for d in tensor.dims]
            raise VerificationInputError(
                f"{where}: shape {list(array.shape)} does not fit the model's {shown} "
                "('?' = any size)."
            )
    if array.dtype.kind in "fc" and not np.all(np.isfinite(array)):
        raise VerificationInputError(f"{where}: contains NaN or infinity; use finite values.")


def random_inputs(
    info: OnnxInfo,
    count: int,
    seed: int,
    batch: int,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dim_sizes: Mapping[str, int] | None = None,
) -> list[Sample]:
    """``count`` reproducible random samples that fit the signature.

    Dynamic dims: axis 0 gets ``batch``; a named dim shared by several inputs
    gets one size; others get :data:`SPATIAL_DIM_SIZE` / :data:`OTHER_DIM_SIZE`
    unless ``dim_sizes`` names them. Floats are standard normal clipped to
    [-3, 3]; integers are in [0, :data:`INT_HIGH`); bools are fair coins.

    Raises:
        VerificationInputError: For string or non-tensor inputs, or unknown ranks.
    """
    if count <= 0:
        return []
    shapes = {t.name: _concrete_shape(t, batch, input_shapes, dim_sizes) for t in info.inputs}
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(count):
        sample: Sample = {}
        for tensor in info.inputs:
            sample[tensor.name] = _random_array(rng, tensor, shapes[tensor.name])
        samples.append(sample)
    return samples


def _concrete_shape(
    tensor: TensorInfo,
    batch: int,
    input_shapes: Mapping[str, Sequence[int]] | None,
    dim_sizes: Mapping[str, int] | None,
) -> list[int]:
    if tensor.dims is None:
        raise VerificationInputError(
            f"Input {tensor.name!r} has no shape in the model, so random data cannot be "
            "made for it; give samples."
        )
    override = list((input_shapes or {}).get(tensor.name, []))
    if override and len(override) != len(tensor.dims):
        raise VerificationInputError(
            f"The shape given for {tensor.name!r} has {len(override)} dims; the input has "
            f"{len(tensor.dims)}."
        )
    sizes = dict(dim_sizes or {})
    shape = []
    for axis, dim in enumerate(tensor.dims):
        if override and override[axis] > 0:
            shape.append(int(override[axis]))
        elif isinstance(dim, int) and dim > 0:
            shape.append(dim)
        elif isinstance(dim, str) and dim in sizes:
            shape.append(int(sizes[dim]))
        elif axis == 0:
            shape.append(batch)
        else:
            spatial = len(tensor.dims) == 4 and axis >= 2
            shape.append(SPATIAL_DIM_SIZE if spatial else OTHER_DIM_SIZE)
        if isinstance(dim, str):
            sizes.setdefault(dim, shape[-1])  # the same symbol gets the same size everywhere
    return shape


def _random_array(rng: np.random.Generator, tensor: TensorInfo, shape: list[int]) -> np.ndarray:
    if tensor.numpy_dtype is None or tensor.numpy_dtype == "object":
        raise VerificationInputError(
            f"Input {tensor.name!r} is {tensor.onnx_type}; random data cannot be made for it. "
            "Give samples."
        )
    dtype = np.dtype(tensor.numpy_dtype)
    if dtype.kind == "f":
        return np.clip(rng.standard_normal(shape), -3.0, 3.0).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, INT_HIGH, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    raise VerificationInputError(
        f"Input {tensor.name!r} has dtype {dtype}; random data cannot be made for it."
    )


#: Numeric dtypes a sample may travel as (no objects, no strings: they carry nothing to run).
_SAMPLE_DTYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64"}
)  # fmt: skip


def sample_to_json(sample: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """A sample as plain JSON (a task argument): ``{name: {"dtype", "shape", "data"}}``."""
    return {
        name: {"dtype": str(a.dtype), "shape": list(a.shape), "data": a.ravel().tolist()}
        for name, a in sample.items()
    }


def sample_from_json(data: object) -> Sample:
    """The inverse of :func:`sample_to_json`, checking what came (from another host).

    Raises:
        VerificationInputError: Not the shape :func:`sample_to_json` writes.
    """
    if not isinstance(data, dict):
        raise VerificationInputError("A sample must be an object of named tensors.")
    sample: Sample = {}
    for name, tensor in data.items():
        if not (
            isinstance(tensor, dict)
            and tensor.get("dtype") in _SAMPLE_DTYPES
            and isinstance(tensor.get("shape"), list)
            and all(isinstance(d, int) and d >= 0 for d in tensor["shape"])
            and isinstance(tensor.get("data"), list)
        ):
            raise VerificationInputError(f"Sample tensor {str(name)[:64]!r} is malformed.")
        try:
            array = np.asarray(tensor["data"], dtype=tensor["dtype"])
            sample[str(name)] = array.reshape(tensor["shape"])
        except (TypeError, ValueError) as exc:
            raise VerificationInputError(f"Sample tensor {str(name)[:64]!r}: {exc}") from None
    return sample

"""Data types across ONNX, numpy and Triton (``TYPE_*`` names in config.pbtxt).

Shared by the config writer, the ONNX inspector, our Python-based backends and
the inference client, so it imports nothing heavier than numpy. ONNX element
types are kept as the integers of ``onnx.TensorProto.DataType`` (fixed by the
ONNX spec) so that this module does not need ``onnx`` installed.

Example:
    >>> onnx_to_triton(1), triton_to_numpy("TYPE_FP32")
    ('TYPE_FP32', dtype('float32'))
"""

from __future__ import annotations

from typing import Any

import numpy as np

from model_store.errors import UnsupportedDataType

# onnx.TensorProto.DataType value -> Triton type. Types Triton cannot carry
# (complex, float8, int4, ...) are absent on purpose.
ONNX_TO_TRITON: dict[int, str] = {
    1: "TYPE_FP32",  # FLOAT
    2: "TYPE_UINT8",  # UINT8
    3: "TYPE_INT8",  # INT8
    4: "TYPE_UINT16",  # UINT16
    5: "TYPE_INT16",  # INT16
    6: "TYPE_INT32",  # INT32
    7: "TYPE_INT64",  # INT64
    8: "TYPE_STRING",  # STRING
    9: "TYPE_BOOL",  # BOOL
    10: "TYPE_FP16",  # FLOAT16
    11: "TYPE_FP64",  # DOUBLE
    12: "TYPE_UINT32",  # UINT32
    13: "TYPE_UINT64",  # UINT64
}

# Triton type -> numpy dtype name. Triton carries strings as bytes objects.
TRITON_TO_NUMPY: dict[str, str] = {
    "TYPE_BOOL": "bool",
    "TYPE_UINT8": "uint8",
    "TYPE_UINT16": "uint16",
    "TYPE_UINT32": "uint32",
    "TYPE_UINT64": "uint64",
    "TYPE_INT8": "int8",
    "TYPE_INT16": "int16",
    "TYPE_INT32": "int32",
    "TYPE_INT64": "int64",
    "TYPE_FP16": "float16",
    "TYPE_FP32": "float32",
    "TYPE_FP64": "float64",
    "TYPE_STRING": "object",
}

# numpy dtype name -> Triton type. ``bytes_``/``str_`` arrays ("S"/"U" kinds)
# are handled in numpy_to_triton, since their names carry a length.
NUMPY_TO_TRITON: dict[str, str] = {name: ttype for ttype, name in TRITON_TO_NUMPY.items()}

TRITON_TYPES: frozenset[str] = frozenset(TRITON_TO_NUMPY)


def onnx_to_triton(elem_type: int) -> str:
    """Maps an ONNX element type to a Triton type.

    Args:
        elem_type: A value of ``onnx.TensorProto.DataType`` (1 is FLOAT).

    Returns:
        The Triton type name, e.g. ``"TYPE_FP32"``.

    Raises:
        UnsupportedDataType: If Triton has no such type (complex, float8, bfloat16, ...).
    """
    try:
        return ONNX_TO_TRITON[elem_type]
    except KeyError:
        raise UnsupportedDataType(
            f"ONNX element type {elem_type} has no Triton equivalent. "
            "Convert the tensor to a float, integer, bool or string type when exporting."
        ) from None


def triton_to_numpy(triton_type: str) -> np.dtype[Any]:
    """Maps a Triton type to a numpy dtype.

    Args:
        triton_type: A name such as ``"TYPE_INT64"``.

    Returns:
        The numpy dtype (``object`` for ``TYPE_STRING``).

    Raises:
        UnsupportedDataType: If the name is not a Triton type this project handles.
    """
    try:
        return np.dtype(TRITON_TO_NUMPY[triton_type])
    except KeyError:
        raise UnsupportedDataType(
            f"{triton_type!r} is not a supported Triton data type. "
            f"Use one of: {', '.join(sorted(TRITON_TYPES))}."
        ) from None


def numpy_to_triton(dtype: Any) -> str:
    """Maps a numpy dtype (or anything ``np.dtype`` accepts) to a Triton type.

    Args:
        dtype: A dtype, a dtype name or a scalar type such as ``np.float32``.

    Returns:
        The Triton type name; byte and unicode string arrays map to ``TYPE_STRING``.

    Raises:
        UnsupportedDataType: If Triton has no such type.
    """
    resolved = np.dtype(dtype)
    if resolved.kind in "SU":
        return "TYPE_STRING"
    try:
        return NUMPY_TO_TRITON[resolved.name]
    except KeyError:
        raise UnsupportedDataType(
            f"numpy dtype {resolved.name!r} has no Triton equivalent. "
            "Cast the array to a float, integer, bool or string type."
        ) from None


def is_triton_type(name: str) -> bool:
    """Tells whether ``name`` is a Triton type this project handles, e.g. ``"TYPE_FP32"``."""
    return name in TRITON_TYPES


def npy_header(stream: Any) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """The shape and dtype a ``.npy`` stream's header declares, read without the array (or
    any pickle): format 1.0 and 2.0, as ``np.save`` writes them.

    Raises:
        ValueError: Not a ``.npy`` header, or another format version.
    """
    version = np.lib.format.read_magic(stream)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
    else:
        raise ValueError(f"format version {version} is not supported; use np.save")
    return tuple(shape), dtype

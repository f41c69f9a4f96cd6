"""Tests for model_store.errors and model_store.dtypes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from model_store import errors
from model_store.dtypes import (
    NUMPY_TO_TRITON,
    ONNX_TO_TRITON,
    TRITON_TO_NUMPY,
    TRITON_TYPES,
    is_triton_type,
    numpy_to_triton,
    onnx_to_triton,
    triton_to_numpy,
)
from model_store.errors import ModelStoreError, UnsupportedDataType


def _error_classes() -> list[type[ModelStoreError]]:
    found = [getattr(errors, n) for n in dir(errors)]
    return [c for c in found if isinstance(c, type) and issubclass(c, ModelStoreError)]


def test_every_error_class_has_its_own_code() -> None:
    codes = [cls.code for cls in _error_classes()]
    assert len(codes) == len(set(codes))


def test_an_error_keeps_its_message_and_renders_in_the_api_shape() -> None:
    exc = errors.StoreConflict("Version 3 already exists. Pick a new version number.")
    assert str(exc) == exc.message
    assert exc.as_dict() == {"error": exc.message, "code": "conflict"}


def test_missing_external_data_is_caught_as_unsafe_external_data() -> None:
    assert issubclass(errors.MissingExternalData, errors.UnsafeExternalData)


def test_the_onnx_numbers_match_onnx_own_enum() -> None:
    names = {
        "FLOAT": "TYPE_FP32", "UINT8": "TYPE_UINT8", "INT8": "TYPE_INT8",
        "UINT16": "TYPE_UINT16", "INT16": "TYPE_INT16", "INT32": "TYPE_INT32",
        "INT64": "TYPE_INT64", "STRING": "TYPE_STRING", "BOOL": "TYPE_BOOL",
        "FLOAT16": "TYPE_FP16", "DOUBLE": "TYPE_FP64", "UINT32": "TYPE_UINT32",
        "UINT64": "TYPE_UINT64",
    }  # fmt: skip
    assert {getattr(onnx.TensorProto, k): v for k, v in names.items()} == ONNX_TO_TRITON


def test_every_triton_type_maps_to_numpy_and_back() -> None:
    for triton_type in TRITON_TYPES:
        assert numpy_to_triton(triton_to_numpy(triton_type)) == triton_type
    assert set(NUMPY_TO_TRITON.values()) == set(TRITON_TO_NUMPY)


def test_every_onnx_type_has_a_numpy_dtype() -> None:
    assert set(ONNX_TO_TRITON.values()) <= set(TRITON_TO_NUMPY)


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [(np.float32, "TYPE_FP32"), ("int64", "TYPE_INT64"), (np.bool_, "TYPE_BOOL"),
     (np.dtype("S5"), "TYPE_STRING"), (np.dtype("U3"), "TYPE_STRING"), (object, "TYPE_STRING")],
)  # fmt: skip
def test_it_maps_numpy_dtypes_to_triton(dtype: object, expected: str) -> None:
    assert numpy_to_triton(dtype) == expected


def test_it_maps_onnx_float_to_triton_fp32() -> None:
    assert onnx_to_triton(onnx.TensorProto.FLOAT) == "TYPE_FP32"


@pytest.mark.parametrize(
    "elem_type", [onnx.TensorProto.COMPLEX64, onnx.TensorProto.BFLOAT16, 0, 999]
)
def test_it_refuses_onnx_types_triton_cannot_carry(elem_type: int) -> None:
    with pytest.raises(UnsupportedDataType, match="no Triton equivalent"):
        onnx_to_triton(elem_type)


def test_it_refuses_unknown_triton_and_numpy_types() -> None:
    with pytest.raises(UnsupportedDataType, match="TYPE_FP32"):
        triton_to_numpy("FP32")
    with pytest.raises(UnsupportedDataType):
        numpy_to_triton(np.complex64)


def test_it_tells_whether_a_name_is_a_triton_type() -> None:
    assert is_triton_type("TYPE_FP16")
    assert not is_triton_type("TYPE_INVALID")
    assert not is_triton_type("float32")

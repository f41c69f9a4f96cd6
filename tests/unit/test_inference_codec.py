"""model_store.inference: signatures, request decoding (each form, each refusal), examples."""

from __future__ import annotations

import base64
import io
import json
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from PIL import Image

from model_store import spawn
from model_store.errors import InvalidConfig, ModelStoreError, UnsupportedDataType
from model_store.inference import (
    PRESETS,
    InferenceInputError,
    Limits,
    Preprocess,
    TensorSpec,
    decode_inputs,
    encode_for_json,
    example_payload,
    example_value,
    image_layout,
    image_size,
    specs_from_signature,
)

SIGNATURE = {
    "inputs": [
        {"name": "input", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 3, 224, 224]}
    ],
    "outputs": [
        {"name": "logits", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 1000]}
    ],
}


def spec(name: str = "x", dtype: str = "TYPE_FP32", dims: list[Any] | None = None) -> TensorSpec:
    entry = {"name": name, "dtype": dtype, "dims": ["batch", 4] if dims is None else dims}
    return specs_from_signature({"inputs": [entry]})[0]


def decode(
    specs: TensorSpec | list[TensorSpec], payload: object, limits: Limits | None = None, **kw: Any
) -> dict[str, np.ndarray]:
    specs = [specs] if isinstance(specs, TensorSpec) else specs
    return decode_inputs(specs, payload, limits or Limits(), **kw)


def refused(code: str, call: Callable[[], object]) -> InferenceInputError:
    with pytest.raises(InferenceInputError) as info:
        call()
    assert info.value.code == code, info.value.message
    return info.value


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def npy_b64(array: np.ndarray, **kw: Any) -> str:
    buffer = io.BytesIO()
    np.save(buffer, array, **kw)
    return b64(buffer.getvalue())


def png_bytes(
    size: tuple[int, int] = (32, 24), color: tuple[int, int, int] = (200, 30, 60)
) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "PNG")
    return buffer.getvalue()


# Errors ----------------------------------------------------------------------------------


def test_the_error_fits_the_store_error_family() -> None:
    err = InferenceInputError("Input 'x' is missing.", code="missing_input", field="x")
    assert isinstance(err, ModelStoreError)
    assert (err.code, err.message, err.field, err.status) == (
        "missing_input",
        "Input 'x' is missing.",
        "x",
        400,
    )
    assert err.as_dict() == {
        "error": "Input 'x' is missing.",
        "code": "missing_input",
        "field": "x",
    }
    assert str(err) == "Input 'x' is missing."


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("too_large", 413),
        ("too_many_elements", 413),
        ("image_too_large", 413),
        ("not_an_image", 415),
        ("wrong_shape", 422),
        ("wrong_dtype", 422),
        ("bad_base64", 400),
        ("bad_format", 400),
    ],
)
def test_each_code_has_one_status(code: str, status: int) -> None:
    assert InferenceInputError("m", code=code).status == status
    assert InferenceInputError("m", code=code, status=418).status == 418


# Signature -------------------------------------------------------------------------------


def test_the_stored_signature_becomes_specs() -> None:
    (inp,) = specs_from_signature(SIGNATURE)
    (out,) = specs_from_signature(SIGNATURE, "outputs")
    assert inp.name == "input" and inp.triton_type == "TYPE_FP32"
    assert inp.numpy_dtype == np.float32
    assert inp.dims == (None, 3, 224, 224) and inp.dim_names == ("batch", None, None, None)
    assert inp.rank == 4 and inp.describe_shape() == "[batch, 3, 224, 224]"
    assert out.dims == (None, 1000)
    assert specs_from_signature({}) == []


def test_unknown_dims_all_become_none() -> None:
    s = spec(dims=["batch", -1, None, 0, 7, "seq"])
    assert s.dims == (None, None, None, None, 7, None)
    assert s.dim_names == ("batch", None, None, None, None, "seq")
    assert s.describe_shape() == "[batch, ?, ?, ?, 7, seq]"
    assert s.describe_free_dims() == " (batch, ?, seq: any size)"


def test_string_tensors_and_types_from_the_numpy_name() -> None:
    assert spec(dtype="TYPE_STRING").numpy_dtype == np.dtype(object)
    (s,) = specs_from_signature({"inputs": [{"name": "ids", "numpy": "int64", "dims": [2]}]})
    assert s.triton_type == "TYPE_INT64"


def test_an_unknown_rank_accepts_any_shape() -> None:
    (s,) = specs_from_signature({"inputs": [{"name": "x", "dtype": "TYPE_FP32", "dims": None}]})
    assert not s.rank_known and s.describe_shape() == "any shape"
    assert decode(s, {"x": [[[1.0]]]})["x"].shape == (1, 1, 1)


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"name": "x", "dims": [1]}, UnsupportedDataType),
        ({"name": "x", "dtype": "TYPE_NOPE", "dims": [1]}, UnsupportedDataType),
        ({"name": "x", "dtype": "TYPE_FP32", "dims": [True]}, InvalidConfig),
        ({"name": "x", "dtype": "TYPE_FP32", "dims": "1x2"}, InvalidConfig),
        ({"dtype": "TYPE_FP32", "dims": [1]}, InvalidConfig),
    ],
)
def test_a_malformed_signature_is_a_store_error(
    entry: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        specs_from_signature({"inputs": [entry]})


@pytest.mark.parametrize(
    ("dims", "dtype", "layout"),
    [
        (["batch", 3, 224, 224], "TYPE_FP32", "NCHW"),
        (["batch", 224, 224, 3], "TYPE_FP32", "NHWC"),
        ([1, 1, 28, 28], "TYPE_FP16", "NCHW"),
        ([1, 28, 28, 1], "TYPE_FP64", "NHWC"),
        ([1, 3, 3, 3], "TYPE_FP32", "NCHW"),  # ambiguous: NCHW wins
        (["batch", 3, 224, 224], "TYPE_UINT8", None),
        (["batch", 4, 224, 224], "TYPE_FP32", None),
        (["batch", 3, 224], "TYPE_FP32", None),
        (["batch", None, None, None], "TYPE_FP32", None),
    ],
)
def test_image_layout(dims: list[Any], dtype: str, layout: str | None) -> None:
    assert image_layout(spec(dtype=dtype, dims=dims)) == layout


def test_image_size_reads_height_and_width() -> None:
    assert image_size(spec(dims=["b", 3, 240, 320]), "NCHW") == (240, 320)
    assert image_size(spec(dims=["b", "h", "w", 3]), "NHWC") == (None, None)


# Happy paths, one per form ------------------------------------------------------------


def test_a_nested_list_becomes_an_array_of_the_input_dtype() -> None:
    out = decode(spec(), {"x": [[1, 2.5, True, 4]]})["x"]
    assert out.dtype == np.float32 and out.shape == (1, 4)
    assert out.tolist() == [[1.0, 2.5, 1.0, 4.0]]


def test_a_missing_batch_axis_is_added_when_the_first_axis_is_free() -> None:
    assert decode(spec(), {"x": [1, 2, 3, 4]})["x"].shape == (1, 4)
    # With a fixed first axis there is no such convenience.
    refused("wrong_shape", lambda: decode(spec(dims=[2, 4]), {"x": [1, 2, 3, 4]}))


def test_fixed_and_free_dims_are_both_checked() -> None:
    s = spec(dims=["batch", 2, "seq"])
    assert decode(s, {"x": [[[1, 2, 3], [4, 5, 6]]] * 3})["x"].shape == (3, 2, 3)


def test_data_with_shape_is_reshaped() -> None:
    out = decode(spec(), {"x": {"data": [1, 2, 3, 4, 5, 6, 7, 8], "shape": [2, 4]}})["x"]
    assert out.shape == (2, 4) and out[1, 3] == 8
    nested = decode(spec(), {"x": {"data": [[1, 2], [3, 4]], "shape": [1, 4]}})["x"]
    assert nested.tolist() == [[1, 2, 3, 4]]
    assert decode(spec(), {"x": {"data": [[1, 2, 3, 4]]}})["x"].shape == (1, 4)


def test_raw_little_endian_bytes_in_base64() -> None:
    array = np.arange(8, dtype="<f4").reshape(2, 4)
    out = decode(spec(), {"x": {"b64": b64(array.tobytes()), "shape": [2, 4], "dtype": "float32"}})
    assert np.array_equal(out["x"], array) and out["x"].dtype == np.float32
    ids = np.array([[1, -2, 3]], dtype="<i8")
    out = decode(
        spec("ids", "TYPE_INT64", ["batch", 3]),
        {"ids": {"b64": b64(ids.tobytes()), "shape": [1, 3]}},
    )
    assert out["ids"].tolist() == [[1, -2, 3]]
    mask = decode(spec("m", "TYPE_BOOL", [1, 2]), {"m": {"b64": b64(b"\x00\x01"), "shape": [1, 2]}})
    assert mask["m"].tolist() == [[False, True]]


def test_base64_may_be_wrapped_unpadded_or_a_data_url() -> None:
    raw = np.ones((1, 4), dtype="<f4").tobytes()
    text = b64(raw)
    wrapped = "\n".join(text[i : i + 5] for i in range(0, len(text), 5))
    for value in (wrapped, text.rstrip("="), "data:application/octet-stream;base64," + text):
        assert decode(spec(), {"x": {"b64": value, "shape": [1, 4]}})["x"].sum() == 4


def test_npy_files_are_loaded_and_cast_when_lossless() -> None:
    out = decode(spec(), {"x": {"npy_b64": npy_b64(np.full((2, 4), 0.5))}})["x"]
    assert out.dtype == np.float32 and out.shape == (2, 4)
    fortran = np.asfortranarray(np.arange(8, dtype=np.int32).reshape(2, 4))
    ids = decode(spec("i", "TYPE_INT64"), {"i": {"npy_b64": npy_b64(fortran)}})["i"]
    assert ids.dtype == np.int64 and ids.tolist() == fortran.tolist()
    big_endian = np.arange(4, dtype=">f8")
    assert decode(spec(), {"x": {"npy_b64": npy_b64(big_endian)}})["x"].tolist() == [[0, 1, 2, 3]]


def test_an_image_becomes_the_model_tensor() -> None:
    (s,) = specs_from_signature(SIGNATURE)
    value = {
        "image_b64": "data:image/png;base64," + b64(png_bytes()),
        "preprocess": {"preset": "unit"},
    }
    out = decode(s, {"input": value})["input"]
    assert out.shape == (1, 3, 224, 224) and out.dtype == np.float32
    assert np.allclose(out[0, :, 100, 100], np.array([200, 30, 60]) / 255)


def test_uploaded_images_use_the_per_input_then_the_default_preprocess() -> None:
    (s,) = specs_from_signature(SIGNATURE)
    images = {"input": png_bytes()}
    default = decode(s, {}, images=images, default_preprocess=PRESETS["raw"])["input"]
    assert np.allclose(default[0, :, 0, 0], [200, 30, 60])
    own = decode(
        s,
        {},
        images=images,
        preprocess={"input": PRESETS["unit"]},
        default_preprocess=PRESETS["raw"],
    )["input"]
    assert np.allclose(own[0, :, 0, 0], np.array([200, 30, 60]) / 255)
    # Without a preprocess anywhere, the ImageNet preset applies.
    imagenet = decode(s, {}, images=images)["input"]
    assert np.allclose(imagenet[0, 0, 0, 0], (200 - 123.675) / 58.395, atol=1e-5)


def test_strings_become_bytes_objects() -> None:
    out = decode(spec("t", "TYPE_STRING", ["batch"]), {"t": ["héllo", "x"]})["t"]
    assert out.dtype == object and out.tolist() == ["héllo".encode(), b"x"]
    npy = decode(
        spec("t", "TYPE_STRING", ["batch"]), {"t": {"npy_b64": npy_b64(np.array(["a", "b"]))}}
    )
    assert npy["t"].tolist() == [b"a", b"b"]


def test_nan_and_infinity_are_legal_inputs() -> None:
    payload = json.loads('{"x": [[NaN, Infinity, -Infinity, 1]]}')
    out = decode(spec(), payload)["x"]
    assert math.isnan(out[0, 0]) and out[0, 1] == np.inf and out[0, 2] == -np.inf


def test_whole_floats_and_bools_go_into_int_and_bool_inputs() -> None:
    assert decode(spec("i", "TYPE_INT64"), {"i": [[1.0, 2, True, -3.0]]})["i"].tolist() == [
        [1, 2, 1, -3]
    ]
    assert decode(spec("b", "TYPE_BOOL"), {"b": [[0, 1, True, False]]})["b"].dtype == np.bool_
    assert decode(spec("u", "TYPE_UINT8"), {"u": [[0, 255, 7, 1]]})["u"].dtype == np.uint8


def test_several_inputs_come_back_in_signature_order() -> None:
    specs = [spec("a"), spec("b", "TYPE_INT32", ["batch", 2])]
    out = decode(specs, {"b": [[1, 2]], "a": [[1, 2, 3, 4]]})
    assert list(out) == ["a", "b"] and out["b"].dtype == np.int32


# Refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize("payload", [None, [1, 2], "x", 3])
def test_inputs_must_be_an_object(payload: object) -> None:
    err = refused("bad_format", lambda: decode(spec(), payload))
    assert err.status == 400 and "'inputs' must be an object" in err.message


def test_missing_inputs_are_listed_with_what_the_model_takes() -> None:
    specs = [spec("a"), spec("b")]
    err = refused("missing_input", lambda: decode(specs, {"a": [[1, 2, 3, 4]]}))
    assert err.field == "b" and "'b' is missing" in err.message
    assert "'a' (FP32 [batch, 4]), 'b' (FP32 [batch, 4])" in err.message


def test_extra_inputs_are_listed() -> None:
    err = refused("extra_input", lambda: decode(spec(), {"x": [[1, 2, 3, 4]], "y": 1, "z": 2}))
    assert "'y', 'z' are not an input" in err.message and err.field == "y"


def test_a_misspelt_input_is_explained_both_ways() -> None:
    err = refused("extra_input", lambda: decode(spec("image"), {"imgae": [[1, 2, 3, 4]]}))
    assert "'imgae' is not an input; 'image' is missing" in err.message


def test_an_input_sent_twice_is_refused() -> None:
    (s,) = specs_from_signature(SIGNATURE)
    err = refused("bad_format", lambda: decode(s, {"input": [1]}, images={"input": png_bytes()}))
    assert "sent twice" in err.message


@pytest.mark.parametrize(
    "value", [None, {"values": [1, 2]}, {"data": [1, 2, 3, 4], "shape": [1, 4], "extra": 1}]
)
def test_values_of_unknown_form_list_the_accepted_forms(value: object) -> None:
    err = refused("bad_format", lambda: decode(spec(), {"x": value}))
    assert err.field == "x"
    assert "nested list" in err.message or "takes only" in err.message


@pytest.mark.parametrize("value", [[[1, 2], [3]], [[1, 2], 3], [[[1]], [2]]])
def test_ragged_lists_are_a_shape_error(value: object) -> None:
    err = refused("wrong_shape", lambda: decode(spec(), {"x": value}))
    assert "ragged" in err.message and err.status == 422


def test_a_wrong_shape_names_both_shapes() -> None:
    err = refused("wrong_shape", lambda: decode(spec(), {"x": [[1, 2, 3, 4, 5]]}))
    assert (
        err.message == "Input 'x' has shape [1, 5]; the model takes [batch, 4] (batch: any size)."
    )
    assert err.field == "x" and err.status == 422


def test_a_wrong_rank_says_how_many_axes() -> None:
    err = refused("wrong_shape", lambda: decode(spec(), {"x": [[[[1, 2, 3, 4]]]]}))
    assert "(4 axes)" in err.message and "(2 axes)" in err.message


@pytest.mark.parametrize("value", [[], [[]], {"data": [], "shape": [0, 4]}])
def test_empty_axes_are_refused(value: object) -> None:
    err = refused("wrong_shape", lambda: decode(spec(), {"x": value}))
    assert "empty axis" in err.message


@pytest.mark.parametrize(
    ("dtype", "value", "shown"),
    [
        ("TYPE_INT64", 0.5, "0.5"),
        ("TYPE_INT64", float("nan"), "nan"),
        ("TYPE_INT8", 300, "300"),
        ("TYPE_UINT8", -1, "-1"),
        ("TYPE_INT64", 2**63, str(2**63)),
        ("TYPE_INT64", float(2**63), "9.223372036854776e+18"),
        ("TYPE_INT64", 2**70, str(2**70)),
        ("TYPE_FP16", 70000.0, "70000.0"),
        ("TYPE_FP32", "1.5", "text"),
        ("TYPE_FP32", None, "null"),
        ("TYPE_BOOL", 2, "2"),
        ("TYPE_STRING", 3, "got 3"),
    ],
)
def test_values_the_input_type_cannot_hold_are_refused(dtype: str, value: Any, shown: str) -> None:
    err = refused(
        "wrong_dtype", lambda: decode(spec("v", dtype, ["batch", 2]), {"v": [[value, value]]})
    )
    assert shown in err.message and err.field == "v" and err.status == 422


def test_the_int_message_reads_plainly() -> None:
    err = refused(
        "wrong_dtype", lambda: decode(spec("ids", "TYPE_INT64"), {"ids": [[1, 0.5, 2, 3]]})
    )
    assert str(err.message).startswith("Input 'ids' is INT64 (int64); got 0.5.")


def test_numbers_mixed_into_strings_are_refused() -> None:
    refused("wrong_dtype", lambda: decode(spec("t", "TYPE_STRING", ["batch"]), {"t": ["a", 1]}))
    refused("wrong_dtype", lambda: decode(spec("t", "TYPE_STRING", ["batch"]), {"t": ["a", None]}))


def test_a_dtype_hint_must_name_the_input_dtype() -> None:
    value = {"data": [1, 2, 3, 4], "shape": [1, 4], "dtype": "float64"}
    err = refused("wrong_dtype", lambda: decode(spec(), {"x": value}))
    assert "'float64'" in err.message
    for hint in ("float32", "FP32", "TYPE_FP32"):
        decode(spec(), {"x": {**value, "dtype": hint}})


def test_data_must_match_its_shape() -> None:
    err = refused(
        "wrong_shape", lambda: decode(spec(), {"x": {"data": [1, 2, 3], "shape": [1, 4]}})
    )
    assert "holds 3 values" in err.message and "needs 4" in err.message


@pytest.mark.parametrize("shape", [None, [1, -4], [1, "4"], [True, 4], "1,4"])
def test_raw_bytes_need_a_valid_shape(shape: object) -> None:
    value: dict[str, Any] = {"b64": b64(bytes(16))}
    if shape is not None:
        value["shape"] = shape
    refused("bad_format", lambda: decode(spec(), {"x": value}))


@pytest.mark.parametrize("text", ["not base64!", "AAA*", "data:text/plain,AAAA", 42])
def test_base64_garbage_is_refused(text: object) -> None:
    err = refused(
        "bad_base64" if isinstance(text, str) else "bad_format",
        lambda: decode(spec(), {"x": {"b64": text, "shape": [1, 1]}}),
    )
    assert err.status == 400 and err.field == "x"


def test_raw_bytes_must_fill_the_shape_exactly() -> None:
    err = refused(
        "wrong_shape", lambda: decode(spec(), {"x": {"b64": b64(bytes(12)), "shape": [1, 4]}})
    )
    assert "12 bytes" in err.message and "needs 16" in err.message


def test_raw_bytes_are_not_for_strings_and_bools_are_0_or_1() -> None:
    refused(
        "bad_format",
        lambda: decode(spec("t", "TYPE_STRING", [1]), {"t": {"b64": b64(b"ab"), "shape": [1]}}),
    )
    refused(
        "wrong_dtype",
        lambda: decode(spec("m", "TYPE_BOOL", [2]), {"m": {"b64": b64(b"\x00\x02"), "shape": [2]}}),
    )


def test_npy_object_arrays_are_refused_without_unpickling() -> None:
    pickled = npy_b64(np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    err = refused("bad_npy", lambda: decode(spec(), {"x": {"npy_b64": pickled}}))
    assert "unpickling" in err.message


def test_npy_that_is_not_npy_or_is_truncated_is_refused() -> None:
    refused("bad_npy", lambda: decode(spec(), {"x": {"npy_b64": b64(b"PK\x03\x04 zip")}}))
    whole = base64.b64decode(npy_b64(np.ones((2, 4), dtype=np.float32)))
    err = refused("bad_npy", lambda: decode(spec(), {"x": {"npy_b64": b64(whole[:-4])}}))
    assert "truncated" in err.message


def test_npy_text_into_a_numeric_input_is_a_dtype_error() -> None:
    refused("wrong_dtype", lambda: decode(spec(), {"x": {"npy_b64": npy_b64(np.array(["a"] * 4))}}))


def test_an_npy_header_claiming_a_huge_array_is_refused_before_reading() -> None:
    buffer = io.BytesIO()
    header = {"descr": "<f4", "fortran_order": False, "shape": (10**9,)}
    np.lib.format.write_array_header_1_0(buffer, header)
    err = refused(
        "too_many_elements", lambda: decode(spec(), {"x": {"npy_b64": b64(buffer.getvalue())}})
    )
    assert err.status == 413 and "1,000,000,000" in err.message


def test_the_element_cap_counts_the_whole_request() -> None:
    limits = Limits(max_elements=10)
    err = refused("too_many_elements", lambda: decode(spec(), {"x": [[0] * 4] * 3}, limits))
    assert err.status == 413 and "12" in err.message and "10" in err.message
    specs = [spec("a"), spec("b")]
    err = refused(
        "too_many_elements", lambda: decode(specs, {"a": [[0] * 4] * 2, "b": [[0] * 4]}, limits)
    )
    assert err.field == "b"


def test_big_nested_lists_stop_at_the_cap_while_being_walked() -> None:
    err = refused(
        "too_many_elements",
        lambda: decode(spec(), {"x": [[0] * 4] * 1000}, Limits(max_elements=100)),
    )
    assert "at least" in err.message


def test_a_raw_shape_over_the_cap_is_refused_before_decoding() -> None:
    value = {"b64": "AAAA", "shape": [10**6, 4]}
    refused("too_many_elements", lambda: decode(spec(), {"x": value}, Limits(max_elements=1000)))


def test_the_byte_cap_applies_to_decoded_data() -> None:
    err = refused(
        "too_large", lambda: decode(spec(), {"x": [[1, 2, 3, 4]] * 2}, Limits(max_bytes=16))
    )
    assert err.status == 413 and "32 bytes" in err.message
    strings = spec("t", "TYPE_STRING", ["batch"])
    refused("too_large", lambda: decode(strings, {"t": ["x" * 100]}, Limits(max_string_bytes=10)))


def test_images_for_inputs_that_are_not_images_are_refused_with_advice() -> None:
    err = refused(
        "not_an_image_input", lambda: decode(spec(), {"x": {"image_b64": b64(png_bytes())}})
    )
    assert "Send the tensor itself" in err.message and err.status == 400
    refused("not_an_image_input", lambda: decode(spec(), {}, images={"x": png_bytes()}))


def test_non_image_bytes_as_an_image_are_415() -> None:
    (s,) = specs_from_signature(SIGNATURE)
    err = refused("not_an_image", lambda: decode(s, {"input": {"image_b64": b64(b"%PDF-1.7 ...")}}))
    assert err.status == 415 and err.field == "input"
    assert str(err.message).startswith("Input 'input':")


def test_image_payload_problems_name_the_input() -> None:
    (s,) = specs_from_signature(SIGNATURE)
    err = refused(
        "bad_preprocess",
        lambda: decode(s, {"input": {"image_b64": b64(png_bytes()), "preprocess": {"crop": 0}}}),
    )
    assert err.field == "input"
    refused("bad_base64", lambda: decode(s, {"input": {"image_b64": "@@@@"}}))
    refused(
        "too_large",
        lambda: decode(s, {}, Limits(max_image_bytes=10), images={"input": png_bytes()}),
    )


def test_the_image_target_is_checked_against_the_cap_before_decoding() -> None:
    (s,) = specs_from_signature(SIGNATURE)
    err = refused(
        "too_many_elements",
        lambda: decode(
            s, {"input": {"image_b64": b64(b"not even an image")}}, Limits(max_elements=1000)
        ),
    )
    assert "150,528" in err.message


def test_preprocess_objects_pass_straight_through() -> None:
    (s,) = specs_from_signature(SIGNATURE)
    pre = Preprocess(resize_short=0, crop=None)
    assert decode(s, {}, images={"input": png_bytes()}, default_preprocess=pre)["input"].shape == (
        1,
        3,
        224,
        224,
    )


# Examples and JSON ------------------------------------------------------------------------

ALL_TYPES = [
    "TYPE_FP32",
    "TYPE_FP16",
    "TYPE_FP64",
    "TYPE_INT8",
    "TYPE_INT32",
    "TYPE_INT64",
    "TYPE_UINT8",
    "TYPE_UINT64",
    "TYPE_BOOL",
    "TYPE_STRING",
]


@pytest.mark.parametrize("fill", ["zeros", "random"])
def test_examples_decode_for_every_type(fill: Any) -> None:
    specs = [spec(f"in_{t.lower()}", t, ["batch", 2, "n"]) for t in ALL_TYPES]
    payload = example_payload(specs, fill)
    out = decode(specs, json.loads(json.dumps(payload)))
    for s in specs:
        assert out[s.name].shape == (1, 2, 1) and out[s.name].dtype == s.numpy_dtype


def test_examples_are_reproducible_and_plain() -> None:
    s = spec(dims=["batch", 3])
    assert example_value(s) == [[0.0, 0.0, 0.0]]
    first = example_value(s, "random", seed=7)
    assert first == example_value(s, "random", seed=7) != example_value(s, "random", seed=8)
    assert all(round(v, 4) == v for v in first[0])
    ints = example_value(spec("i", "TYPE_INT64", [2, 50]), "random")
    assert all(0 <= v < 10 and isinstance(v, int) for row in ints for v in row)
    assert example_value(spec("t", "TYPE_STRING", [2])) == ["text", "text"]
    assert example_value(spec("b", "TYPE_BOOL", [1]), "random")[0] in (True, False)
    with pytest.raises(ValueError):
        example_value(s, "ones")  # type: ignore[arg-type]


def test_encode_for_json_is_json_safe_and_exact() -> None:
    floats = np.array([0.1, 1 / 3, 1e-30], dtype=np.float32)
    back = np.asarray(encode_for_json(floats), dtype=np.float32)
    assert np.array_equal(back, floats)
    odd = encode_for_json(np.array([[np.nan, np.inf], [-np.inf, 2.0]]))
    assert odd == [[None, None], [None, 2.0]]
    json.dumps(odd, allow_nan=False)
    assert encode_for_json(np.float32(1.5)) == [1.5]
    assert encode_for_json(np.array([b"ok", b"\xff"], dtype=object)) == ["ok", "\ufffd"]
    assert encode_for_json(np.array([[1, 2]], dtype=np.int64)) == [[1, 2]]
    assert encode_for_json(np.array([True])) == [True]


def test_the_package_imports_without_django() -> None:
    check = (
        "import model_store.inference, sys; "
        "assert not any(m.split('.')[0] == 'django' for m in sys.modules), 'django imported'"
    )
    result = spawn.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr

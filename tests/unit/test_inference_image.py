"""model_store.inference.image: preprocessing settings, safe decoding, image tensors.

The demo model runs in-process with onnxruntime, so the tensor is checked twice: equal to
tests/unit/test_demo_model.py's reference preprocessing, and classified correctly.
"""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image, ImageFile, ImageOps

from model_store.inference import (
    PRESET_LABELS,
    PRESETS,
    InferenceInputError,
    Preprocess,
    TensorSpec,
    decode_image,
    describe_outputs,
    image_tensor_shape,
    image_to_tensor,
    parse_labels,
    specs_from_signature,
)
from tests.fixtures.demo import preprocess as reference_preprocess

DEMO = Path(__file__).resolve().parents[2] / "demo"
MODEL_DIR = DEMO / "efficientnet-lite0"
MAX_PIXELS = 40_000_000


def spec(dims: list[Any], dtype: str = "TYPE_FP32", name: str = "input") -> TensorSpec:
    return specs_from_signature({"inputs": [{"name": name, "dtype": dtype, "dims": dims}]})[0]


NCHW = spec(["batch", 3, 224, 224])


def refused(code: str, call: Callable[[], object]) -> InferenceInputError:
    with pytest.raises(InferenceInputError) as info:
        call()
    assert info.value.code == code, info.value.message
    return info.value


def encoded(image: Image.Image, fmt: str = "PNG", **kw: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **kw)
    return buffer.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A 1x1 PNG whose IHDR says width x height: cheap, and undecodable at that size."""
    data = encoded(Image.new("RGB", (1, 1)))
    ihdr = bytearray(data[16:29])  # after signature (8), length (4) and b"IHDR" (4)
    ihdr[0:4], ihdr[4:8] = width.to_bytes(4, "big"), height.to_bytes(4, "big")
    crc = zlib.crc32(b"IHDR" + bytes(ihdr)).to_bytes(4, "big")
    return data[:16] + bytes(ihdr) + crc + data[33:]


# Preprocess settings ------------------------------------------------------------------


def test_the_efficientnet_preset_matches_the_demo_file() -> None:
    demo = json.loads((MODEL_DIR / "preprocess.json").read_text(encoding="utf-8"))
    preset = PRESETS["efficientnet"]
    assert preset.resize_short == demo["resize_short"] and preset.crop == demo["crop"]
    assert list(preset.mean) == demo["mean"] and list(preset.std) == demo["std"]
    assert preset.color == demo["channels"]
    assert image_tensor_shape(NCHW, preset) == (1, 3, 224, 224)  # layout NCHW, from the model


def test_presets_have_labels_and_round_trip() -> None:
    assert set(PRESET_LABELS) == set(PRESETS) == {"efficientnet", "imagenet", "unit", "raw"}
    assert PRESETS["imagenet"].mean == (123.675, 116.28, 103.53)
    assert PRESETS["imagenet"].std == (58.395, 57.12, 57.375)
    assert PRESETS["unit"].std == (255.0, 255.0, 255.0)
    assert PRESETS["raw"].mean == (0.0, 0.0, 0.0) and PRESETS["raw"].std == (1.0, 1.0, 1.0)
    for preset in PRESETS.values():
        assert Preprocess.from_dict(json.loads(json.dumps(preset.to_dict()))) == preset


def test_a_preset_with_overrides() -> None:
    pre = Preprocess.from_dict({"preset": "imagenet", "crop": 200, "color": "bgr", "std": 2})
    assert pre.crop == 200 and pre.color == "BGR" and pre.std == (2.0, 2.0, 2.0)
    assert pre.mean == PRESETS["imagenet"].mean and pre.resize_short == 256
    assert Preprocess.from_dict({"layout": "nhwc", "crop": None}).layout == "NHWC"


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"resize_short": -1}, "resize_short"),
        ({"resize_short": 4097}, "resize_short"),
        ({"resize_short": "256"}, "resize_short"),
        ({"resize_short": True}, "resize_short"),
        ({"crop": 0}, "crop"),
        ({"crop": 2.5}, "crop"),
        ({"resize_short": 200, "crop": 224}, "larger than resize_short"),
        ({"std": [1, 0, 1]}, "zero"),
        ({"mean": [1, 2]}, "three"),
        ({"mean": [1, 2, float("nan")]}, "finite"),
        ({"mean": "0"}, "three"),
        ({"color": "RGBA"}, "color"),
        ({"layout": "CHW"}, "layout"),
        ({"preset": "vgg"}, "Unknown preprocess preset"),
        ({"size": 224}, "unknown keys ['size']"),
        ([256, 224], "must be an object"),
    ],
)
def test_bad_preprocess_settings_say_what_is_wrong(data: object, words: str) -> None:
    err = refused("bad_preprocess", lambda: Preprocess.from_dict(data))
    assert words in err.message and err.status == 400


def test_direct_construction_is_checked_too() -> None:
    refused("bad_preprocess", lambda: Preprocess(std=(1.0, 1.0, 0.0)))
    assert Preprocess(resize_short=0, crop=None).resize_short == 0


# Decoding ------------------------------------------------------------------------------


def test_common_formats_decode_to_rgb() -> None:
    red = Image.new("RGB", (8, 6), (255, 0, 0))
    for fmt in ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF"):
        image = decode_image(encoded(red, fmt), MAX_PIXELS)
        assert image.mode == "RGB" and image.size == (8, 6), fmt
        assert np.asarray(image)[3, 4, 0] > 200, fmt


def test_exif_orientation_is_applied() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees to display
    data = encoded(Image.new("RGB", (20, 10)), "JPEG", exif=exif.tobytes())
    assert decode_image(data, MAX_PIXELS).size == (10, 20)


def test_transparency_is_composited_on_white() -> None:
    clear = Image.new("RGBA", (4, 4), (255, 0, 0, 0))
    assert decode_image(encoded(clear), MAX_PIXELS).getpixel((0, 0)) == (255, 255, 255)
    half = Image.new("LA", (4, 4), (0, 128))
    assert decode_image(encoded(half), MAX_PIXELS).getpixel((0, 0)) == (127, 127, 127)
    keyed = encoded(Image.new("RGB", (4, 4), (1, 2, 3)), transparency=(1, 2, 3))
    assert decode_image(keyed, MAX_PIXELS).getpixel((0, 0)) == (255, 255, 255)
    palette = Image.new("P", (4, 4), 0)
    palette.putpalette([0, 0, 0] * 256)
    gif = decode_image(encoded(palette, "GIF", transparency=0), MAX_PIXELS)
    assert gif.getpixel((0, 0)) == (255, 255, 255)


def test_other_modes_become_rgb() -> None:
    grey = decode_image(encoded(Image.new("L", (3, 3), 77)), MAX_PIXELS)
    assert grey.getpixel((1, 1)) == (77, 77, 77)
    cmyk = decode_image(encoded(Image.new("CMYK", (3, 3), (0, 0, 0, 0)), "JPEG"), MAX_PIXELS)
    assert np.asarray(cmyk).min() > 240
    deep = Image.fromarray(np.array([[65535, 25700]], dtype=np.uint16))
    assert deep.mode == "I;16"
    image = decode_image(encoded(deep), MAX_PIXELS)
    assert image.getpixel((0, 0)) == (255, 255, 255) and image.getpixel((1, 0)) == (100,) * 3


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"%PDF-1.7\n...",
        b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n",  # EPS would run Ghostscript
        b"\x89PNG\r\n\x1a\n" + b"\x00" * 40,
        b"GIF89a" + b"\xff" * 20,
    ],
)
def test_non_images_are_415(data: bytes) -> None:
    err = refused("not_an_image", lambda: decode_image(data, MAX_PIXELS))
    assert err.status == 415 and "PNG, JPEG" in err.message


def test_a_broken_exif_block_keeps_the_picture(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(image: Image.Image) -> Image.Image:
        raise SyntaxError("not a TIFF file")

    monkeypatch.setattr(ImageOps, "exif_transpose", broken)
    assert decode_image(encoded(Image.new("RGB", (20, 10))), MAX_PIXELS).size == (20, 10)


def test_a_truncated_image_is_not_an_image() -> None:
    data = encoded(Image.effect_noise((64, 64), 50))
    err = refused("not_an_image", lambda: decode_image(data[: len(data) // 2], MAX_PIXELS))
    assert "truncated" in err.message


def test_a_huge_image_is_refused_from_its_header(monkeypatch: pytest.MonkeyPatch) -> None:
    def decoded(*args: object) -> None:
        raise AssertionError("pixels were decoded")

    # If pixels were decoded, the broken data would surface as not_an_image instead.
    monkeypatch.setattr(ImageFile.ImageFile, "load", decoded)
    err = refused("image_too_large", lambda: decode_image(png_claiming(8000, 8000), MAX_PIXELS))
    assert err.status == 413
    assert "8000x8000" in err.message and "40,000,000" in err.message
    # Past Pillow's own bomb limit the header read itself refuses; same answer.
    err = refused("image_too_large", lambda: decode_image(png_claiming(20000, 20000), MAX_PIXELS))
    assert "40,000,000" in err.message


def test_the_pixel_cap_is_the_callers() -> None:
    data = encoded(Image.new("RGB", (32, 24)))
    refused("image_too_large", lambda: decode_image(data, 500))
    assert decode_image(data, 768).size == (32, 24)


# Tensors -------------------------------------------------------------------------------


def gradient(width: int = 300, height: int = 200) -> Image.Image:
    x = np.linspace(0, 255, width, dtype=np.float32)[np.newaxis, :, np.newaxis]
    y = np.linspace(0, 255, height, dtype=np.float32)[:, np.newaxis, np.newaxis]
    rgb = np.concatenate([x + 0 * y, y + 0 * x, 255 - (x + y) / 2], axis=2)
    return Image.fromarray(rgb.astype(np.uint8), "RGB")


@pytest.mark.parametrize("name", ["coffee.png", "chelsea.png", "china.jpg"])
def test_the_tensor_equals_the_reference_preprocessing(name: str) -> None:
    path = DEMO / "images" / name
    demo = json.loads((MODEL_DIR / "preprocess.json").read_text(encoding="utf-8"))
    ours = image_to_tensor(
        decode_image(path.read_bytes(), MAX_PIXELS), NCHW, PRESETS["efficientnet"]
    )
    reference = reference_preprocess(path, demo)
    assert ours.dtype == np.float32 and ours.shape == reference.shape == (1, 3, 224, 224)
    assert np.allclose(ours, reference)


@pytest.fixture(scope="module")
def session() -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    return ort.InferenceSession(
        str(MODEL_DIR / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )


def test_the_demo_model_sees_an_espresso(session: ort.InferenceSession) -> None:
    (s,) = specs_from_signature(
        {"inputs": [{"name": "input", "dtype": "TYPE_FP32", "dims": ["batch", 3, 224, 224]}]}
    )
    image = decode_image((DEMO / "images" / "coffee.png").read_bytes(), MAX_PIXELS)
    (logits,) = session.run(
        ["logits"], {"input": image_to_tensor(image, s, PRESETS["efficientnet"])}
    )
    labels = parse_labels((MODEL_DIR / "labels.txt").read_text(encoding="utf-8"))
    (described,) = describe_outputs({"logits": logits}, labels)
    best = described["top_k"][0]
    assert best["index"] == 967 and best["label"] == "espresso"
    assert best["probability"] > 0.9 and described["probabilities"] == "softmax"


def test_nhwc_is_the_nchw_tensor_transposed() -> None:
    image = gradient()
    nchw = image_to_tensor(image, NCHW, PRESETS["imagenet"])
    nhwc = image_to_tensor(image, spec(["batch", 224, 224, 3]), PRESETS["imagenet"])
    assert nhwc.shape == (1, 224, 224, 3)
    assert np.array_equal(nhwc, nchw.transpose(0, 2, 3, 1))


def test_bgr_swaps_channels_after_normalising_in_rgb_order() -> None:
    image = gradient()
    rgb = image_to_tensor(image, NCHW, Preprocess(mean=(10.0, 20.0, 30.0)))
    bgr = image_to_tensor(image, NCHW, Preprocess(mean=(10.0, 20.0, 30.0), color="BGR"))
    assert np.array_equal(bgr[0, 0], rgb[0, 2]) and np.array_equal(bgr[0, 2], rgb[0, 0])


def test_one_channel_models_get_grey() -> None:
    mnist = spec(["batch", 1, 28, 28])
    out = image_to_tensor(Image.new("RGB", (40, 40), (255, 255, 255)), mnist, PRESETS["unit"])
    assert out.shape == (1, 1, 28, 28) and np.allclose(out, 1.0)


def test_the_crop_is_resized_to_the_model_size() -> None:
    small = spec(["batch", 3, 112, 112])
    assert image_to_tensor(gradient(), small, PRESETS["imagenet"]).shape == (1, 3, 112, 112)


def test_dynamic_sizes_take_the_crop() -> None:
    free = spec(["batch", 3, "height", "width"])
    out = image_to_tensor(gradient(), free, Preprocess(resize_short=128, crop=100))
    assert out.shape == (1, 3, 100, 100)
    err = refused("bad_preprocess", lambda: image_tensor_shape(free, Preprocess(crop=None)))
    assert "preprocess.crop" in err.message


def test_an_explicit_layout_fills_in_a_dynamic_channel_axis() -> None:
    free_channels = spec(["batch", None, 64, 64])
    assert image_tensor_shape(free_channels, Preprocess(layout="NCHW")) == (1, 3, 64, 64)
    refused("not_an_image_input", lambda: image_tensor_shape(free_channels, Preprocess()))


def test_resize_short_zero_stretches_to_the_model_size() -> None:
    out = image_to_tensor(gradient(50, 20), spec([1, 3, 32, 48]), Preprocess(0, None))
    assert out.shape == (1, 3, 32, 48)
    assert out[0, 0, 0, 0] < 10 and out[0, 0, 0, -1] > 240  # the whole width is kept


def test_a_model_bigger_than_resize_short_needs_a_bigger_resize() -> None:
    inception = spec(["batch", 3, 299, 299])
    err = refused(
        "bad_preprocess", lambda: image_to_tensor(gradient(), inception, Preprocess(256, None))
    )
    assert "at least 299" in err.message
    assert image_to_tensor(gradient(), inception, Preprocess(320, None)).shape[2:] == (299, 299)


def test_a_panorama_resized_by_its_short_side_is_refused() -> None:
    panorama = Image.new("RGB", (20000, 10))
    err = refused("image_too_large", lambda: image_to_tensor(panorama, NCHW, Preprocess(4096, 224)))
    assert "8192000x4096" in err.message


@pytest.mark.parametrize(("dtype", "numpy"), [("TYPE_FP16", np.float16), ("TYPE_FP64", np.float64)])
def test_the_tensor_has_the_model_dtype(dtype: str, numpy: type) -> None:
    out = image_to_tensor(gradient(), spec(["batch", 3, 224, 224], dtype), PRESETS["imagenet"])
    assert out.dtype == numpy and out.flags.c_contiguous


@pytest.mark.parametrize(
    "bad", [spec(["batch", 4]), spec(["batch", 3, 224, 224], "TYPE_INT64")], ids=["rank2", "int"]
)
def test_non_image_inputs_are_refused(bad: TensorSpec) -> None:
    err = refused("not_an_image_input", lambda: image_to_tensor(gradient(), bad, PRESETS["raw"]))
    assert "Send the tensor itself" in err.message


# --------------------------------------------------------------------------- memory budget


def _png(width: int, height: int, mode: str = "RGBA") -> bytes:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new(mode, (width, height), (10, 20, 30, 255) if mode == "RGBA" else 0).save(buffer, "PNG")
    return buffer.getvalue()


def test_an_image_over_the_memory_budget_is_refused_before_it_is_decoded() -> None:
    import pytest

    from model_store.inference import InferenceInputError, decode_image

    data = _png(4000, 3000)  # 12 MP with alpha: ~180 MiB to decode and composite
    with pytest.raises(InferenceInputError, match="MiB, over the limit of 64 MiB") as info:
        decode_image(data, max_pixels=40_000_000, max_memory=64 << 20)
    assert info.value.code == "image_too_large"
    assert decode_image(data, max_pixels=40_000_000, max_memory=512 << 20).size == (4000, 3000)


def test_a_large_jpeg_is_decoded_at_a_reduced_scale_instead_of_refused() -> None:
    import io

    from PIL import Image

    from model_store.inference import decode_image

    buffer = io.BytesIO()
    Image.new("RGB", (6000, 4000), (200, 100, 50)).save(buffer, "JPEG", quality=80)
    image = decode_image(
        buffer.getvalue(), max_pixels=40_000_000, max_memory=32 << 20, target_side=256
    )
    assert image.size[0] < 6000 and min(image.size) >= 512  # at least twice the target side

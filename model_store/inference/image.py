"""Image files to model tensors: decode safely, resize and crop, normalise, lay out.

Uploaded images are untrusted: :func:`decode_image` opens only common raster formats (no
EPS, which Pillow would hand to Ghostscript), reads the size from the header and refuses an
oversized image *before* decoding a pixel, and turns every decoder failure into one clear
error. :func:`image_to_tensor` then follows the usual classifier recipe (short side to
``resize_short`` with bilinear filtering, centre crop, ``(x - mean) / std``) with the same
rounding as ``tests/unit/test_demo_model.py``, so the demo model gets exactly the tensor it
was checked with.

Example:
    >>> image = decode_image(Path("demo/images/coffee.png").read_bytes(), max_pixels=40_000_000)
    >>> image_to_tensor(image, spec, PRESETS["efficientnet"]).shape
    (1, 3, 224, 224)
"""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

import numpy as np
from PIL import Image, ImageOps

from model_store.inference.errors import InferenceInputError
from model_store.inference.signature import (
    CHANNEL_AXIS,
    LAYOUTS,
    Layout,
    TensorSpec,
    image_layout,
    image_size,
)
from model_store.text import Message, Said, say

Color = Literal["RGB", "BGR"]
MAX_SIDE = 4096
# A long panorama resized by its short side can become enormous (40000x1000 with
# resize_short=4096 is 671 M pixels); refuse intermediates bigger than a 4096x4096 square.
MAX_RESIZED_PIXELS = MAX_SIDE * MAX_SIDE
# Formats people send as photos. Anything else (EPS runs Ghostscript, exotic formats carry
# more decoder risk) is refused as not an image.
ALLOWED_FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF")
NOT_AN_IMAGE = say("The file is not an image Pillow can read (PNG, JPEG, WebP, GIF, BMP, TIFF).")
_KEYS = ("preset", "resize_short", "crop", "mean", "std", "color", "layout")
_WHITE = (255, 255, 255, 255)


def _bad(message: Said) -> InferenceInputError:
    return InferenceInputError(message, code="bad_preprocess")


def _is_whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Preprocess:
    """How an image becomes a tensor. Values are checked on construction.

    Attributes:
        resize_short: The short side is resized to this many pixels (bilinear), keeping the
            aspect ratio; 0 stretches the whole image straight to the model's height x width.
        crop: Side of the centre square cut after resizing; None cuts the model's own
            height x width. The cut is resized to the model's size when they differ.
        mean: Subtracted per channel, in 0..255 pixel units, given in R, G, B order.
        std: Divides per channel after the mean, same units and order; never zero.
        color: Channel order the model wants; ``"BGR"`` swaps after normalising.
        layout: ``"NCHW"`` or ``"NHWC"``; None takes it from the model's input shape.
    """

    resize_short: int = 256
    crop: int | None = 224
    mean: tuple[float, float, float] = (0.0, 0.0, 0.0)
    std: tuple[float, float, float] = (1.0, 1.0, 1.0)
    color: Color = "RGB"
    layout: Layout | None = None

    def __post_init__(self) -> None:
        if not _is_whole(self.resize_short) or not 0 <= self.resize_short <= MAX_SIDE:
            raise _bad(
                say(
                    "preprocess.resize_short must be a whole number from 1 to %(max)s (pixels "
                    "of the short side), or 0 to resize straight to the model's size; "
                    "got %(got)s.",
                    max=MAX_SIDE,
                    got=repr(self.resize_short),
                )
            )
        if self.crop is not None and (not _is_whole(self.crop) or not 1 <= self.crop <= MAX_SIDE):
            raise _bad(
                say(
                    "preprocess.crop must be a whole number from 1 to %(max)s, or null to use "
                    "the model's height and width; got %(got)s.",
                    max=MAX_SIDE,
                    got=repr(self.crop),
                )
            )
        if self.crop is not None and self.resize_short and self.crop > self.resize_short:
            raise _bad(
                say(
                    "preprocess.crop (%(crop)s) is larger than resize_short "
                    "(%(resize_short)s): the centre crop must fit in the resized image. "
                    "Make crop at most resize_short.",
                    crop=self.crop,
                    resize_short=self.resize_short,
                )
            )
        for name in ("mean", "std"):
            value = getattr(self, name)
            if not (
                isinstance(value, tuple)
                and len(value) == 3
                and all(_is_real(v) and math.isfinite(v) for v in value)
            ):
                raise _bad(
                    say(
                        "preprocess.%(key)s must be three finite numbers (R, G, B, in 0..255 "
                        "pixel units) or one number for all three; got %(got)s.",
                        key=name,
                        got=repr(value),
                    )
                )
        if any(v == 0 for v in self.std):
            raise _bad(
                say(
                    "preprocess.std has a zero; each channel is divided by its std. "
                    "Use 1 to leave a channel unscaled."
                )
            )
        if self.color not in ("RGB", "BGR"):
            raise _bad(
                say("preprocess.color must be 'RGB' or 'BGR'; got %(got)s.", got=repr(self.color))
            )
        if self.layout is not None and self.layout not in LAYOUTS:
            raise _bad(
                say(
                    "preprocess.layout must be 'NCHW', 'NHWC' or null (take it from the model); "
                    "got %(got)s.",
                    got=repr(self.layout),
                )
            )

    @classmethod
    def from_dict(cls, data: object) -> Preprocess:
        """Reads settings a person or program sent, e.g. ``{"preset": "imagenet", "crop": 200}``.

        A ``"preset"`` key starts from that preset and the other keys override it; without
        one, the dataclass defaults are the start. ``mean``/``std`` may be one number.

        Raises:
            InferenceInputError: ``bad_preprocess``, saying which key is wrong and why.
        """
        if not isinstance(data, Mapping):
            raise _bad(
                say(
                    'preprocess must be an object such as {"preset": "imagenet"} or '
                    '{"resize_short": 256, "crop": 224, "mean": [...], "std": [...]}.'
                )
            )
        unknown = [str(k) for k in data if k not in _KEYS]
        if unknown:
            raise _bad(
                say(
                    "preprocess has unknown keys %(unknown)s; the known ones are %(known)s.",
                    unknown=str(unknown),
                    known=str(list(_KEYS)),
                )
            )
        base = cls()
        if "preset" in data:
            preset = data["preset"]
            if not isinstance(preset, str) or preset not in PRESETS:
                raise _bad(
                    say(
                        "Unknown preprocess preset %(preset)s; choose one of %(presets)s.",
                        preset=repr(preset),
                        presets=str(list(PRESETS)),
                    )
                )
            base = PRESETS[preset]
        changes: dict[str, Any] = {k: data[k] for k in _KEYS[1:] if k in data}
        for name in ("mean", "std"):
            if name in changes:
                changes[name] = _triple(name, changes[name])
        for name in ("color", "layout"):
            if isinstance(changes.get(name), str):
                changes[name] = changes[name].upper()
        return replace(base, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings; ``Preprocess.from_dict(p.to_dict()) == p``."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["mean"], out["std"] = list(self.mean), list(self.std)
        return out


def _is_real(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _triple(name: str, value: object) -> tuple[float, float, float]:
    """One number or three, as a tuple of three floats (range checks come after)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
        return (number, number, number)
    if isinstance(value, list | tuple) and len(value) == 3 and all(_is_real(v) for v in value):
        return (float(value[0]), float(value[1]), float(value[2]))
    raise _bad(
        say(
            "preprocess.%(key)s must be three numbers (R, G, B, in 0..255 pixel units) or one "
            "number for all three; got %(got)s.",
            key=name,
            got=repr(value),
        )
    )


PRESETS: dict[str, Preprocess] = {
    # demo/efficientnet-lite0/preprocess.json: pixels to about [-1, 1].
    "efficientnet": Preprocess(256, 224, (127.0, 127.0, 127.0), (128.0, 128.0, 128.0)),
    # torchvision's ImageNet statistics, scaled from 0..1 to 0..255 units.
    "imagenet": Preprocess(256, 224, (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)),
    "unit": Preprocess(256, 224, (0.0, 0.0, 0.0), (255.0, 255.0, 255.0)),
    "raw": Preprocess(256, 224, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
}
# Said with say(): the web layer shows them in the reader's language (webapp.text.localize).
PRESET_LABELS: dict[str, Message] = {
    "efficientnet": say("EfficientNet-Lite (pixels scaled to -1..1)"),
    "imagenet": say("ImageNet mean/std (torchvision models)"),
    "unit": say("Pixels scaled to 0..1"),
    "raw": say("Raw pixels 0..255"),
}


# Decoding ----------------------------------------------------------------------------


#: Bytes per sample of Pillow's modes that are not 8 bits per channel.
_SAMPLE_BYTES = {"I": 4, "F": 4, "I;16": 2, "I;16B": 2, "I;16L": 2, "I;16N": 2, "1": 1}


def decoding_memory(image: Image.Image) -> int:
    """Bytes that decoding ``image`` and turning it into RGB take at most, from its header.

    The decoded pixels, plus the RGB copy; an image with transparency is composited on a
    white RGBA canvas first, which costs two more RGBA images.
    """
    width, height = image.size
    pixels = width * height
    decoded = pixels * len(image.getbands()) * _SAMPLE_BYTES.get(image.mode, 1)
    has_alpha = "A" in image.getbands() or "transparency" in image.info
    return decoded + pixels * 3 + (2 * pixels * 4 if has_alpha else 0)


def decode_image(
    data: bytes,
    max_pixels: int,
    *,
    max_memory: int | None = None,
    target_side: int | None = None,
) -> Image.Image:
    """Opens image file bytes as an upright RGB image.

    Args:
        data: The file's bytes (PNG, JPEG, WebP, GIF, BMP or TIFF; GIFs give their first frame).
        max_pixels: Largest width x height accepted, checked from the header before decoding.
        max_memory: Largest :func:`decoding_memory` accepted, checked before decoding.
        target_side: The largest side the caller will resize to. A JPEG over ``max_memory``
            is then decoded at 1/2, 1/4 or 1/8 scale (JPEG can do that for free), never
            below twice this side, instead of being refused.

    Returns:
        An RGB image with EXIF orientation applied; transparency is composited on white.

    Raises:
        InferenceInputError: ``image_too_large`` (413) or ``not_an_image`` (415).
    """
    try:
        image: Image.Image = Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS)
    except Image.DecompressionBombError:
        # Pillow refuses twice its own MAX_IMAGE_PIXELS while reading the header.
        pillow_cap = 2 * (Image.MAX_IMAGE_PIXELS or 0)
        raise _too_large(
            say("over %(pixels)s pixels", pixels=f"{pillow_cap:,}"), max_pixels
        ) from None
    except Exception:
        # Decoders fail on hostile input in many ways (OSError, SyntaxError, struct.error,
        # ValueError...); all of them mean the same thing to the sender.
        raise InferenceInputError(NOT_AN_IMAGE, code="not_an_image") from None
    width, height = image.size
    if width * height > max_pixels:
        raise _too_large(
            say(
                "%(width)sx%(height)s (%(pixels)s pixels)",
                width=width,
                height=height,
                pixels=f"{width * height:,}",
            ),
            max_pixels,
        )
    over_budget = max_memory is not None and decoding_memory(image) > max_memory
    if over_budget and target_side and image.format == "JPEG":
        # Only a photo too large to decode whole is decoded at a reduced scale (twice the
        # side it will be resized to, at least); others decode exactly as always.
        with contextlib.suppress(Exception):
            image.draft("RGB", (2 * target_side, 2 * target_side))
    if max_memory is not None and decoding_memory(image) > max_memory:
        raise InferenceInputError(
            say(
                "The image is %(width)sx%(height)s in mode %(mode)s; decoding it would take "
                "about %(mib)s MiB, over the limit of %(limit)s MiB. Send a smaller image.",
                width=width,
                height=height,
                mode=image.mode,
                mib=decoding_memory(image) >> 20,
                limit=max_memory >> 20,
            ),
            code="image_too_large",
        )
    try:
        image.load()
    except Exception:
        raise InferenceInputError(
            say(
                "The file is not an image Pillow can read (PNG, JPEG, WebP, GIF, BMP, TIFF). "
                "Its pixels could not be decoded; it may be truncated or corrupt."
            ),
            code="not_an_image",
        ) from None
    # A malformed EXIF block should not cost the whole picture: keep it unrotated.
    with contextlib.suppress(Exception):
        image = ImageOps.exif_transpose(image)
    return _to_rgb(image)


def _too_large(size: Message, max_pixels: int) -> InferenceInputError:
    return InferenceInputError(
        say(
            "The image is %(size)s; the limit is %(limit)s pixels. Send a smaller image.",
            size=size,
            limit=f"{max_pixels:,}",
        ),
        code="image_too_large",
    )


def _to_rgb(image: Image.Image) -> Image.Image:
    """Any Pillow mode to 8-bit RGB, keeping what a person would see."""
    if image.mode == "RGB" and "transparency" not in image.info:
        return image
    if image.mode.startswith("I") or image.mode == "F":
        image = _to_8bit_grey(image)
    has_alpha = image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info
    if has_alpha:
        # Transparent pixels have arbitrary colours underneath; white is what viewers show.
        background = Image.new("RGBA", image.size, _WHITE)
        return Image.alpha_composite(background, image.convert("RGBA")).convert("RGB")
    try:
        return image.convert("RGB")
    except ValueError:
        raise InferenceInputError(
            say(
                "The image's colour mode %(mode)s cannot be converted to RGB. "
                "Save it as an ordinary RGB PNG or JPEG.",
                mode=image.mode,
            ),
            code="not_an_image",
        ) from None


def _to_8bit_grey(image: Image.Image) -> Image.Image:
    """16/32-bit integer or float grey to 8 bits (Pillow's own convert would clip, not scale)."""
    values = np.asarray(image, dtype=np.float64)
    if image.mode.startswith("I;16") or (image.mode == "I" and values.max(initial=0) > 255):
        values = values / 257.0  # 0..65535 onto 0..255
    return Image.fromarray(np.clip(np.rint(values), 0, 255).astype(np.uint8), mode="L")


# Tensors -----------------------------------------------------------------------------


def _not_image_input(spec: TensorSpec, why: Message) -> InferenceInputError:
    return InferenceInputError(
        say(
            "Input %(input)s (%(dtype)s, %(shape)s) does not take images: %(why)s Image "
            "inputs are rank-4 float tensors with 1 or 3 channels ([batch, 3, H, W] or "
            "[batch, H, W, 3]). Send the tensor itself instead (a nested list, "
            '{"data", "shape"}, {"b64", "shape"} or {"npy_b64"}).',
            input=repr(spec.name),
            dtype=spec.triton_type,
            shape=spec.describe_shape(),
            why=why,
        ),
        code="not_an_image_input",
        field=spec.name,
    )


def _layout_and_channels(spec: TensorSpec, preprocess: Preprocess) -> tuple[Layout, int]:
    """The layout to use and the channel count, or an error saying why images do not fit."""
    if spec.rank != 4 or spec.numpy_dtype.kind != "f":
        raise _not_image_input(spec, say("it is not a rank-4 float tensor."))
    layout = preprocess.layout or image_layout(spec)
    if layout is None:
        raise _not_image_input(spec, say("neither axis 1 nor axis 3 is 1 or 3 channels."))
    # A dynamic channel axis (only possible with an explicit layout) gets colour.
    channels = spec.dims[CHANNEL_AXIS[layout]] or 3
    if channels not in (1, 3):
        raise _not_image_input(
            spec,
            say(
                "in %(layout)s it would have %(channels)s channels.",
                layout=layout,
                channels=channels,
            ),
        )
    return layout, channels


def image_tensor_shape(spec: TensorSpec, preprocess: Preprocess) -> tuple[int, int, int, int]:
    """The shape :func:`image_to_tensor` will return, found without touching any pixels.

    Lets callers check limits and refuse non-image inputs before decoding a file.

    Raises:
        InferenceInputError: ``not_an_image_input``, or ``bad_preprocess`` when the model's
            height or width is dynamic and ``preprocess.crop`` does not fix it.
    """
    layout, channels = _layout_and_channels(spec, preprocess)
    height, width = _target_size(spec, preprocess, layout)
    if layout == "NCHW":
        return (1, channels, height, width)
    return (1, height, width, channels)


def _target_size(spec: TensorSpec, preprocess: Preprocess, layout: Layout) -> tuple[int, int]:
    height, width = image_size(spec, layout)
    height, width = height or preprocess.crop, width or preprocess.crop
    if height is None or width is None:
        raise InferenceInputError(
            say(
                "Input %(input)s takes images of any size (%(shape)s), so "
                "preprocess.crop must say which size to send (e.g. 224).",
                input=repr(spec.name),
                shape=spec.describe_shape(),
            ),
            code="bad_preprocess",
            field=spec.name,
        )
    return height, width


def image_to_tensor(image: Image.Image, spec: TensorSpec, preprocess: Preprocess) -> np.ndarray:
    """Turns a decoded RGB image into a batch of one for ``spec``.

    Target height/width are the model's fixed dims, else ``preprocess.crop``. 1-channel
    models get Pillow's grey (ITU-R 601 luma) and the average of the three mean/std values.

    Returns:
        ``[1, C, H, W]`` or ``[1, H, W, C]`` in ``spec.numpy_dtype``.

    Raises:
        InferenceInputError: ``not_an_image_input``, ``bad_preprocess`` or
            ``image_too_large`` (the resize would make an oversized intermediate).
    """
    layout, channels = _layout_and_channels(spec, preprocess)
    height, width = _target_size(spec, preprocess, layout)
    fitted = _fit(image.convert("RGB"), preprocess, width, height)
    # float64 models keep full precision; everything else is computed like the reference.
    work = np.float64 if spec.numpy_dtype == np.float64 else np.float32
    mean: np.ndarray = np.asarray(preprocess.mean, dtype=work)
    std: np.ndarray = np.asarray(preprocess.std, dtype=work)
    pixels: np.ndarray
    if channels == 1:
        pixels = np.asarray(fitted.convert("L"), dtype=work)[..., np.newaxis]
        mean, std = mean.mean(keepdims=True), std.mean(keepdims=True)
    else:
        pixels = np.asarray(fitted, dtype=work)
    values = (pixels - mean) / std
    if preprocess.color == "BGR":
        values = values[..., ::-1]  # mean/std were given in RGB order, so swap after
    if layout == "NCHW":
        values = values.transpose(2, 0, 1)
    return np.ascontiguousarray(values[np.newaxis], dtype=spec.numpy_dtype)


def _fit(image: Image.Image, preprocess: Preprocess, width: int, height: int) -> Image.Image:
    """Resize and centre-crop to width x height, rounding like tests/unit/test_demo_model.py."""
    bilinear = Image.Resampling.BILINEAR
    if preprocess.resize_short == 0:
        return image.resize((width, height), bilinear)
    short = preprocess.resize_short
    src_w, src_h = image.size
    scale = short / min(src_w, src_h)
    size = (max(short, round(src_w * scale)), max(short, round(src_h * scale)))
    if size[0] * size[1] > MAX_RESIZED_PIXELS:
        raise InferenceInputError(
            say(
                "Resizing this %(width)sx%(height)s image to a short side of %(short)s would "
                "make it %(new_width)sx%(new_height)s, over %(limit)s pixels. Send a less "
                "elongated image or use a smaller resize_short.",
                width=src_w,
                height=src_h,
                short=short,
                new_width=size[0],
                new_height=size[1],
                limit=f"{MAX_RESIZED_PIXELS:,}",
            ),
            code="image_too_large",
        )
    crop_w, crop_h = (preprocess.crop, preprocess.crop) if preprocess.crop else (width, height)
    if crop_w > size[0] or crop_h > size[1]:
        raise _bad(
            say(
                "The model takes %(height)sx%(width)s images but resize_short is %(short)s, so "
                "the centre crop does not fit. Set resize_short to at least %(least)s.",
                height=height,
                width=width,
                short=short,
                least=max(crop_w, crop_h),
            )
        )
    resized = image.resize(size, bilinear)
    left, top = (size[0] - crop_w) // 2, (size[1] - crop_h) // 2
    cropped = resized.crop((left, top, left + crop_w, top + crop_h))
    if (crop_w, crop_h) != (width, height):
        cropped = cropped.resize((width, height), bilinear)
    return cropped

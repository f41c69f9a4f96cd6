"""Inference requests in, readable answers out: the plain-Python side of "Try it".

Turns what a program or a browser sends (JSON arrays, base64 tensors, .npy files, image
files) into validated numpy arrays for Triton, turns Triton's outputs into something a page
can show, and writes copyable code that calls a model. Imports no Django, so Celery workers
and command-line tools can use it too.

Modules:
    signature: the stored signature as :class:`TensorSpec` objects; image-like inputs.
    image: safe image decoding and the resize/crop/normalise recipe (:class:`Preprocess`).
    decode: a request's ``inputs`` to arrays (:func:`decode_inputs`); examples: inputs that fit.
    outputs: :func:`describe_outputs` (top-k with labels) and :func:`parse_labels`.
    class_names: labels offered in one click (ImageNet-1k, names in the ONNX metadata).
    snippets: curl and tritonclient code for a model.
"""

from __future__ import annotations

from model_store.inference.class_names import (
    LabelOffer,
    MetadataNames,
    imagenet_labels,
    label_offers,
    names_from_metadata,
    offered_labels,
)
from model_store.inference.decode import (
    DEFAULT_PREPROCESS,
    decode_inputs,
    example_payload,
    example_value,
)
from model_store.inference.errors import STATUS_BY_CODE, InferenceInputError
from model_store.inference.image import (
    PRESET_LABELS,
    PRESETS,
    Preprocess,
    decode_image,
    image_tensor_shape,
    image_to_tensor,
)
from model_store.inference.jsonable import encode_for_json
from model_store.inference.limits import Limits
from model_store.inference.outputs import describe_outputs, parse_labels
from model_store.inference.signature import (
    TensorSpec,
    image_layout,
    image_size,
    specs_from_signature,
)
from model_store.inference.snippets import curl_snippet, tritonclient_snippet

__all__ = [
    "DEFAULT_PREPROCESS",
    "PRESETS",
    "PRESET_LABELS",
    "STATUS_BY_CODE",
    "InferenceInputError",
    "LabelOffer",
    "Limits",
    "MetadataNames",
    "Preprocess",
    "TensorSpec",
    "curl_snippet",
    "decode_image",
    "decode_inputs",
    "describe_outputs",
    "encode_for_json",
    "example_payload",
    "example_value",
    "image_layout",
    "image_size",
    "image_tensor_shape",
    "image_to_tensor",
    "imagenet_labels",
    "label_offers",
    "names_from_metadata",
    "offered_labels",
    "parse_labels",
    "specs_from_signature",
    "tritonclient_snippet",
]

"""The bundled demo: EfficientNet-Lite0, its labels, and a photo it must call "espresso".

The photo becomes the model's input through the product's own preprocessing (the
``efficientnet`` preset the demo model is served with, ``model_store.inference.image``), and
every output is read the way the *Try it* panel reads it (``describe_outputs``: top-5 with
labels and softmax probabilities). So a pass means the whole chain agrees with what the demo
was measured to do (demo/README.md: coffee.png is espresso, 0.957, with onnxruntime).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from model_store.inference import (
    PRESETS,
    TensorSpec,
    decode_image,
    describe_outputs,
    image_to_tensor,
    parse_labels,
)
from model_store.onnx_info import OnnxInfo
from model_store.text import Said, say

#: What the demo model must see in the photo (demo/README.md, "The model").
EXPECTED_LABEL = "espresso"
#: The photos are small; this only guards against a wrong file.
_MAX_PIXELS = 40_000_000
TOP_K = 5


@dataclass(frozen=True)
class DemoAssets:
    """Where the demo's files are (``demo/`` in the checkout)."""

    model: Path
    labels: Path
    photo: Path
    expected_label: str = EXPECTED_LABEL
    preset: str = "efficientnet"

    @classmethod
    def from_checkout(cls, demo_dir: Path) -> DemoAssets:
        """The demo of a checkout's ``demo/`` folder: the model, its labels and coffee.png."""
        return cls(
            model=demo_dir / "efficientnet-lite0" / "model.onnx",
            labels=demo_dir / "efficientnet-lite0" / "labels.txt",
            photo=demo_dir / "images" / "coffee.png",
        )

    def missing(self) -> list[Path]:
        """The demo files that are not there (an incomplete installation)."""
        return [p for p in (self.model, self.labels, self.photo) if not p.is_file()]

    def label_list(self) -> list[str]:
        return parse_labels(self.labels.read_text(encoding="utf-8"))


@dataclass
class Classification:
    """What one path (pyACL on an NPU, Triton through a backend) made of the photo."""

    where: str
    top_k: list[dict[str, Any]] = field(default_factory=list)

    @property
    def top1(self) -> dict[str, Any]:
        return self.top_k[0] if self.top_k else {}

    @property
    def top1_label(self) -> str | None:
        label = self.top1.get("label")
        return str(label) if label is not None else None

    def describe(self) -> Said:
        """E.g. ``"espresso (967) 0.957"``."""
        best = self.top1
        if not best:
            return say("no classification")
        return f"{best.get('label')} ({best.get('index')}) {best.get('probability', 0):.3f}"

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "top_k": self.top_k}


def photo_tensor(assets: DemoAssets, info: OnnxInfo) -> tuple[str, np.ndarray]:
    """The photo as the model's (only) input: ``(input name, [1, 3, 224, 224] float32)``."""
    tensor = info.inputs[0]
    dims = tuple(d if isinstance(d, int) and d > 0 else None for d in tensor.dims or [])
    spec = TensorSpec(
        name=tensor.name,
        triton_type="TYPE_FP32",
        numpy_dtype=np.dtype(np.float32),
        dims=dims,
        dim_names=tuple(None for _ in dims),
    )
    image = decode_image(assets.photo.read_bytes(), max_pixels=_MAX_PIXELS)
    return tensor.name, image_to_tensor(image, spec, PRESETS[assets.preset])


def classify(
    where: str, outputs: Mapping[str, np.ndarray], output: str, labels: list[str]
) -> Classification:
    """The top-5 of ``outputs[output]`` with labels, as the Try it panel shows them."""
    described = describe_outputs({output: np.asarray(outputs[output])}, labels, top_k=TOP_K)
    rows = [
        {
            "index": row["index"],
            "label": row["label"],
            "score": round(float(row["score"]), 5),
            "probability": round(float(row["probability"]), 5),
        }
        for row in described[0].get("top_k", [])
    ]
    return Classification(where, rows)

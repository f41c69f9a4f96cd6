"""The committed demo model (demo/efficientnet-lite0) classifies a real photo correctly.

Needs only onnxruntime, pillow and numpy: the model was exported once with
demo/efficientnet-lite0/export.py and is committed, so no torch is involved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from tests.fixtures.demo import preprocess

DEMO = Path(__file__).resolve().parents[2] / "demo"
MODEL_DIR = DEMO / "efficientnet-lite0"
# ImageNet classes 281-285: tabby, tiger cat, Persian cat, Siamese cat, Egyptian cat.
DOMESTIC_CATS = range(281, 286)


@pytest.fixture(scope="module")
def session() -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    return ort.InferenceSession(
        str(MODEL_DIR / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return json.loads((MODEL_DIR / "preprocess.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def labels() -> list[str]:
    return (MODEL_DIR / "labels.txt").read_text(encoding="utf-8").splitlines()


def classify(
    session: ort.InferenceSession, spec: dict[str, Any], image: Path
) -> tuple[int, np.ndarray]:
    (logits,) = session.run(["logits"], {"input": preprocess(image, spec)})
    shifted = np.exp(logits[0] - logits[0].max())
    probs = shifted / shifted.sum()
    return int(np.argmax(probs)), probs


def test_signature_is_a_dynamic_batch_of_rgb_224_images(session: ort.InferenceSession) -> None:
    (inp,) = session.get_inputs()
    (out,) = session.get_outputs()
    assert inp.name == "input" and inp.type == "tensor(float)"
    assert inp.shape == ["batch", 3, 224, 224]
    assert out.name == "logits" and out.type == "tensor(float)"
    assert out.shape == ["batch", 1000]


def test_labels_are_the_1000_imagenet_classes(labels: list[str]) -> None:
    assert len(labels) == 1000
    assert labels[0] == "tench" and labels[281] == "tabby" and labels[967] == "espresso"
    assert all(label.strip() == label and label for label in labels)


def test_coffee_is_espresso(
    session: ort.InferenceSession, spec: dict[str, Any], labels: list[str]
) -> None:
    top, probs = classify(session, spec, DEMO / "images" / "coffee.png")
    assert labels[top] == "espresso"
    assert probs[top] > 0.5


def test_chelsea_is_a_cat(
    session: ort.InferenceSession, spec: dict[str, Any], labels: list[str]
) -> None:
    top, probs = classify(session, spec, DEMO / "images" / "chelsea.png")
    assert top in DOMESTIC_CATS, labels[top]
    assert probs[list(DOMESTIC_CATS)].sum() > 0.8


def test_a_batch_gives_the_same_answers(
    session: ort.InferenceSession, spec: dict[str, Any]
) -> None:
    images = [DEMO / "images" / name for name in ("coffee.png", "chelsea.png")]
    batch = np.concatenate([preprocess(path, spec) for path in images])
    (logits,) = session.run(["logits"], {"input": batch})
    assert logits.shape == (2, 1000)
    one_by_one = [classify(session, spec, path)[0] for path in images]
    assert [int(i) for i in logits.argmax(axis=1)] == one_by_one

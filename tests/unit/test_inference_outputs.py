"""model_store.inference.outputs: outputs described for the page, and labels files read."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from model_store.inference import InferenceInputError, describe_outputs, parse_labels

LABELS_TXT = Path(__file__).resolve().parents[2] / "demo" / "efficientnet-lite0" / "labels.txt"


def refused(call: Callable[[], object]) -> InferenceInputError:
    with pytest.raises(InferenceInputError) as info:
        call()
    assert info.value.code == "bad_labels" and info.value.status == 400
    return info.value


def one(array: np.ndarray, **kw: Any) -> dict[str, Any]:
    (described,) = describe_outputs({"out": array}, **kw)
    return described


# describe_outputs -------------------------------------------------------------------------


def test_logits_get_a_softmax_top_k_with_labels() -> None:
    logits = np.array([[1.0, 3.0, 2.0, 0.0]], dtype=np.float32)
    d = one(logits, labels=["a", "b", "c"], top_k=3)
    assert d["kind"] == "classification" and d["probabilities"] == "softmax" and d["rows"] == 1
    assert d["name"] == "out" and d["dtype"] == "float32" and d["shape"] == [1, 4]
    top = d["top_k"]
    assert isinstance(top, list)
    assert [t["index"] for t in top] == [1, 2, 0]
    assert [t["label"] for t in top] == ["b", "c", "a"]
    expected = np.exp([3.0, 2.0, 1.0]) / np.exp([1.0, 3.0, 2.0, 0.0]).sum()
    assert np.allclose([t["probability"] for t in top], expected)
    assert top[0]["score"] == 3.0


def test_probabilities_are_shown_as_given() -> None:
    d = one(np.array([0.1, 0.7, 0.2], dtype=np.float32))
    assert d["probabilities"] == "as given" and d["rows"] == 1
    assert [t["probability"] for t in d["top_k"]] == pytest.approx([0.7, 0.2, 0.1])


def test_a_softmax_of_huge_logits_stays_finite() -> None:
    d = one(np.array([1000.0, 0.0, -1000.0]))
    top = d["top_k"]
    assert isinstance(top, list)
    assert top[0]["probability"] == pytest.approx(1.0) and top[2]["probability"] == 0.0


def test_a_batch_describes_its_first_row() -> None:
    batch = np.array([[0.0, 5.0], [5.0, 0.0], [1.0, 1.0]], dtype=np.float32)
    d = one(batch, top_k=1)
    assert d["rows"] == 3 and d["top_k"] == [
        {"index": 1, "label": None, "score": 5.0, "probability": pytest.approx(0.9933, abs=1e-4)}
    ]
    assert d["values"] == [0.0, 5.0, 5.0, 0.0, 1.0, 1.0]


def test_labels_shorter_than_the_classes_give_none() -> None:
    d = one(np.array([0.0, 1.0, 2.0]), labels=["zero", ""], top_k=5)
    assert [(t["index"], t["label"]) for t in d["top_k"]] == [(2, None), (1, None), (0, "zero")]


def test_ties_keep_the_lower_index_first() -> None:
    d = one(np.array([1.0, 2.0, 2.0, 2.0]), top_k=2)
    assert [t["index"] for t in d["top_k"]] == [1, 2]


@pytest.mark.parametrize(
    "array",
    [
        np.array([[1, 2, 3]], dtype=np.int64),  # not floats
        np.array([[0.5]], dtype=np.float32),  # one class
        np.zeros((2, 3, 4), dtype=np.float32),  # a feature map
        np.array([1.0, np.nan, 2.0]),  # a NaN makes ranking meaningless
    ],
)
def test_other_outputs_are_plain_values(array: np.ndarray) -> None:
    d = one(array)
    assert d["kind"] == "values" and "top_k" not in d


def test_non_finite_values_become_null_and_are_counted() -> None:
    d = one(np.array([[np.nan, np.inf, 1.0, -np.inf]], dtype=np.float32))
    assert d["values"] == [None, None, 1.0, None] and d["non_finite"] == 3
    json.dumps(d, allow_nan=False)


def test_long_outputs_are_truncated() -> None:
    d = one(np.arange(2500, dtype=np.float32).reshape(1, 2500), max_values=1000)
    values = d["values"]
    assert isinstance(values, list) and len(values) == 1000 and d["truncated"] is True
    assert d["kind"] == "classification" and d["shape"] == [1, 2500]
    assert one(np.arange(5.0))["truncated"] is False


def test_outputs_are_described_in_name_order_and_json_safe() -> None:
    outputs = {
        "z_text": np.array([b"hello", b"\xff"], dtype=object),
        "a_mask": np.array([[True, False]]),
        "m_ids": np.array([[3, 1]], dtype=np.int64),
    }
    described = describe_outputs(outputs)
    assert [d["name"] for d in described] == ["a_mask", "m_ids", "z_text"]
    assert described[0]["values"] == [True, False] and described[1]["values"] == [3, 1]
    assert described[2]["values"] == ["hello", "\ufffd"] and described[2]["dtype"] == "object"
    json.dumps(described, allow_nan=False)


# parse_labels ----------------------------------------------------------------------------


def test_the_demo_labels_file() -> None:
    labels = parse_labels(LABELS_TXT.read_text(encoding="utf-8"))
    assert len(labels) == 1000 and labels[967] == "espresso"


def test_lines_are_stripped_and_trailing_blank_lines_dropped() -> None:
    assert parse_labels("\ufeff cat \r\ndog\r\n\r\n\n") == ["cat", "dog"]
    assert parse_labels("cat\n\nbird\n") == ["cat", "", "bird"]  # keeps indexes aligned
    assert parse_labels(b"caf\xc3\xa9\n") == ["café"]


def test_a_json_list() -> None:
    assert parse_labels('["tench", " goldfish "]') == ["tench", "goldfish"]


def test_a_json_object_by_index() -> None:
    assert parse_labels('{"0": "tench", "2": "shark"}') == ["tench", "", "shark"]
    imagenet_style = {"0": ["n01440764", "tench"], "1": ["n01443537", "goldfish"]}
    assert parse_labels(json.dumps(imagenet_style)) == ["tench", "goldfish"]


def test_text_that_only_starts_like_json_is_lines() -> None:
    assert parse_labels("[unused]\ncat\n") == ["[unused]", "cat"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        (" \n\n", "empty"),
        ("cat\x00dog", "binary"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "UTF-8"),
        ("x" * 201, "at most 200"),
        ('["a", 1]', "only strings"),
        ('{"zero": "a"}', "class indexes"),
        ('{"²": "a"}', "class indexes"),
        ('{"0": 5}', "not a string"),
    ],
)
def test_bad_labels_files_are_refused(text: str | bytes, words: str) -> None:
    assert words in refused(lambda: parse_labels(text)).message


def test_too_many_labels_are_refused() -> None:
    refused(lambda: parse_labels("a\n" * 11, max_labels=10))
    refused(lambda: parse_labels("a\n" * 10_000, max_labels=10, max_len=5))  # cheap size check
    assert len(parse_labels("a\n" * 10, max_labels=10)) == 10

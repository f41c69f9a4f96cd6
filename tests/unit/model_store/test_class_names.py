"""Class names offered in one click: the shipped ImageNet-1k list, an ImageNet-sized output
found in a signature, and names read (never run) from an ONNX file's metadata."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from model_store.inference import (
    LabelOffer,
    imagenet_labels,
    label_offers,
    names_from_metadata,
    offered_labels,
)
from model_store.inference.class_names import (
    MAX_LABEL_CHARS,
    MAX_LABELS,
    MAX_METADATA_CHARS,
    imagenet_output,
    parse_metadata_names,
)
from model_store.onnx_info import inspect_onnx

ROOT = Path(__file__).resolve().parents[3]


def signature(*outputs: tuple[str, str, list]) -> dict:
    return {
        "inputs": [{"name": "x", "numpy": "float32", "dims": ["batch", 8]}],
        "outputs": [{"name": n, "numpy": t, "dims": d} for n, t, d in outputs],
    }


# ImageNet -------------------------------------------------------------------------------


def test_the_shipped_imagenet_names_are_the_demos_and_1001_puts_background_first() -> None:
    names = imagenet_labels(1000)
    demo = (ROOT / "demo" / "efficientnet-lite0" / "labels.txt").read_text().splitlines()
    assert names == demo and len(names) == 1000
    assert names[0] == "tench" and names[967] == "espresso" and names[999] == "toilet tissue"
    with_background = imagenet_labels(1001)
    assert with_background[0] == "background" and with_background[1:] == names
    with pytest.raises(ValueError, match="1000 classes"):
        imagenet_labels(80)


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        ([("logits", "float32", ["batch", 1000])], ("logits", 1000)),
        ([("logits", "float32", [1001])], ("logits", 1001)),
        ([("probs", "float16", [1, 1000])], ("probs", 1000)),
        # The first ImageNet-sized output wins; others are not looked at.
        ([("boxes", "float32", [1, 4]), ("cls", "float32", ["b", 1000])], ("cls", 1000)),
    ],
)
def test_an_imagenet_sized_float_output_is_found(outputs, expected) -> None:
    assert imagenet_output(signature(*outputs)) == expected


@pytest.mark.parametrize(
    "outputs",
    [
        [("y", "float32", ["batch", 999])],
        [("y", "int64", ["batch", 1000])],  # class indexes, not scores
        [("y", "float32", [1, 1000, 7, 7])],  # a feature map: Try it ranks rank 1-2 only
        [("y", "float32", ["batch", "classes"])],  # a symbolic axis says nothing
        [("y", "float32", None)],
        [("y", "float32", [True])],
    ],
)
def test_other_outputs_are_not_imagenet(outputs) -> None:
    assert imagenet_output(signature(*outputs)) is None


def test_a_broken_signature_offers_nothing() -> None:
    for broken in ({}, {"outputs": "x"}, {"outputs": [5, None]}, []):
        assert imagenet_output(broken) is None  # type: ignore[arg-type]
        assert label_offers(broken, None) == []  # type: ignore[arg-type]


# Metadata --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # Ultralytics writes its names dict with str(): a Python literal.
        ("{0: 'person', 1: 'bicycle', 2: 'car'}", ["person", "bicycle", "car"]),
        ("{'0': 'a', '1': 'b'}", ["a", "b"]),
        ('["cat", "dog"]', ["cat", "dog"]),
        ("('cat', 'dog')", ["cat", "dog"]),
        ('{"0": "background", "2": "road"}', ["background", "", "road"]),  # gaps stay aligned
        ('[{"0": "not road", "1": "road"}]', ["not road", "road"]),  # one map per output
        ('{"0": ["n01440764", "tench"]}', ["tench"]),  # imagenet_class_index.json's form
        ("cat\ndog\nbird\n", ["cat", "dog", "bird"]),
        ('  [" padded ", "x"]  ', ["padded", "x"]),
    ],
)
def test_common_forms_of_names_are_read(value, expected) -> None:
    assert parse_metadata_names(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        # Code, in every disguise: nothing is evaluated, so none of it reads as names.
        "__import__('os').system('touch /tmp/owned')",
        "{0: __import__('os').getcwd()}",
        "[open('/etc/passwd').read()]",
        "{0: 'a' + 'b'}",
        "{0: f'{1}'}",
        "[x for x in 'abc']",
        "{0: 'a', **{1: 'b'}}",
        "{'a', 'b'}",  # a set has no order
        "lambda: 0",
        # Wrong types and shapes.
        "[1, 2, 3]",
        "{0: 1}",
        "{-1: 'a'}",
        "{True: 'a'}",
        "{'one': 'a'}",
        "{'²': 'a'}",
        '{"0": null}',
        "[['a'], ['b']]",
        '[{"0": "a"}, {"0": "b"}]',
        "{0: 'a', 1: ['b']}",
        "42",
        "'just one string'",
        "single line",
        "",
        "   ",
        '["", ""]',
        # Hostile sizes and nesting.
        "[" * 100_000,
        "(" * 5000 + ")" * 5000,
        '{"0": "' + "x" * (MAX_LABEL_CHARS + 1) + '"}',
        f"{{{MAX_LABELS}: 'far'}}",
        "['a\\x00b']",
        '["a\\nb", "c"]',
    ],
)
def test_anything_else_reads_as_no_names(value) -> None:
    assert parse_metadata_names(value) is None


def test_a_value_over_the_size_cap_is_not_parsed_at_all() -> None:
    huge = "[" + ", ".join(["'x'"] * (MAX_METADATA_CHARS // 5 + 1)) + "]"
    assert len(huge) > MAX_METADATA_CHARS
    assert parse_metadata_names(huge) is None
    many = "\n".join(["n"] * (MAX_LABELS + 1))
    assert len(many) < MAX_METADATA_CHARS and parse_metadata_names(many) is None
    at_cap = parse_metadata_names("\n".join(f"c{i}" for i in range(MAX_LABELS)))
    assert at_cap is not None and len(at_cap) == MAX_LABELS


def test_the_first_readable_label_key_wins_and_others_are_ignored() -> None:
    props = {
        "stride": "32",
        "description": "['not', 'names']",
        "names": "{0: 'person', 1: 'bicycle'}",
        "Class_Names": "__import__('os')",  # preferred key, but unreadable: skipped
        "labels": '["from labels"]',
    }
    found = names_from_metadata(props)
    assert found is not None and found.key == "labels" and found.names == ["from labels"]
    del props["labels"]
    found = names_from_metadata(props)
    assert found is not None and found.key == "names" and found.names == ["person", "bicycle"]
    assert names_from_metadata({"classNames": '["a"]'}).names == ["a"]  # type: ignore[union-attr]
    assert names_from_metadata({"stride": "32", "task": "classify"}) is None
    assert names_from_metadata({}) is None


# From an ONNX file to the offers ------------------------------------------------------------


def classifier(path: Path, classes: int, metadata: dict[str, str]) -> Path:
    weight = numpy_helper.from_array(np.zeros((8, classes), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["logits"])],
        "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        initializer=[weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    helper.set_model_props(model, metadata)
    onnx.save(model, str(path))
    return path


def test_inspect_onnx_reports_the_metadata_as_found(tmp_path: Path) -> None:
    names = str({i: f"class {i}" for i in range(80)})
    info = inspect_onnx(classifier(tmp_path / "m.onnx", 1001, {"stride": "32", "names": names}))
    assert info.metadata_props == {"stride": "32", "names": names}
    found = names_from_metadata(info.metadata_props)
    assert found is not None and found.key == "names" and found.names[79] == "class 79"
    assert inspect_onnx(classifier(tmp_path / "bare.onnx", 10, {})).metadata_props == {}


def test_offers_come_from_the_signature_and_the_stored_summary() -> None:
    sig = signature(("logits", "float32", ["batch", 1001]))
    summary = {"class_names": {"key": "names", "names": ["a", "b"]}}
    assert label_offers(sig, summary) == [
        LabelOffer("imagenet-1k", 1001, output="logits"),
        LabelOffer("model-file", 2, key="names"),
    ]
    assert offered_labels("imagenet-1k", sig, summary)[:2] == ["background", "tench"]  # type: ignore[index]
    assert offered_labels("model-file", sig, summary) == ["a", "b"]
    assert offered_labels("elsewhere", sig, summary) is None
    small = signature(("y", "float32", ["batch", 10]))
    assert label_offers(small, None) == [] and offered_labels("imagenet-1k", small, {}) is None
    # A summary from before names were read, or a tampered one, offers nothing from the file.
    for stored in (None, {}, {"class_names": {"key": "k", "names": [1]}}, {"class_names": []}):
        assert offered_labels("model-file", small, stored) is None

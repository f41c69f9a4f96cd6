"""Tests for model_store.names: names that become paths or config entries."""

from __future__ import annotations

import pytest

from model_store.errors import (
    InvalidFileName,
    InvalidModelName,
    InvalidTensorName,
    InvalidVersion,
    ModelStoreError,
)
from model_store.names import (
    MAX_MODEL_NAME_LENGTH,
    MAX_TENSOR_NAME_LENGTH,
    MAX_VERSION,
    validate_file_name,
    validate_model_name,
    validate_tensor_name,
    validate_version,
)

HOSTILE_MODEL_NAMES = {
    "parent_traversal": "../x",
    "slash": "a/b",
    "backslash": "a\\b",
    "double_quote": 'a"b',
    "single_quote": "a'b",
    "newline": "a\nb",
    "tab": "a\tb",
    "space": "a b",
    "too_long": "a" * 300,
    "empty": "",
    "dot": ".",
    "dot_dot": "..",
    "dot_dot_inside": "a..b",
    "leading_dash": "-rf",
    "leading_dot": ".hidden",
    "leading_underscore": "_x",
    "unicode": "modèle",
    "unicode_lookalike": "m\u043edel",  # a Cyrillic "o"
    "nul": "a\x00b",
    "absolute": "/etc",
    "colon": "c:model",
}


@pytest.mark.parametrize("name", ["a", "resnet50", "my-model_v2.onnx", "A.b-c_d", "9lives"])
def test_it_accepts_plain_model_names(name: str) -> None:
    assert validate_model_name(name) == name


def test_it_accepts_a_name_of_exactly_the_maximum_length() -> None:
    name = "m" * MAX_MODEL_NAME_LENGTH
    assert validate_model_name(name) == name


def test_it_rejects_a_name_one_character_over_the_maximum_length() -> None:
    with pytest.raises(InvalidModelName, match="characters long"):
        validate_model_name("m" * (MAX_MODEL_NAME_LENGTH + 1))


@pytest.mark.parametrize("name", HOSTILE_MODEL_NAMES.values(), ids=HOSTILE_MODEL_NAMES.keys())
def test_it_rejects_hostile_model_names(name: str) -> None:
    with pytest.raises(InvalidModelName) as caught:
        validate_model_name(name)
    assert caught.value.code == "invalid_name"
    assert "Use letters, digits" in caught.value.message


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("../x", "'..'"),
        ("..", "'..'"),
        ("a/b", "path separator"),
        ("a\\b", "path separator"),
        ("", "empty"),
        (".", "does not start with a letter or digit"),
        ("-rf", "does not start with a letter or digit"),
        ("modèle", "non-ASCII"),
        ("a\x00b", "NUL"),
        ("a\nb", "whitespace or control"),
        ('a"b', "'\"'"),
    ],
)
def test_it_says_why_a_model_name_is_rejected(name: str, reason: str) -> None:
    with pytest.raises(InvalidModelName) as caught:
        validate_model_name(name)
    assert reason in caught.value.message


def test_it_shows_hostile_names_escaped_and_short_in_messages() -> None:
    with pytest.raises(InvalidModelName) as caught:
        validate_model_name("x" * 299 + "\n")
    assert "\n" not in caught.value.message
    assert "x" * 100 not in caught.value.message


@pytest.mark.parametrize("value", [None, 3, b"abc", ["a"]])
def test_it_rejects_model_names_that_are_not_text(value: object) -> None:
    with pytest.raises(InvalidModelName, match="must be text"):
        validate_model_name(value)


def test_model_name_errors_are_model_store_errors() -> None:
    with pytest.raises(ModelStoreError):
        validate_model_name("../x")


@pytest.mark.parametrize("name", ["model.onnx", "model.om", "weights.bin", "model.onnx.sha256"])
def test_it_accepts_plain_file_names(name: str) -> None:
    assert validate_file_name(name) == name


@pytest.mark.parametrize("name", ["../model.onnx", "a/b.onnx", ".model.onnx", "", "x\n.onnx"])
def test_it_rejects_unsafe_file_names(name: str) -> None:
    with pytest.raises(InvalidFileName, match="file name"):
        validate_file_name(name)


@pytest.mark.parametrize(
    ("value", "expected"), [(1, 1), ("1", 1), ("42", 42), (MAX_VERSION, MAX_VERSION)]
)
def test_it_accepts_positive_versions(value: int | str, expected: int) -> None:
    assert validate_version(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        0,
        -1,
        "0",
        "007",
        "01",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1.0",
        "",
        "abc",
        "٣",
        MAX_VERSION + 1,
        str(MAX_VERSION + 1),
        "9" * 400,
        True,
        1.0,
        None,
    ],
)
def test_it_rejects_versions_triton_would_not_load(value: object) -> None:
    with pytest.raises(InvalidVersion) as caught:
        validate_version(value)
    assert caught.value.code == "invalid_version"


@pytest.mark.parametrize(
    "name", ["input", 'a"b', "a\\b", "input:0", "x y", "onnx::Gemm_0", "entrée"]
)
def test_it_accepts_tensor_names_that_config_escaping_handles(name: str) -> None:
    assert validate_tensor_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "x\ny",
        "x\ry",
        "x\x00y",
        "x\ty",
        "x\x1by",
        "x\u2028y",
        "n" * (MAX_TENSOR_NAME_LENGTH + 1),
    ],
)
def test_it_rejects_tensor_names_that_are_empty_long_or_unprintable(name: str) -> None:
    with pytest.raises(InvalidTensorName):
        validate_tensor_name(name)


def test_it_accepts_a_tensor_name_of_exactly_the_maximum_length() -> None:
    name = "t" * MAX_TENSOR_NAME_LENGTH
    assert validate_tensor_name(name) == name

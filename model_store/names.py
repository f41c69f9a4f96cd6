"""Checks for names that end up in paths or in config.pbtxt.

Nothing derived from user input is joined to a path before it passes through
this module: model names and file names become directory entries, versions
become Triton version directories.

Example:
    >>> validate_model_name("resnet50-int8")
    'resnet50-int8'
"""

from __future__ import annotations

import re

from model_store.errors import (
    InvalidFileName,
    InvalidModelName,
    InvalidTensorName,
    InvalidVersion,
    ModelStoreError,
)
from model_store.text import Message, say

MAX_MODEL_NAME_LENGTH = 64
MAX_FILE_NAME_LENGTH = 128
MAX_TENSOR_NAME_LENGTH = 256
# Triton stores versions as int64, but 32 bits is plenty and keeps every tool happy.
MAX_VERSION = 2**31 - 1

_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_VERSION_TEXT = re.compile(r"[1-9][0-9]*")
_MODEL_RULES = say(
    "Use letters, digits, '_', '-' and '.', start with a letter or digit, "
    "and keep it to %(limit)s characters.",
    limit=MAX_MODEL_NAME_LENGTH,
)
_FILE_RULES = say(
    "Use letters, digits, '_', '-' and '.', start with a letter or digit, "
    "and keep it to %(limit)s characters.",
    limit=MAX_FILE_NAME_LENGTH,
)


def _shown(value: str) -> str:
    """Quotes a user-supplied value for a message, escaped and cut short."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _unsafe_reason(value: str, max_length: int) -> Message | None:
    """Returns why ``value`` cannot be a single path component, or None if it can."""
    if not value:
        return say("it is empty")
    if len(value) > max_length:
        return say(
            "it is %(length)s characters long (the limit is %(limit)s)",
            length=len(value),
            limit=max_length,
        )
    if "\x00" in value:
        return say("it contains a NUL character")
    if not value.isascii():
        return say("it contains non-ASCII characters")
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        return say("it contains whitespace or control characters")
    if ".." in value:
        return say("it contains '..'")
    if "/" in value or "\\" in value:
        return say("it contains a path separator")
    if not value[0].isalnum():
        return say("it does not start with a letter or digit")
    if not _SAFE_NAME.fullmatch(value):
        bad = sorted({ch for ch in value if not (ch.isalnum() or ch in "_.-")})
        return say("it contains %(characters)s", characters=", ".join(repr(ch) for ch in bad))
    return None


def _check_component(
    value: object, kind: Message, max_length: int, rules: Message, error: type[ModelStoreError]
) -> str:
    """Shared body of the name validators: raise ``error`` with a reason and the rules."""
    if not isinstance(value, str):
        raise error(
            say(
                "The %(kind)s must be text, not %(type)s. %(rules)s",
                kind=kind,
                type=type(value).__name__,
                rules=rules,
            )
        )
    reason = _unsafe_reason(value, max_length)
    if reason:
        raise error(
            say(
                "The %(kind)s %(value)s is not allowed: %(reason)s. %(rules)s",
                kind=kind,
                value=_shown(value),
                reason=reason,
                rules=rules,
            )
        )
    return value


def validate_model_name(name: object) -> str:
    """Checks that ``name`` is a Triton model name that is safe to use as a directory.

    Args:
        name: The candidate name, usually typed by a user.

    Returns:
        The name, unchanged.

    Raises:
        InvalidModelName: If the name is empty, too long, not ASCII, contains
            separators, whitespace, control characters or ``..``, or starts
            with anything other than a letter or digit.
    """
    return _check_component(
        name, say("model name"), MAX_MODEL_NAME_LENGTH, _MODEL_RULES, InvalidModelName
    )


def validate_file_name(name: object) -> str:
    """Checks that ``name`` is a plain file name (one path component, no tricks).

    Args:
        name: A file name to be placed in a version or source directory.

    Returns:
        The name, unchanged.

    Raises:
        InvalidFileName: Under the same rules as model names, with a longer limit.
    """
    return _check_component(
        name, say("file name"), MAX_FILE_NAME_LENGTH, _FILE_RULES, InvalidFileName
    )


def validate_version(version: object) -> int:
    """Checks that ``version`` is a Triton version number and returns it as an int.

    Triton ignores version directories that are not plain integers or that
    start with ``0``, so ``"007"`` is refused rather than silently ignored.

    Args:
        version: An int, or a string of ASCII digits without leading zeros.

    Returns:
        The version as an int between 1 and :data:`MAX_VERSION`.

    Raises:
        InvalidVersion: If it is not such a number.
    """
    rules = say(
        "Versions are whole numbers from 1 to %(max)s, without leading zeros.", max=MAX_VERSION
    )
    if isinstance(version, bool) or not isinstance(version, int | str):
        raise InvalidVersion(
            say(
                "The version must be a number, not %(type)s. %(rules)s",
                type=type(version).__name__,
                rules=rules,
            )
        )
    if isinstance(version, str):
        if not _VERSION_TEXT.fullmatch(version) or len(version) > len(str(MAX_VERSION)):
            raise InvalidVersion(
                say(
                    "The version %(version)s is not allowed. %(rules)s",
                    version=_shown(version),
                    rules=rules,
                )
            )
        version = int(version)
    if not 1 <= version <= MAX_VERSION:
        raise InvalidVersion(
            say("The version %(version)s is out of range. %(rules)s", version=version, rules=rules)
        )
    return version


def validate_tensor_name(name: object) -> str:
    """Checks that ``name`` can be written as a tensor name in config.pbtxt.

    Quotes and backslashes are allowed (ONNX exporters produce them and the
    config writer escapes them); NUL, newlines and other control characters
    are refused because they make configs and logs unreadable.

    Args:
        name: An input or output name, usually read from an ONNX model.

    Returns:
        The name, unchanged.

    Raises:
        InvalidTensorName: If the name is empty, too long or not printable.
    """
    if not isinstance(name, str):
        raise InvalidTensorName(
            say("A tensor name must be text, not %(type)s.", type=type(name).__name__)
        )
    if not name:
        raise InvalidTensorName(say("A tensor name is empty. Give every input and output a name."))
    if len(name) > MAX_TENSOR_NAME_LENGTH:
        raise InvalidTensorName(
            say(
                "The tensor name %(name)s is %(length)s characters long "
                "(the limit is %(limit)s). Rename it in the model.",
                name=_shown(name),
                length=len(name),
                limit=MAX_TENSOR_NAME_LENGTH,
            )
        )
    if not name.isprintable():
        raise InvalidTensorName(
            say(
                "The tensor name %(name)s contains NUL, newline or other control "
                "characters. Rename it in the model before uploading.",
                name=_shown(name),
            )
        )
    return name

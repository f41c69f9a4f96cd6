"""Exceptions raised by the model store.

Every error the store raises derives from :class:`ModelStoreError`, so callers
(the Django layer, Celery tasks) catch one class and turn it into a form error
or an API error. Each class carries a short machine ``code`` and its message
says, in plain words, what is wrong and what to do about it.

Example:
    >>> try:
    ...     raise InvalidModelName("Model name '' is empty. Choose a name.")
    ... except ModelStoreError as exc:
    ...     exc.as_dict()["code"]
    'invalid_name'
"""

from __future__ import annotations

from typing import Any

from model_store.text import Said, as_json


class ModelStoreError(Exception):
    """Base class of every error raised by ``model_store``.

    Attributes:
        code: Short, stable, machine-readable identifier (API clients switch on it).
        message: Plain-words explanation: what is wrong and what to do.
    """

    code: str = "model_store_error"

    def __init__(self, message: Said) -> None:
        super().__init__(message)
        self.message = message

    def as_dict(self) -> dict[str, Any]:
        """Returns the error in the REST API's shape, ``{"error": ..., "code": ...}``.

        A message is given as its JSON (:func:`~model_store.text.as_json`); the web layer says
        it in the caller's language (``webapp.text.localized``).
        """
        return {"error": as_json(self.message), "code": self.code}


class InvalidModelName(ModelStoreError):
    """A model name is not a safe Triton model name."""

    code = "invalid_name"


class InvalidVersion(ModelStoreError):
    """A version number is not a positive integer Triton accepts."""

    code = "invalid_version"


class InvalidFileName(ModelStoreError):
    """A file name inside a version directory is not a plain, safe name."""

    code = "invalid_file_name"


class InvalidConfig(ModelStoreError):
    """A model configuration cannot be parsed or is not self-consistent."""

    code = "invalid_config"


class InvalidTensorName(InvalidConfig):
    """A tensor (input/output) name cannot be used in a model configuration."""

    code = "invalid_tensor_name"


class UnsupportedDataType(ModelStoreError):
    """A data type has no equivalent on the other side (ONNX, numpy or Triton)."""

    code = "unsupported_dtype"


class InvalidModel(ModelStoreError):
    """A model file cannot be read or inspected (not ONNX, truncated, corrupt)."""

    code = "invalid_model"


class UnsafeExternalData(ModelStoreError):
    """An ONNX model points at external data outside its own folder."""

    code = "unsafe_external_data"


class MissingExternalData(UnsafeExternalData):
    """An ONNX model points at an external data file that does not exist.

    A subclass of :class:`UnsafeExternalData` because the model cannot be
    used either way; the distinct code and message tell the user to upload
    the missing file rather than suggesting anything malicious.
    """

    code = "missing_external_data"


class UnsafePath(ModelStoreError):
    """A path would resolve outside the directory it must stay in."""

    code = "unsafe_path"


class StoreConflict(ModelStoreError):
    """The store already holds what the caller wanted to create (e.g. a version)."""

    code = "conflict"


class NotFound(ModelStoreError):
    """The store does not hold what the caller asked for."""

    code = "not_found"

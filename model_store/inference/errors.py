"""The one error an inference request's inputs can raise, with the HTTP status to answer.

A request goes wrong in many small ways (a missing input, a ragged list, a PDF sent as a
photo), and the person who sent it needs to know which input and what to change. Every
problem is therefore an :class:`InferenceInputError` whose ``code`` a program can switch on,
whose ``message`` a person can act on, and whose ``field`` names the input at fault.

Statuses (see :data:`STATUS_BY_CODE`): 413 when something is too big (the same request,
smaller, would work), 415 when a file is not an image we can read, 422 when the request is
well formed but does not fit the model's signature (dtype, shape), 400 for everything else.
"""

from __future__ import annotations

from typing import Any

from model_store.errors import ModelStoreError
from model_store.text import Said

# Chosen once here so every caller answers the same problem with the same status.
STATUS_BY_CODE: dict[str, int] = {
    "bad_format": 400,
    "missing_input": 400,
    "extra_input": 400,
    "bad_base64": 400,
    "bad_npy": 400,
    "bad_preprocess": 400,
    "bad_labels": 400,
    "not_an_image_input": 400,
    "wrong_dtype": 422,
    "wrong_shape": 422,
    "too_large": 413,
    "too_many_elements": 413,
    "image_too_large": 413,
    "not_an_image": 415,
}


class InferenceInputError(ModelStoreError):
    """An inference request's inputs (or its preprocessing, or a labels file) are unusable.

    Attributes:
        code: Machine code, e.g. ``"wrong_shape"``; one of :data:`STATUS_BY_CODE`'s keys.
        message: What was wrong and what to do, in plain words.
        field: The input the problem is about, or None when it is about the whole request.
        status: The HTTP status to answer with.

    Example:
        >>> err = InferenceInputError("Input 'x' is missing.", code="missing_input", field="x")
        >>> err.status, err.as_dict()["field"]
        (400, 'x')
    """

    code: str = "bad_input"

    def __init__(
        self,
        message: Said,
        *,
        code: str,
        field: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        # The base class keeps ``code`` on the class; here it varies per instance.
        self.code = code
        self.field = field
        self.status = status if status is not None else STATUS_BY_CODE.get(code, 400)

    def as_dict(self) -> dict[str, Any]:
        """The REST API's error shape, plus ``"field"`` when the error is about one input."""
        body = super().as_dict()
        if self.field is not None:
            body["field"] = self.field
        return body

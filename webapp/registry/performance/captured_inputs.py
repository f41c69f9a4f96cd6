"""A captured request as the input of a sweep or a tuning run (docs/capture.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from model_store.inference import decode_inputs
from model_store.inference.errors import InferenceInputError
from webapp.errors import HubError
from webapp.registry.capture import actions as capture_actions
from webapp.registry.capture.models import Capture
from webapp.registry.catalogue.models import Version
from webapp.registry.tryit.inference import input_specs, limits, saved_preprocess


def fits(version: Version) -> Any:
    """A check that captured inputs fit ``version``'s inputs (names, dtypes, shapes)."""
    specs = {s.name: s for s in input_specs(version)}

    def check(inputs: dict[str, np.ndarray]) -> bool:
        if set(inputs) != set(specs):
            return False
        try:
            as_arrays(version, inputs)
        except InferenceInputError:
            return False
        return True

    return check


def as_arrays(version: Version, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    payload = {name: array.tolist() for name, array in inputs.items()}
    return decode_inputs(
        input_specs(version), payload, limits(), default_preprocess=saved_preprocess(version.model)
    )


def newest(version: Version) -> int:
    """The newest captured request of the model that fits ``version``; 409 when none."""
    return capture_actions.newest_request_for(version.model, fits(version))


def inputs_of(version: Version, capture_id: int) -> dict[str, np.ndarray]:
    """The inputs of capture ``capture_id`` for ``version``.

    Raises:
        HubError: It was removed since (410), or no longer fits (409).
    """
    capture = Capture.objects.filter(pk=capture_id, model=version.model).first()
    if capture is None:
        raise HubError("The captured request was removed before the run began.", "gone", 410)
    inputs, _ = capture_actions.tensors(capture)
    try:
        return as_arrays(version, inputs)
    except InferenceInputError as exc:
        raise HubError(str(exc), "no_captures", 409) from None

"""Saved Try-it examples: checked like an infer request, and bounded in number and bytes.

An example is an infer request's ``inputs`` kept for one-click reruns. Anyone with the viewer
role may save one, so each is validated against the serving version's signature and the
request budget before it is stored (a saved example is never bigger than a request could
be), and the totals are capped per model and per person. Lists never load the tensors:
they defer the ``inputs`` column, which only a rerun (one example) reads.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Sum

from model_store.inference import decode_inputs
from webapp.errors import HubError
from webapp.registry import inference
from webapp.registry.models import Model, TryExample, Version


def listed(model: Model) -> Any:
    """The model's examples for a list: newest first, without their tensors."""
    return model.examples.defer("inputs").select_related("created_by")


def save(*, model: Model, user: User, name: str, inputs: object, size: int) -> TryExample:
    """Check ``inputs`` against the serving version and the caps; store the example.

    Raises:
        HubError: Nothing serves, or a cap is reached (409).
        InferenceInputError: The inputs do not fit the signature or the request budget.
    """
    version = _serving(model)
    decode_inputs(
        inference.input_specs(version),
        inputs,
        inference.limits(),
        default_preprocess=inference.saved_preprocess(model),
    )
    _check_caps(model, user, size)
    return TryExample.objects.create(
        model=model, name=name, inputs=inputs, size=size, created_by=user
    )


def _serving(model: Model) -> Version:
    version = (
        model.versions.filter(number=model.serving_version).first()
        if model.serving_version is not None
        else None
    )
    if version is None:
        raise HubError(
            f"{model.name} serves no version; an example is checked against the serving one.",
            "not_served",
            409,
        )
    return version


def _check_caps(model: Model, user: User, size: int) -> None:
    per_model = settings.TRY_EXAMPLES_PER_MODEL
    if model.examples.count() >= per_model:
        raise HubError(
            f"{model.name} already has {per_model} saved examples (TRY_EXAMPLES_PER_MODEL); "
            "delete one first.",
            "too_many_examples",
            409,
        )
    per_user = settings.TRY_EXAMPLES_PER_USER
    if TryExample.objects.filter(created_by=user).count() >= per_user:
        raise HubError(
            f"You have saved {per_user} examples across all models (TRY_EXAMPLES_PER_USER); "
            "delete one first.",
            "too_many_examples",
            409,
        )
    budget = settings.TRY_EXAMPLES_BYTES_PER_MODEL
    stored = model.examples.aggregate(total=Sum("size"))["total"] or 0
    if stored + size > budget:
        raise HubError(
            f"{model.name}'s saved examples would take {stored + size:,} bytes; the limit is "
            f"{budget:,} (TRY_EXAMPLES_BYTES_PER_MODEL). Delete a large one first.",
            "examples_too_large",
            409,
        )

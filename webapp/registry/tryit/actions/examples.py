"""Saving and deleting Try it examples.

An example is checked like an infer request against the serving version's signature and the
request budget, and the totals are capped per model and per person (see
``webapp.registry.tryit.examples``). Whoever saved an example, or an operator, may delete it.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Sum
from django.utils.translation import gettext

from model_store.inference import decode_inputs
from webapp.accounts.roles import Role, role_of
from webapp.errors import HubError
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.tryit import inference
from webapp.registry.tryit.models import TryExample


def save_example(*, model: Model, user: User, name: str, inputs: object, size: int) -> TryExample:
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
            gettext("%(model)s serves no version; an example is checked against the serving one.")
            % {"model": model.name},
            "not_served",
            409,
        )
    return version


def _check_caps(model: Model, user: User, size: int) -> None:
    per_model = settings.TRY_EXAMPLES_PER_MODEL
    if model.examples.count() >= per_model:
        raise HubError(
            gettext(
                "%(model)s already has %(max)s saved examples (TRY_EXAMPLES_PER_MODEL); "
                "delete one first."
            )
            % {"model": model.name, "max": per_model},
            "too_many_examples",
            409,
        )
    per_user = settings.TRY_EXAMPLES_PER_USER
    if TryExample.objects.filter(created_by=user).count() >= per_user:
        raise HubError(
            gettext(
                "You have saved %(max)s examples across all models (TRY_EXAMPLES_PER_USER); "
                "delete one first."
            )
            % {"max": per_user},
            "too_many_examples",
            409,
        )
    budget = settings.TRY_EXAMPLES_BYTES_PER_MODEL
    stored = model.examples.aggregate(total=Sum("size"))["total"] or 0
    if stored + size > budget:
        raise HubError(
            gettext(
                "%(model)s's saved examples would take %(bytes)s bytes; the limit is "
                "%(limit)s (TRY_EXAMPLES_BYTES_PER_MODEL). Delete a large one first."
            )
            % {"model": model.name, "bytes": f"{stored + size:,}", "limit": f"{budget:,}"},
            "examples_too_large",
            409,
        )


def delete_example(*, example: TryExample, user: User) -> None:
    """Delete ``example``: its author may, and so may an operator."""
    if example.created_by_id != user.pk and role_of(user) < Role.OPERATOR:
        raise HubError(
            gettext("Only the person who saved an example, or an operator, may delete it."),
            "forbidden",
            403,
        )
    example.delete()

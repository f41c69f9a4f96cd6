"""Creating a model."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from model_store.errors import ModelStoreError
from model_store.names import validate_model_name
from webapp import live
from webapp.errors import HubError
from webapp.registry.models import Model, Target


def create_model(*, name: str, target: str, description: str, user: User) -> Model:
    try:
        name = validate_model_name(name)
    except ModelStoreError as exc:
        raise HubError(str(exc), "invalid_name") from exc
    if target not in Target.values:
        raise HubError(
            f"Unknown target {target!r}; choose one of {', '.join(Target.values)}.",
            "invalid_target",
        )
    if len(description) > 2000:
        raise HubError("The description is longer than 2000 characters.", "invalid_description")
    try:
        with transaction.atomic():
            model = Model.objects.create(
                name=name, target=target, description=description, created_by=user
            )
    except IntegrityError:
        raise HubError(
            f"A model named {name!r} exists already; pick another name or upload a new version.",
            "name_taken",
            409,
        ) from None
    transaction.on_commit(lambda: live.publish("models", {"created": model.name}))
    return model

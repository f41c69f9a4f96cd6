"""Loading the objects an API path names, or a JSON 404 that says what was not found."""

from __future__ import annotations

from webapp.errors import HubError
from webapp.registry.models import Model, Version


def model_or_404(name: str) -> Model:
    model = Model.objects.select_related("created_by").filter(name=name).first()
    if model is None:
        raise HubError(f"There is no model named {name!r}.", "not_found", 404)
    return model


def version_or_404(name: str, number: int) -> Version:
    version = (
        Version.objects.filter(model__name=name, number=number).select_related("model").first()
    )
    if version is None:
        raise HubError(f"{name} has no version {number}.", "not_found", 404)
    return version

"""Loading the objects an API path names, or a JSON 404 that says what was not found."""

from __future__ import annotations

from django.utils.translation import gettext

from webapp.errors import HubError
from webapp.registry.catalogue.models import Model, Version


def model_or_404(name: str) -> Model:
    model = Model.objects.select_related("created_by", "owner").filter(name=name).first()
    if model is None:
        retired = Model.all_objects.filter(name=name).exclude(retired_at=None).exists()
        # Translated for the request's Accept-Language; the code stays "not_found".
        hint = (
            gettext(" (it was retired: GET /api/v1/models?retired=true lists it)")
            if retired
            else ""
        )
        message = gettext("There is no model named %(name)s%(hint)s.")
        raise HubError(message % {"name": repr(name), "hint": hint}, "not_found", 404)
    return model


def version_or_404(name: str, number: int) -> Version:
    version = (
        Version.objects.filter(model__name=name, model__retired_at=None, number=number)
        .select_related("model")
        .first()
    )
    if version is None:
        message = gettext("%(name)s has no version %(number)s.")
        raise HubError(message % {"name": name, "number": number}, "not_found", 404)
    return version

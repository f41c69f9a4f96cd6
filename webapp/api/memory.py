"""``GET /api/v1/models/{name}/memory-estimate``: will it fit before instances or batch go up."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from webapp.api.decorators import api_view
from webapp.api.errors import ApiError
from webapp.api.lookups import model_or_404, version_or_404
from webapp.registry.memory import MAX_BATCH, MAX_INSTANCES, memory_estimate
from webapp.registry.models import Model, Version


def _query_int(request: HttpRequest, name: str, low: int, high: int) -> int | None:
    raw = request.GET.get(name, "").strip()
    if not raw:
        return None
    try:
        number = int(raw)
    except ValueError:
        raise ApiError(f"{name} must be a whole number, not {raw!r}.", "invalid_query") from None
    if not low <= number <= high:
        raise ApiError(f"{name} must be between {low} and {high}.", "invalid_query")
    return number


def _default_version(model: Model) -> Version:
    """The serving version, else the newest packaged one, else the newest."""
    versions = model.versions.select_related("model")
    if model.serving_version is not None:
        serving = versions.filter(number=model.serving_version).first()
        if serving is not None:
            return serving
    found = (
        versions.filter(status=Version.Status.READY).order_by("-number").first()
        or versions.order_by("-number").first()
    )
    if found is None:
        raise ApiError(f"{model.name} has no versions yet; upload one first.", "not_found", 404)
    return found


@api_view("GET")
def memory_estimate_view(request: HttpRequest, name: str) -> dict[str, Any]:
    instances = _query_int(request, "instances", 1, MAX_INSTANCES)
    max_batch = _query_int(request, "max_batch", 0, MAX_BATCH)
    number = _query_int(request, "version", 1, 2**31 - 1)
    model = model_or_404(name)
    version = version_or_404(name, number) if number is not None else _default_version(model)
    if not version.signature:
        raise ApiError(
            f"{name} v{version.number} has not been validated yet, so its size is unknown; "
            "wait for its compile job.",
            "not_ready",
            409,
        )
    return memory_estimate(version, instances=instances, max_batch=max_batch)

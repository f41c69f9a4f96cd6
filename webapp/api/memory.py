"""``GET /api/v1/models/{name}/memory-estimate``: will it fit before instances or batch go up."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.translation import gettext
from ninja import Query, Router

from webapp.api import types
from webapp.api.app import errors
from webapp.api.lookups import model_or_404, version_or_404
from webapp.errors import HubError
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.serving.memory import memory_estimate
from webapp.text import localized

router = Router(tags=["versions"], exclude_unset=True)


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
        message = gettext("%(name)s has no versions yet; upload one first.")
        raise HubError(message % {"name": model.name}, "not_found", 404)
    return found


@router.get(
    "/models/{name}/memory-estimate",
    response={200: types.MemoryEstimate, **errors(400, 404, 409)},
    url_name="api-memory-estimate",
    summary="Memory a version needs at an instance count and batch size",
    description="Memory a version needs at an instance count and batch size (copies x "
    "(weights + activations per sample x batch)), compared with each NPU's free memory "
    "(Ascend targets) or this host's (onnxruntime); 'warning' is set when it would not fit. "
    "409 before the version is validated.",
)
def memory_estimate_view(request: HttpRequest, name: str, query: Query[types.MemoryQuery]) -> Any:
    model = model_or_404(name)
    if query.version is not None:
        version = version_or_404(name, query.version)
    else:
        version = _default_version(model)
    if not version.signature:
        message = gettext(
            "%(name)s v%(number)s has not been validated yet, so its size is unknown; "
            "wait for its compile job."
        )
        raise HubError(
            message % {"name": name, "number": version.number},
            "not_ready",
            409,
        )
    estimate = memory_estimate(version, instances=query.instances, max_batch=query.max_batch)
    return localized(estimate)

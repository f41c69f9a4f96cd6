"""API: health, server, devices, models (list, create, show, edit, retire), this API's own
document; Django's error views."""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import urlencode

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext
from ninja import Query, Router, Status

from webapp.accounts.auth import is_api_request
from webapp.api import types
from webapp.api.app import OPERATOR, errors, openapi_document, public
from webapp.api.lookups import model_or_404
from webapp.api.serving import LOCATION
from webapp.errors import json_error
from webapp.ops.health import run_checks
from webapp.ops.server_state import devices_summary, triton_summary
from webapp.registry.catalogue.actions.models import create_model, edit_model, request_retire
from webapp.registry.catalogue.listing import CatalogueQuery, find_models
from webapp.registry.serving.rollout import per_node

router = Router(tags=["server"], exclude_unset=True)


@router.get(
    "/health",
    response={200: types.Health, 503: types.Unhealthy},
    url_name="api-health",
    summary="Web, database, broker, workers and Triton: each ok or the reason",
)
def health(request: HttpRequest) -> Any:
    checks = run_checks()
    ok = all(c["ok"] for c in checks.values())
    body: dict[str, Any] = {"status": "ok" if ok else "failing", "checks": checks}
    if not ok:
        failing = ", ".join(name for name, c in checks.items() if not c["ok"])
        body["error"] = gettext("Not healthy: %(failing)s.") % {"failing": failing}
        body["code"] = "unhealthy"
    return Status(200 if ok else 503, body)


@router.get(
    "/health/live",
    response=types.Live,
    auth=None,
    url_name="api-health-live",
    summary="Liveness of the web process only; needs no authentication",
    openapi_extra={"security": []},
)
@public
def health_live(request: HttpRequest) -> Any:
    """Liveness for load balancers and container health checks: no auth, no dependencies."""
    return {"status": "ok"}


@router.get(
    "/server",
    response=types.Server,
    url_name="api-server",
    summary="Triton metadata, repository index, devices",
)
def server(request: HttpRequest) -> Any:
    return {"triton": triton_summary(), "devices": devices_summary()}


@router.get(
    "/devices",
    response=types.Devices,
    url_name="api-devices",
    summary="Ascend NPUs (npu-smi), or why there are none",
)
def devices(request: HttpRequest) -> Any:
    return devices_summary()


LIST_HEADERS = {
    "Link": {
        "description": 'RFC 8288: <...>; rel="next" (and "prev") when there are more pages',
        "schema": {"type": "string"},
    },
    "X-Total-Count": {
        "description": "How many models match, on every page",
        "schema": {"type": "integer"},
    },
}


@router.get(
    "/models",
    response={200: types.ModelList, **errors(400)},
    url_name="api-models",
    summary="List models: filter, sort, page (Link and X-Total-Count headers)",
    openapi_extra={"x-responses": {"200": {"headers": LIST_HEADERS}}},
)
def models(request: HttpRequest, query: Query[types.ModelListQuery]) -> Any:
    """The catalogue, 500 models a page unless ``per_page`` says otherwise; retired models
    only with ``retired=true``. Follow ``Link: <...>; rel="next"`` for the next page."""
    page = find_models(CatalogueQuery(**query.dict()))
    response = JsonResponse({"models": [m.to_dict() for m in page.models]})
    response["X-Total-Count"] = str(page.total)
    links = []
    base = request.build_absolute_uri(reverse("api-models"))
    default = types.ModelListQuery.model_fields["per_page"].default
    if page.has_next:
        links.append((page.query.params(default, page=page.query.page + 1), "next"))
    if page.has_previous:
        links.append((page.query.params(default, page=page.query.page - 1), "prev"))
    if links:
        response["Link"] = ", ".join(f'<{base}?{urlencode(p)}>; rel="{rel}"' for p, rel in links)
    return response


@router.post(
    "/models",
    response={201: types.ModelOut, **errors(400, 409)},
    auth=OPERATOR,
    summary="Create a model (operator)",
)
def model_create(request: HttpRequest, data: types.ModelIn) -> Any:
    model = create_model(
        name=data.name,
        target=data.target,
        description=data.description,
        user=request.user,  # type: ignore[arg-type]
    )
    return Status(201, model.to_dict())


@router.get(
    "/models/{name}",
    response={200: types.ModelDetail, **errors(404)},
    url_name="api-model",
    summary="Model detail",
)
def model_detail(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)
    return model.to_dict(versions=True) | per_node(model)


@router.patch(
    "/models/{name}",
    response={200: types.ModelOut, **errors(400, 404)},
    auth=OPERATOR,
    summary="Edit a model's description, tags or owner (operator)",
)
def model_edit(request: HttpRequest, name: str, data: types.ModelPatchIn) -> Any:
    given = data.model_fields_set
    model = edit_model(
        model=model_or_404(name),
        user=request.user,  # type: ignore[arg-type]
        description=data.description if "description" in given else None,
        tags=data.tags if "tags" in given else None,
        # "owner": null clears the owner, as "" does; a key left out keeps it.
        owner=(data.owner or "") if "owner" in given else None,
    )
    return model.to_dict()


@router.delete(
    "/models/{name}",
    response={202: types.Accepted, **errors(400, 403, 404, 409)},
    auth=OPERATOR,
    summary="Retire a model: unload, remove from the repository, keep its history (operator)",
    openapi_extra={"x-responses": {"202": {"headers": LOCATION}}},
)
def model_retire(request: HttpRequest, name: str, query: Query[types.RetireQuery]) -> Any:
    """202 with the job at once; the model is retired when the job succeeds. A serving model
    needs ``confirm_serving=true``; ``purge_sources=true`` (admin) deletes its sources too."""
    job = request_retire(
        model=model_or_404(name),
        user=request.user,  # type: ignore[arg-type]
        purge_sources=query.purge_sources,
        confirm_serving=query.confirm_serving,
        reason=query.reason,
    )
    url = reverse("api-job", args=[job.uuid])
    body = {"job": str(job.uuid), "state": job.state, "url": url, "kind": job.kind}
    return JsonResponse(body, status=202, headers={"Location": url})


@router.get("/schema", response=dict[str, Any], url_name="api-schema", summary="This document")
def schema(request: HttpRequest) -> Any:
    return JsonResponse(openapi_document())


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_request(request):
        message = gettext("No API endpoint at %(path)s.") % {"path": request.path}
        return json_error(message, "not_found", 404)
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    # Django calls this inside its ``except`` block: the exception is still at hand. A lost
    # database (restarted, unreachable) is no bug but a wait: 503 with Retry-After, saying so
    # (tests/faults/test_database_restart.py).
    if isinstance(sys.exc_info()[1], OperationalError | InterfaceError):
        message = gettext("The database is not reachable right now; try again in a few seconds.")
        if is_api_request(request):
            return json_error(message, "database_unavailable", 503, {"Retry-After": "5"})
        response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = "5"
        return response
    if is_api_request(request):
        message = gettext("The server hit an unexpected error; it is logged.")
        return json_error(message, "server_error", 500)
    return render(request, "500.html", status=500)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    if is_api_request(request):
        return json_error(
            gettext(
                "CSRF check failed: send the csrftoken cookie's value as X-CSRFToken, "
                "or authenticate with 'Authorization: Token <key>'."
            ),
            "csrf_failed",
            403,
        )
    return render(request, "403_csrf.html", {"reason": reason}, status=403)

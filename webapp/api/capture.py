"""Capture over the API: a model's capture settings, its captured requests, their export.

Anyone with a role reads the settings and the counts (``GET .../capture``); the captured
requests themselves hold real callers' data, so listing, exporting, deleting and keeping one
as an example need an operator. docs/capture.md.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext
from ninja import Query, Router, Schema, Status
from pydantic import Field

from webapp.api import types
from webapp.api.app import OPERATOR, errors
from webapp.api.lookups import model_or_404
from webapp.errors import HubError
from webapp.registry.capture import actions
from webapp.registry.capture.models import Capture
from webapp.registry.catalogue.models import Model
from webapp.registry.tryit.actions import examples as example_actions

router = Router(tags=["capture"], exclude_unset=True)
MAX_PAGE = 500


@router.get(
    "/models/{name}/capture",
    response={200: types.CaptureOut, **errors(404)},
    url_name="api-capture",
    summary="The model's capture settings, how many captures are kept, and what was not "
    "captured and why",
)
def capture_show(request: HttpRequest, name: str) -> Any:
    return actions.summary(model_or_404(name))


@router.put(
    "/models/{name}/capture",
    response={200: types.CaptureOut, **errors(400, 404, 409)},
    auth=OPERATOR,
    summary="Set the model's capture (operator): omitted fields take their defaults (on, "
    "100%, 1,000 items, 1 GiB, 168 hours); 409 when it serves nothing",
)
def capture_set(request: HttpRequest, name: str, data: types.CapturePolicyIn) -> Any:
    model = model_or_404(name)
    actions.set_policy(
        model,
        actions.PolicyIn(
            enabled=data.enabled,
            sample_rate=data.sample_rate,
            max_items=data.max_items,
            max_bytes=data.max_bytes,
            retention_hours=data.retention_hours,
        ),
        request.user,  # type: ignore[arg-type]
    )
    return actions.summary(model)


class CaptureQuery(Schema):
    version: int | None = Field(None, description="Only captures answered by this version")
    since: datetime | None = Field(None, description="Only captures at or after this time")
    until: datetime | None = Field(None, description="Only captures before this time")
    limit: int = Field(50, description=f"Captures per page, 1 to {MAX_PAGE}")
    offset: int = Field(0, description="Captures to skip (the newest first)")


def _filters(query: CaptureQuery) -> actions.Filters:
    return actions.Filters(version=query.version, since=query.since, until=query.until)


@router.get(
    "/models/{name}/captures",
    response={200: types.CaptureList, **errors(400, 404)},
    auth=OPERATOR,
    url_name="api-captures",
    summary="The captured requests, newest first, metadata only (operator): paged, filtered "
    "by version and time",
)
def captures_list(request: HttpRequest, name: str, query: Query[CaptureQuery]) -> Any:
    model = model_or_404(name)
    if not 1 <= query.limit <= MAX_PAGE or query.offset < 0:
        raise HubError(
            gettext("'limit' must be from 1 to %(max)s and 'offset' 0 or more.")
            % {"max": MAX_PAGE},
            "invalid_field",
        )
    found = actions.matching(model, _filters(query))
    count = found.count()
    page = list(found[query.offset : query.offset + query.limit])
    following = query.offset + len(page)
    next_url = None
    if following < count:
        params = {k: v for k, v in request.GET.items() if k not in ("offset", "limit")}
        params |= {"limit": str(query.limit), "offset": str(following)}
        next_url = request.build_absolute_uri(f"{request.path}?{urlencode(params)}")
    return {"captures": [actions.to_dict(c) for c in page], "count": count, "next": next_url}


@router.get(
    "/models/{name}/captures.npz",
    response={200: None, **errors(400, 404, 409)},
    auth=OPERATOR,
    url_name="api-captures-npz",
    summary="The matching captures as one .npz (operator): inputs.<name> and outputs.<name> "
    "joined along the first axis, capture_ids, versions, rows; 409 when none match",
    openapi_extra={
        "responses": {
            "200": {"description": "NumPy .npz", "content": {"application/octet-stream": {}}}
        }
    },
)
def captures_export(request: HttpRequest, name: str, query: Query[CaptureQuery]) -> HttpResponse:
    model = model_or_404(name)
    data, count = actions.export_npz(model, _filters(query))
    response = HttpResponse(data, content_type="application/octet-stream")
    response["Content-Disposition"] = f'attachment; filename="{model.name}-captures.npz"'
    response["X-Captures"] = str(count)
    return response


@router.delete(
    "/models/{name}/captures",
    response={200: dict[str, int], **errors(404)},
    auth=OPERATOR,
    summary="Remove every capture of the model, rows and files (operator); how many",
)
def captures_purge(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)
    return {"removed": actions.purge(model, request.user)}  # type: ignore[arg-type]


def _capture(model: Model, capture_id: int) -> Capture:
    capture = Capture.objects.filter(model=model, pk=capture_id).select_related("model").first()
    if capture is None:
        raise HubError(
            gettext("%(model)s has no capture %(id)s.") % {"model": model.name, "id": capture_id},
            "not_found",
            404,
        )
    return capture


@router.get(
    "/models/{name}/captures/{int:capture_id}",
    response={200: types.CaptureItem, **errors(404)},
    auth=OPERATOR,
    url_name="api-capture-item",
    summary="One captured request's metadata (operator)",
)
def capture_item(request: HttpRequest, name: str, capture_id: int) -> Any:
    return actions.to_dict(_capture(model_or_404(name), capture_id))


@router.delete(
    "/models/{name}/captures/{int:capture_id}",
    response={204: None, **errors(404)},
    auth=OPERATOR,
    summary="Remove one capture (operator)",
)
def capture_delete(request: HttpRequest, name: str, capture_id: int) -> HttpResponse:
    actions.delete([_capture(model_or_404(name), capture_id)])
    return HttpResponse(status=204)


@router.post(
    "/models/{name}/captures/{int:capture_id}/example",
    response={201: types.ExampleOut, **errors(400, 404, 409, 410, 422)},
    auth=OPERATOR,
    url_name="api-capture-example",
    summary="Keep a capture's inputs as a saved Try it example (operator)",
)
def capture_to_example(
    request: HttpRequest, name: str, capture_id: int, data: types.ExampleFromCaptureIn
) -> Any:
    model = model_or_404(name)
    capture = _capture(model, capture_id)
    label = data.name.strip()[:80]
    if not label:
        raise HubError(gettext("Give the example a name."), "invalid_field")
    example = example_actions.save_example(
        model=model,
        user=request.user,  # type: ignore[arg-type]
        name=label,
        inputs=actions.as_example_inputs(capture),
        size=capture.size,
    )
    return Status(201, example.to_dict(inputs=False))

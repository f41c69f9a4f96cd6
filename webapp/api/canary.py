"""Canary releases over the API: start one, follow it, promote it now, abort it.

``POST /models/{name}/canary`` answers 202 with the canary (``Location``: where to follow
it); a worker loads the candidate beside the serving version, then sends it each step's
share of the calls that name no version and decides by the numbers
(webapp/registry/serving/canary.py). docs/canary.md.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from ninja import Router

from model_store.text import say
from webapp.api import types
from webapp.api.app import OPERATOR, errors
from webapp.api.lookups import model_or_404
from webapp.errors import HubError
from webapp.registry.serving import canary_traffic
from webapp.registry.serving.actions import canary as canary_actions
from webapp.registry.serving.models import Canary
from webapp.text import localized

router = Router(tags=["canary"], exclude_unset=True)

LOCATION = {"Location": {"description": "Where to follow it", "schema": {"type": "string"}}}


def canary_answer(canary: Canary) -> dict[str, Any]:
    """The canary as the API and the page's panel show it, with the step's live numbers."""
    answer = canary.to_dict()
    if canary.state == Canary.State.RUNNING:
        answer["live"] = canary_traffic.live(
            canary.window(),
            canary.candidate,
            canary.baseline,
            model=canary.model.name,
            since=canary.step_started,
        )
    return answer


def _accepted(name: str, canary: Canary) -> HttpResponse:
    url = reverse("api-canary", args=[name])
    response = JsonResponse(localized(canary_answer(canary)), status=202)
    response["Location"] = url
    return response


@router.get(
    "/models/{name}/canary",
    response={200: types.CanaryOut, **errors(404)},
    url_name="api-canary",
    summary="The model's newest canary: its state, the candidate's share now, each decision "
    "with its numbers, and this step's live numbers",
)
def canary_show(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)
    canary = canary_actions.latest_canary(model)
    if canary is None:
        raise HubError(say("%(model)s has had no canary.", model=model.name), "no_canary", 404)
    return canary_answer(canary)


@router.post(
    "/models/{name}/canary",
    response={202: types.CanaryOut, **errors(400, 404, 409)},
    auth=OPERATOR,
    summary="Start a canary of a packaged version: each step sends its share of the calls "
    "that name no version to it, and a failed gate rolls it back (operator); 202 with it",
    openapi_extra={"x-responses": {"202": {"headers": LOCATION}}},
)
def canary_start(request: HttpRequest, name: str, data: types.CanaryIn) -> HttpResponse:
    model = model_or_404(name)
    canary = canary_actions.start_canary(
        model=model,
        version=data.version,
        steps=data.steps,
        step_seconds=data.step_seconds,
        max_error_rate=data.max_error_rate,
        max_p99_ratio=data.max_p99_ratio,
        min_requests=data.min_requests,
        user=request.user,  # type: ignore[arg-type]
    )
    return _accepted(name, canary)


@router.post(
    "/models/{name}/canary/promote",
    response={202: types.CanaryOut, **errors(404, 409)},
    auth=OPERATOR,
    url_name="api-canary-promote",
    summary="Promote the running canary now, skipping its remaining steps (operator)",
)
def canary_promote(request: HttpRequest, name: str) -> HttpResponse:
    model = model_or_404(name)
    canary = canary_actions.promote_now(model=model, user=request.user)  # type: ignore[arg-type]
    return _accepted(name, canary)


@router.post(
    "/models/{name}/canary/abort",
    response={202: types.CanaryOut, **errors(404, 409)},
    auth=OPERATOR,
    url_name="api-canary-abort",
    summary="Abort the running canary: no more calls go to the candidate, which is then "
    "unloaded; the serving version stays as it was (operator)",
)
def canary_abort(request: HttpRequest, name: str) -> HttpResponse:
    model = model_or_404(name)
    canary = canary_actions.abort(model=model, user=request.user)  # type: ignore[arg-type]
    return _accepted(name, canary)

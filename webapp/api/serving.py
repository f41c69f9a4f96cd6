"""API for serving: switch, roll back, load, unload, compare, history.

A state change answers 202 at once with its job (``url``, also in ``Location``); follow it at
``GET /api/v1/jobs/{id}``. Scripts that want the old blocking answer add ``?wait=true``: the
call then returns when the version is READY (200) or the switch failed (409), waiting at most
``SERVE_WAIT_SECONDS`` (then 202 with ``code: pending``), and counts as a slow request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.utils.translation import gettext
from ninja import Query, Router

from webapp import slow_requests
from webapp.api import types
from webapp.api.app import OPERATOR, RETRY_AFTER, errors
from webapp.api.lookups import model_or_404
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.models import Event, Job
from webapp.registry.serving.actions import switch as serving
from webapp.text import localize

router = Router(tags=["serving"], exclude_unset=True)

LOCATION = {"Location": {"description": "The job's URL", "schema": {"type": "string"}}}
#: Every state change: 202 at once, or with ?wait=true the outcome (200/409) or 202 pending.
SWITCH_RESPONSES = {
    200: types.Finished,
    202: types.Accepted,
    409: types.FailedSwitch | types.Error,
    **errors(400, 404, 429, 503),
}
SWITCH_DOC = {
    "x-responses": {
        "202": {"headers": LOCATION},
        "429": {"headers": RETRY_AFTER},
        "503": {"headers": RETRY_AFTER},
    }
}


def _state_change(
    path: str, url_name: str, summary: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The route of one state change: operators only, answered as :func:`_answer` does."""
    return router.post(
        path,
        response=SWITCH_RESPONSES,
        auth=OPERATOR,
        url_name=url_name,
        summary=summary,
        openapi_extra=SWITCH_DOC,
    )


def _wants_to_wait(wait: types.WaitQuery) -> bool:
    return wait.wait.lower() in ("1", "true", "yes")


def _accepted(job: Job) -> HttpResponse:
    """202: the job is queued; its URL says how it goes."""
    url = reverse("api-job", args=[job.uuid])
    body = {"job": str(job.uuid), "state": job.state, "url": url, "kind": job.kind}
    response = JsonResponse(body, status=202)
    response["Location"] = url
    return response


def _answer(request: HttpRequest, job: Job, wait: types.WaitQuery) -> HttpResponse:
    """202 with the job at once; with ``?wait=true`` the outcome, as before (bounded)."""
    if not _wants_to_wait(wait):
        return _accepted(job)
    with slow_requests.slow_request(str(request.user.pk), longest_s=settings.SERVE_WAIT_SECONDS):
        return _finished(serving.wait_for(job, timeout_s=settings.SERVE_WAIT_SECONDS))


def _finished(job: Job) -> HttpResponse:
    """The job's outcome: 200 when it succeeded, 409 when it failed, 202 if still running."""
    model = Model.objects.get(pk=job.model_id)
    body: dict[str, Any] = {
        "job": str(job.uuid),
        "state": job.state,
        "url": reverse("api-job", args=[job.uuid]),
        "serving_version": model.serving_version,
        "previous_version": model.previous_version,
        "log": [line.text for line in job.log_lines.order_by("seq")],
    }
    if job.state == Job.State.SUCCEEDED:
        return JsonResponse(body)
    if not job.is_finished:
        body |= {"error": gettext("Still running; follow the job."), "code": "pending"}
        return JsonResponse(body, status=202)
    body |= {"error": localize(job.error), "code": job.error_code or "failed"}
    return JsonResponse(body, status=409)


@_state_change(
    "/models/{name}/serve",
    "api-serve",
    "Switch to a version (202 with its job; ?wait=true: 200 READY or 409 failed, the "
    "old one keeps serving). Breaking interface changes need confirm_breaking.",
)
def serve(
    request: HttpRequest, name: str, data: types.ServeIn, wait: Query[types.WaitQuery]
) -> Any:
    job = serving.request_switch(
        model=model_or_404(name),
        number=data.version,
        user=request.user,  # type: ignore[arg-type]
        reason=data.reason,
        confirm_breaking=data.confirm_breaking,
        rollout=data.rollout,
    )
    return _answer(request, job, wait)


@_state_change("/models/{name}/rollback", "api-rollback", "Back to the version that served before")
def rollback(
    request: HttpRequest, name: str, data: types.RollbackIn, wait: Query[types.WaitQuery]
) -> Any:
    job = serving.request_rollback(
        model=model_or_404(name),
        user=request.user,  # type: ignore[arg-type]
        reason=data.reason,
        rollout=data.rollout,
    )
    return _answer(request, job, wait)


@_state_change(
    "/models/{name}/compare",
    "api-compare",
    "Load version N beside the serving one so both answer (Try it compares them); "
    "{version: null} unloads it again (operator). Not for npu_ge",
)
def compare(
    request: HttpRequest, name: str, data: types.CompareIn, wait: Query[types.WaitQuery]
) -> Any:
    job = serving.request_compare(
        model=model_or_404(name),
        number=data.version,
        user=request.user,  # type: ignore[arg-type]
    )
    return _answer(request, job, wait)


@_state_change("/models/{name}/unload", "api-unload", "Unload from Triton (clients then fail)")
def unload(
    request: HttpRequest, name: str, data: types.Reason, wait: Query[types.WaitQuery]
) -> Any:
    job = serving.request_unload(model=model_or_404(name), user=request.user, reason=data.reason)  # type: ignore[arg-type]
    return _answer(request, job, wait)


@_state_change("/models/{name}/load", "api-load", "Load the serving version again")
def load(request: HttpRequest, name: str, data: types.Reason, wait: Query[types.WaitQuery]) -> Any:
    job = serving.request_load(model=model_or_404(name), user=request.user, reason=data.reason)  # type: ignore[arg-type]
    return _answer(request, job, wait)


@router.get(
    "/models/{name}/history",
    response={200: types.History, **errors(404)},
    url_name="api-history",
    summary="Who switched what, when, why, with evidence",
)
def history(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)
    rows = Event.objects.filter(model=model).select_related("model", "version", "actor")[:500]
    return {"model": model.name, "events": [e.to_dict() for e in rows]}


@router.get("/audit", response=types.Audit, url_name="api-audit", summary="Every event")
def audit(request: HttpRequest) -> Any:
    rows = Event.objects.select_related("model", "version", "actor")[:500]
    return {"events": [e.to_dict() for e in rows]}


@router.put(
    "/models/{name}/placement",
    response=SWITCH_RESPONSES,
    auth=OPERATOR,
    url_name="api-placement",
    summary='Where the model serves: {"nodes": [...]} or {"labels": {...}} ({} labels: every '
    "node); 202 with the job that places the serving version where it is missing and unloads "
    "it where no longer named (?wait=true: its outcome)",
    openapi_extra=SWITCH_DOC,
)
def placement(
    request: HttpRequest, name: str, data: types.PlacementIn, wait: Query[types.WaitQuery]
) -> Any:
    job = serving.request_placement(
        model=model_or_404(name),
        body=data.model_dump(exclude_unset=True),
        user=request.user,  # type: ignore[arg-type]
    )
    return _answer(request, job, wait)

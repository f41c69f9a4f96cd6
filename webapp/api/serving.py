"""API for serving: switch, roll back, load, unload, compare, history.

A state change answers 202 at once with its job (``url``, also in ``Location``); follow it at
``GET /api/v1/jobs/{id}``. Scripts that want the old blocking answer add ``?wait=true``: the
call then returns when the version is READY (200) or the switch failed (409), waiting at most
``SERVE_WAIT_SECONDS`` (then 202 with ``code: pending``), and counts as a slow request.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse

from webapp import slow_requests
from webapp.accounts.roles import Role
from webapp.api.decorators import api_view, field, json_body
from webapp.api.lookups import model_or_404
from webapp.registry import serving
from webapp.registry.models import Event, Job, Model


def _wants_to_wait(request: HttpRequest) -> bool:
    return request.GET.get("wait", "").lower() in ("1", "true", "yes")


def _accepted(job: Job) -> HttpResponse:
    """202: the job is queued; its URL says how it goes."""
    url = reverse("api-job", args=[job.uuid])
    body = {"job": str(job.uuid), "state": job.state, "url": url, "kind": job.kind}
    response = JsonResponse(body, status=202)
    response["Location"] = url
    return response


def _answer(request: HttpRequest, job: Job) -> HttpResponse:
    """202 with the job at once; with ``?wait=true`` the outcome, as before (bounded)."""
    if not _wants_to_wait(request):
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
        body |= {"error": "Still running; follow the job.", "code": "pending"}
        return JsonResponse(body, status=202)
    body |= {"error": job.error, "code": job.error_code or "failed"}
    return JsonResponse(body, status=409)


@api_view("POST", role=Role.OPERATOR)
def serve(request: HttpRequest, name: str) -> HttpResponse:
    data = json_body(request)
    job = serving.request_switch(
        model=model_or_404(name),
        number=field(data, "version", int),
        user=request.user,  # type: ignore[arg-type]
        reason=field(data, "reason", str, default="", max_len=500),
        confirm_breaking=field(data, "confirm_breaking", bool, default=False),
    )
    return _answer(request, job)


@api_view("POST", role=Role.OPERATOR)
def compare(request: HttpRequest, name: str) -> HttpResponse:
    """Load a version beside the serving one ({"version": N}), or drop it ({"version": null})."""
    data = json_body(request)
    number = data.get("version")
    if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
        return JsonResponse(
            {"error": "'version' must be a version number or null.", "code": "invalid_field"},
            status=400,
        )
    job = serving.request_compare(
        model=model_or_404(name),
        number=number,
        user=request.user,  # type: ignore[arg-type]
    )
    return _answer(request, job)


@api_view("POST", role=Role.OPERATOR)
def rollback(request: HttpRequest, name: str) -> HttpResponse:
    data = json_body(request)
    job = serving.request_rollback(
        model=model_or_404(name),
        user=request.user,  # type: ignore[arg-type]
        reason=field(data, "reason", str, default="", max_len=500),
    )
    return _answer(request, job)


@api_view("POST", role=Role.OPERATOR)
def unload(request: HttpRequest, name: str) -> HttpResponse:
    data = json_body(request)
    reason = field(data, "reason", str, default="", max_len=500)
    job = serving.request_unload(model=model_or_404(name), user=request.user, reason=reason)  # type: ignore[arg-type]
    return _answer(request, job)


@api_view("POST", role=Role.OPERATOR)
def load(request: HttpRequest, name: str) -> HttpResponse:
    data = json_body(request)
    reason = field(data, "reason", str, default="", max_len=500)
    job = serving.request_load(model=model_or_404(name), user=request.user, reason=reason)  # type: ignore[arg-type]
    return _answer(request, job)


@api_view("GET")
def history(request: HttpRequest, name: str) -> dict[str, Any]:
    model = model_or_404(name)
    rows = Event.objects.filter(model=model).select_related("model", "version", "actor")[:500]
    return {"model": model.name, "events": [e.to_dict() for e in rows]}


@api_view("GET")
def audit(request: HttpRequest) -> dict[str, Any]:
    rows = Event.objects.select_related("model", "version", "actor")[:500]
    return {"events": [e.to_dict() for e in rows]}

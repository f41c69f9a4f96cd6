"""API for serving: switch, roll back, load, unload, delete a version, history."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from webapp.accounts.roles import Role
from webapp.api.decorators import api_view, field, json_body
from webapp.api.lookups import model_or_404
from webapp.registry import serving
from webapp.registry.models import Event, Job, Model


def _finished(job: Job) -> HttpResponse:
    """The job's outcome: 200 when it succeeded, 409 when it failed, 202 if still running."""
    job = serving.wait_for(job)
    model = Model.objects.get(pk=job.model_id)
    body: dict[str, Any] = {
        "job": str(job.uuid),
        "state": job.state,
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
    return _finished(job)


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
    return _finished(job)


@api_view("POST", role=Role.OPERATOR)
def rollback(request: HttpRequest, name: str) -> HttpResponse:
    data = json_body(request)
    job = serving.request_rollback(
        model=model_or_404(name),
        user=request.user,  # type: ignore[arg-type]
        reason=field(data, "reason", str, default="", max_len=500),
    )
    return _finished(job)


@api_view("POST", role=Role.OPERATOR)
def unload(request: HttpRequest, name: str) -> HttpResponse:
    data = json_body(request)
    reason = field(data, "reason", str, default="", max_len=500)
    job = serving.request_unload(model=model_or_404(name), user=request.user, reason=reason)  # type: ignore[arg-type]
    return _finished(job)


@api_view("POST", role=Role.OPERATOR)
def load(request: HttpRequest, name: str) -> HttpResponse:
    data = json_body(request)
    reason = field(data, "reason", str, default="", max_len=500)
    job = serving.request_load(model=model_or_404(name), user=request.user, reason=reason)  # type: ignore[arg-type]
    return _finished(job)


@api_view("GET")
def history(request: HttpRequest, name: str) -> dict[str, Any]:
    model = model_or_404(name)
    rows = Event.objects.filter(model=model).select_related("model", "version", "actor")[:500]
    return {"model": model.name, "events": [e.to_dict() for e in rows]}


@api_view("GET")
def audit(request: HttpRequest) -> dict[str, Any]:
    rows = Event.objects.select_related("model", "version", "actor")[:500]
    return {"events": [e.to_dict() for e in rows]}

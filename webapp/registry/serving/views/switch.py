from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError, show_error
from webapp.http import HubRequest
from webapp.registry.catalogue.models import Model
from webapp.registry.serving.actions import switch as serving_actions


def _switch_response(request: HubRequest, model: Model, start: object) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    try:
        job = start()  # type: ignore[operator]
    except HubError as exc:
        show_error(request, exc)
        return redirect("model", name=model.name)
    return redirect("job", job_id=job.uuid)


@require_POST
def model_serve(request: HubRequest, name: str) -> HttpResponse:
    model = get_object_or_404(Model, name=name)
    try:
        number = int(request.POST.get("version", ""))
    except ValueError:
        messages.error(request, gettext("Choose a version to serve."))
        return redirect("model", name=name)
    return _switch_response(
        request,
        model,
        lambda: serving_actions.request_switch(
            model=model,
            number=number,
            user=request.user,  # type: ignore[arg-type]
            reason=request.POST.get("reason", "")[:500],
            confirm_breaking=request.POST.get("confirm_breaking") == "1",
        ),
    )


@require_POST
def model_rollback(request: HubRequest, name: str) -> HttpResponse:
    model = get_object_or_404(Model, name=name)
    reason = request.POST.get("reason", "")[:500]
    return _switch_response(
        request,
        model,
        lambda: serving_actions.request_rollback(model=model, user=request.user, reason=reason),  # type: ignore[arg-type]
    )


@require_POST
def model_unload(request: HubRequest, name: str) -> HttpResponse:
    model = get_object_or_404(Model, name=name)
    return _switch_response(
        request,
        model,
        lambda: serving_actions.request_unload(model=model, user=request.user),  # type: ignore[arg-type]
    )


@require_POST
def model_load(request: HubRequest, name: str) -> HttpResponse:
    model = get_object_or_404(Model, name=name)
    return _switch_response(
        request,
        model,
        lambda: serving_actions.request_load(model=model, user=request.user),  # type: ignore[arg-type]
    )

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError, show_error
from webapp.http import HubRequest
from webapp.registry.catalogue import demo
from webapp.registry.catalogue.actions import demo as demo_actions


@require_POST
def demo_add(request: HubRequest) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    try:
        added = demo_actions.add_demo_model(request.user)  # type: ignore[arg-type]
    except HubError as exc:
        show_error(request, exc)
        existing = demo.existing_demo()
        return redirect("model", name=existing.name) if existing else redirect("models")
    messages.success(
        request,
        gettext(
            "Demo model added: v%(number)s is being validated, compiled and verified, "
            "then it will serve. Follow it here; then open Try it."
        )
        % {"number": added.version.number},
    )
    return redirect("job", job_id=added.job.uuid)

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError, show_error
from webapp.http import HubRequest
from webapp.registry.catalogue.actions import versions as version_actions
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Event, Job


def _job(job_id: str) -> Job:
    try:
        return get_object_or_404(Job.objects.select_related("model", "version"), uuid=job_id)
    except ValidationError:
        raise Http404 from None


def job_detail(request: HubRequest, job_id: str) -> HttpResponse:
    job = _job(job_id)
    context = {
        "job": job,
        "log_lines": job.log_lines.order_by("seq"),
        "version": job.version,
        "nav": "jobs",
    }
    if request.htmx:
        return render(request, "registry/_job_status.html", context)
    return render(request, "registry/job_detail.html", context)


def job_log(request: HubRequest, job_id: str) -> FileResponse:
    """Every line the job logged (the page shows the first JOB_LOG_MAX_LINES)."""
    return jobs.full_log_download(_job(job_id))


@require_POST
def job_cancel(request: HubRequest, job_id: str) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    job = _job(job_id)
    try:
        version_actions.cancel_job(job, request.user)  # type: ignore[arg-type]
        messages.info(request, gettext("Cancel requested; the job stops at its next check."))
    except HubError as exc:
        show_error(request, exc)
    return redirect("job", job_id=job.uuid)


def job_list(request: HubRequest) -> HttpResponse:
    rows = Job.objects.select_related("model", "version", "created_by")[:100]
    template = "registry/_job_rows.html" if request.htmx else "registry/job_list.html"
    return render(request, template, {"jobs": rows, "nav": "jobs"})


def audit(request: HubRequest) -> HttpResponse:
    rows = Event.objects.select_related("model", "version", "actor")[:300]
    return render(request, "registry/audit.html", {"events": rows, "nav": "audit"})

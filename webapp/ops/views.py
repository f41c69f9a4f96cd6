from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render

from webapp import slow_requests
from webapp.http import HubRequest
from webapp.ops import host_reports
from webapp.ops.diagnostics import WAIT_SECONDS, for_page, latest_report
from webapp.ops.server_state import devices_summary, triton_summary
from webapp.registry.models import ReconcileReport


def server(request: HubRequest) -> HttpResponse:
    context = {
        "triton": triton_summary(),
        "devices": devices_summary(),
        "cann": host_reports.cann(),
        "reconcile": ReconcileReport.objects.first(),
        "nav": "server",
    }
    template = "ops/_server_status.html" if request.htmx else "ops/server.html"
    return render(request, template, context)


def diagnostics(request: HubRequest) -> HttpResponse:
    """The troubleshooting checklist: the host's checks from the worker's newest report, the
    hub's run here ("Run again" runs those again and fetches the rows only)."""
    fresh = bool(request.htmx) or request.GET.get("fresh") == "1"  # "Run again" runs them
    try:
        with slow_requests.slow_request(str(request.user.pk), longest_s=WAIT_SECONDS):
            report = latest_report(fresh=fresh)
    except slow_requests.Busy as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    context = {"report": for_page(report), "nav": "server"}
    template = "ops/_diagnostics_rows.html" if request.htmx else "ops/diagnostics.html"
    return render(request, template, context)

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render

from webapp.http import HubRequest
from webapp.ops.diagnostics import for_page, run_diagnostics
from webapp.ops.server_state import devices_summary, triton_summary
from webapp.registry.models import ReconcileReport


def server(request: HubRequest) -> HttpResponse:
    context = {
        "triton": triton_summary(),
        "devices": devices_summary(),
        "reconcile": ReconcileReport.objects.first(),
        "nav": "server",
    }
    template = "ops/_server_status.html" if request.htmx else "ops/server.html"
    return render(request, template, context)


def diagnostics(request: HubRequest) -> HttpResponse:
    """The troubleshooting checklist, run on every visit ("Run again" fetches the rows only)."""
    context = {"report": for_page(run_diagnostics()), "nav": "server"}
    template = "ops/_diagnostics_rows.html" if request.htmx else "ops/diagnostics.html"
    return render(request, template, context)

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render

from webapp import slow_requests
from webapp.http import HubRequest
from webapp.nodes import host_reports
from webapp.nodes import summaries as nodes
from webapp.nodes.views import remote_row
from webapp.ops import metrics_read
from webapp.ops.diagnostics import (
    WAIT_SECONDS,
    for_page,
    latest_report,
    node_sections,
    page_summary,
)
from webapp.ops.server_state import devices_summary, triton_summary
from webapp.registry.serving.models import ReconcileReport


def server(request: HubRequest) -> HttpResponse:
    """The Nodes page (also at /server/): every node's state, then each node's details: the
    ``local`` node's Triton asked live, the others' as their newest report says."""
    summaries = nodes.summaries()
    rates = metrics_read.node_request_rates()  # one query for every node
    for node in summaries:
        node["requests_per_s"] = rates.get(node["name"])
    context = {
        "nodes": summaries,
        "requests_per_s_total": sum(rates.values()) if rates else None,
        "rate_window_s": metrics_read.RECENT_SECONDS,
        "remote_nodes": [remote_row(s) for s in summaries if s["name"] != host_reports.LOCAL_NODE],
        "triton": triton_summary(),
        "devices": devices_summary(),
        "cann": host_reports.cann(),
        "reconcile": ReconcileReport.objects.first(),
        "down_after_s": nodes.down_after_s(),
        "nav": "server",
    }
    template = "ops/_server_status.html" if request.htmx else "ops/server.html"
    return render(request, template, context)


def diagnostics(request: HubRequest) -> HttpResponse:
    """The troubleshooting checklist: the hub's checks run here ("Run again" runs them again
    and fetches the rows only), then each node's host checks from its newest report.
    ``?node=NAME`` shows that node's section alone (an unknown node is a 404)."""
    only = request.GET.get("node") or None
    sections = node_sections(only)
    report = None
    if only is None:  # one node's section needs no hub checks (and no wait for them)
        fresh = bool(request.htmx) or request.GET.get("fresh") == "1"  # "Run again" runs them
        try:
            with slow_requests.slow_request(str(request.user.pk), longest_s=WAIT_SECONDS):
                report = for_page(latest_report(fresh=fresh))
        except slow_requests.Busy as exc:
            return HttpResponse(exc.message, status=exc.status, content_type="text/plain")
    context = {
        "report": report,
        "nodes": sections,
        "only": only,
        "summary_line": page_summary(report, sections),
        "nav": "server",
    }
    template = "ops/_diagnostics_rows.html" if request.htmx else "ops/diagnostics.html"
    return render(request, template, context)

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_POST

from webapp import slow_requests
from webapp.accounts import node_scope
from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError, show_error
from webapp.http import HubRequest
from webapp.ops import host_reports, metrics_read, node_actions, nodes
from webapp.ops.diagnostics import (
    RAN_ON_HOST,
    WAIT_SECONDS,
    for_page,
    host_part,
    latest_report,
    node_sections,
    page_summary,
)
from webapp.ops.server_state import devices_summary, triton_summary
from webapp.registry.models import ReconcileReport


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
        "remote_nodes": [_remote(s) for s in summaries if s["name"] != host_reports.LOCAL_NODE],
        "triton": triton_summary(),
        "devices": devices_summary(),
        "cann": host_reports.cann(),
        "reconcile": ReconcileReport.objects.first(),
        "down_after_s": nodes.down_after_s(),
        "nav": "server",
    }
    template = "ops/_server_status.html" if request.htmx else "ops/server.html"
    return render(request, template, context)


def _remote(summary: dict[str, Any]) -> dict[str, Any]:
    """A node other than ``local``: its summary, NPUs, CANN and host checks from its report."""
    name = summary["name"]
    checks = [{**c, "ran_on": RAN_ON_HOST} for c in host_part(name)["checks"]]
    return {
        "summary": summary,
        "devices": host_reports.devices(name),
        "cann": host_reports.cann(name),
        "checks": for_page({"checks": checks})["host_checks"],
        "tokens": len(node_scope.live_tokens(name)),
    }


@require_POST
def node_drain(request: HubRequest, name: str) -> HttpResponse:
    def drain() -> None:
        node_actions.drain(
            name=name, user=request.user, draining=request.POST.get("draining") == "1"
        )

    return _change_node(request, Role.OPERATOR, drain)


@require_POST
def node_revoke(request: HubRequest, name: str) -> HttpResponse:
    """Revoke the node's tokens (admins): its next report is refused (401)."""

    def revoke() -> str:
        count = node_actions.revoke_tokens(name=name, user=request.user)
        return ngettext(
            "Revoked %(count)s token of node %(name)s.",
            "Revoked %(count)s tokens of node %(name)s.",
            count,
        ) % {"count": count, "name": name}

    return _change_node(request, Role.ADMIN, revoke)


def _change_node(request: HubRequest, role: Role, change: Callable[[], str | None]) -> HttpResponse:
    """A change asked for on the Nodes page, by ``role`` or higher, and back to that page.

    ``change`` returns the message to show on success (None: the page itself shows the new
    state); a refusal (a :class:`HubError`) is shown instead, as every page shows one.
    """
    try:
        require_role(request.user, role)
        done = change()
        if done is not None:
            messages.success(request, done)
    except HubError as exc:
        show_error(request, exc)
    return redirect("nodes")


@require_POST
def node_remove(request: HubRequest, name: str) -> HttpResponse:
    try:
        require_role(request.user, Role.ADMIN)
        node_actions.remove(name=name, user=request.user)
        messages.success(
            request, gettext("Node %(name)s removed; its tokens are revoked.") % {"name": name}
        )
    except HubError as exc:
        show_error(request, exc)
    return redirect("nodes")


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

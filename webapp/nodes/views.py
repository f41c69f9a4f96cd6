from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.utils.translation import gettext, ngettext
from django.views.decorators.http import require_POST

from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError, show_error
from webapp.http import HubRequest
from webapp.nodes import actions as node_actions
from webapp.nodes import host_reports
from webapp.nodes import tokens as node_scope
from webapp.ops.diagnostics import (
    RAN_ON_HOST,
    for_page,
    host_part,
)


def remote_row(summary: dict[str, Any]) -> dict[str, Any]:
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

"""The model page's "Nodes" card: where the model is placed, what each node serves, and the
operators' form that changes the placement.

The card stays out of the way of a single-machine hub: it shows only once the placement is not
the default (``local`` alone) or the hub knows more than one node. The form posts to
:func:`model_placement`, which asks for the placement like ``PUT .../placement`` does
(:func:`~webapp.registry.serving.actions.switch.request_placement`) and comes back to the page with
what happened in a message.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_POST

from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError, show_error
from webapp.http import HubRequest
from webapp.nodes import summaries as ops_nodes
from webapp.registry.catalogue.models import Model
from webapp.registry.serving import placement, rollout
from webapp.registry.serving.actions import switch as serving_actions
from webapp.text import localize

NODE_STATE_BADGES = {"up": "badge-ok", "draining": "badge-busy", "down": "badge-bad"}
SERVING_BADGES = {"serving": "badge-ok", "placing": "badge-busy", "failed": "badge-bad"}
LABELS_HELP = gettext_lazy(
    "Write labels as key=value pairs separated by commas, e.g. soc=Ascend310P3, rack=r7."
)


def nodes_card(model: Model) -> dict[str, Any] | None:
    """What the card shows, or None when a single machine serves the model the default way."""
    summaries = ops_nodes.summaries()
    where = placement.of(model)
    if where == placement.DEFAULT and len(summaries) <= 1:
        return None
    placed = set(placement.resolve(where, summaries))
    rows = [_row(entry, placed) for entry in rollout.per_node(model)["nodes"]]
    known = sorted({n["name"] for n in summaries} | {placement.LOCAL}, key=_local_first)
    return {
        "placement": where,
        "described": localize(placement.describe(where)),
        "is_default": where == placement.DEFAULT,
        "rows": rows,
        "known_nodes": known,
        "chosen_nodes": where.get("nodes", []),
        "labels_text": ", ".join(f"{k}={v}" for k, v in (where.get("labels") or {}).items()),
        "by_labels": "labels" in where,
    }


def _row(entry: dict[str, Any], placed: set[str]) -> dict[str, Any]:
    updated = entry.get("updated")
    return entry | {
        "node_badge": NODE_STATE_BADGES.get(entry["node_state"], "badge-idle"),
        "badge": SERVING_BADGES.get(entry["state"], "badge-idle"),
        "updated_at": datetime.fromisoformat(updated) if isinstance(updated, str) else None,
        # A node with a row that the placement no longer names: the next placement job
        # unloads the model there.
        "leaving": entry["node"] not in placed,
    }


def _local_first(name: str) -> tuple[int, str]:
    return (0 if name == placement.LOCAL else 1, name)


def placement_from_form(data: Any) -> dict[str, Any]:
    """The placement the form asks for, as the API's body: ``{"nodes": [...]}`` from the
    ticked nodes, or ``{"labels": {...}}`` from the ``key=value, ...`` text.

    Raises:
        HubError: 400 ``invalid_placement`` when no node is ticked or the text is not pairs.
    """
    if data.get("mode") == "labels":
        return {"labels": parse_labels(data.get("labels", ""))}
    names = [n for n in data.getlist("nodes") if n]
    if not names:
        raise HubError(
            gettext("Tick at least one node, or choose nodes by their labels."),
            "invalid_placement",
            400,
        )
    return {"nodes": names}


def parse_labels(text: str) -> dict[str, str]:
    """``"soc=Ascend310P3, rack=r7"`` as a dict; an empty text is every node (``{}``)."""
    labels: dict[str, str] = {}
    for part in (p.strip() for p in str(text)[:4000].split(",")):
        if not part:
            continue
        key, equals, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key:
            raise HubError(
                gettext("%(part)s is not key=value. %(help)s")
                % {"part": repr(part[:80]), "help": LABELS_HELP},
                "invalid_placement",
            )
        if key in labels:
            raise HubError(
                gettext("The label %(key)s is given twice.") % {"key": repr(key[:64])},
                "invalid_placement",
            )
        labels[key] = value
    return labels


@require_POST
def model_placement(request: HubRequest, name: str) -> HttpResponse:
    """Changes where the model is served; errors come back as a message, like serve's."""
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    back = reverse("model", kwargs={"name": model.name}) + "#nodes"
    try:
        job = serving_actions.request_placement(
            model=model,
            body=placement_from_form(request.POST),
            user=request.user,  # type: ignore[arg-type]
        )
    except HubError as exc:
        show_error(request, exc)
        return redirect(back)
    model.refresh_from_db(fields=["placement"])
    messages.info(
        request,
        gettext(
            "Placing %(model)s on %(placement)s: job %(job)s brings the nodes in line (see Jobs)."
        )
        % {
            "model": model.name,
            "placement": localize(placement.describe(placement.of(model))),
            "job": job.uuid.hex[:8],
        },
    )
    return redirect(back)

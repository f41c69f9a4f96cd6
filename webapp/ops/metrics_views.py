"""The model page's Metrics tab: live charts of the series, the newest numbers and advice."""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render

from model_store.targets import get_target
from webapp.errors import HubError
from webapp.http import HubRequest
from webapp.nodes import summaries as nodes
from webapp.ops.metrics_read import RANGES, model_metrics
from webapp.registry.catalogue.models import Model
from webapp.registry.catalogue.views.header import model_header

RANGE_LABELS = {"1h": "1 h", "6h": "6 h", "24h": "24 h", "7d": "7 d"}


def model_metrics_page(request: HubRequest, name: str) -> HttpResponse:
    model = get_object_or_404(Model, name=name)
    range_key = request.GET.get("range", "1h")
    if range_key not in RANGES:
        range_key = "1h"
    node = _node_param(request.GET.get("node"))
    data = model_metrics(model, range_key, node=node)
    last = data["last_scrape"]
    context = model_header(request, model, "metrics") | {
        "data": data,
        "range": range_key,
        "node": node,
        # The picker shows when the model has points on more than one node (or one is picked).
        "node_choices": data["nodes"] if len(data["nodes"]) > 1 or node else [],
        "ranges": [(key, RANGE_LABELS[key]) for key in RANGES],
        "range_label": RANGES[range_key][2],
        "last_scrape": datetime.fromtimestamp(last, tz=UTC) if last else None,
        "scrape_seconds": settings.METRICS_SCRAPE_SECONDS,
        "client_side": not get_target(model.target).reports_statistics,
    }
    if request.htmx and request.GET.get("part") == "summary":
        return render(request, "registry/_metrics_summary.html", context)
    return render(request, "registry/model_metrics.html", context)


def _node_param(value: str | None) -> str | None:
    """The node to show, or None (every node summed) for none or a name no node could have;
    like an unknown range, a bad value falls back rather than failing the page."""
    if not value:
        return None
    try:
        return nodes.check_name(value)
    except HubError:
        return None

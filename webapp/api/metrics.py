"""``GET /api/v1/models/{name}/metrics``: the numbers the Metrics tab draws."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.translation import gettext
from ninja import Query, Router

from webapp.api import types
from webapp.api.app import errors
from webapp.api.lookups import model_or_404
from webapp.errors import HubError
from webapp.nodes import summaries as nodes
from webapp.ops.metrics_read import RANGES, model_metrics
from webapp.text import localized

router = Router(tags=["metrics"], exclude_unset=True)


@router.get(
    "/models/{name}/metrics",
    response={200: types.Metrics, **errors(400, 404)},
    url_name="api-metrics",
    summary="Throughput, failures, pending and the latency split per version",
    description="Throughput, failures, pending and the latency split (queue, compute "
    "input/infer/output) per version, from Triton's metrics scraped every "
    "METRICS_SCRAPE_SECONDS; the hub's own calls (client_*) too, which are the only "
    "numbers for npu_ge models; advice read from them. Summed over the nodes, or of one node "
    "with ?node=NAME (404 for a node the hub does not know)",
)
def metrics(request: HttpRequest, name: str, query: Query[types.MetricsQuery]) -> Any:
    model = model_or_404(name)
    if query.range not in RANGES:
        raise HubError(
            gettext("%(field)s must be one of %(choices)s; got %(got)s.")
            % {"field": "'range'", "choices": ", ".join(RANGES), "got": repr(query.range[:20])},
            "invalid_field",
        )
    node = nodes.get(query.node).name if query.node is not None else None
    data = model_metrics(model, query.range, node=node)
    # The advice in the request's language (Accept-Language); level and code never change.
    data["advice"] = localized(data["advice"])
    return data

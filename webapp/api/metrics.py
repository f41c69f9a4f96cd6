"""``GET /api/v1/models/{name}/metrics``: the numbers the Metrics tab draws."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from webapp.api.decorators import api_view
from webapp.api.errors import ApiError
from webapp.api.lookups import model_or_404
from webapp.ops.metrics_store import RANGES, model_metrics


@api_view("GET")
def metrics(request: HttpRequest, name: str) -> dict[str, Any]:
    model = model_or_404(name)
    range_key = request.GET.get("range", "1h")
    if range_key not in RANGES:
        raise ApiError(
            f"'range' must be one of {', '.join(RANGES)}; got {range_key[:20]!r}.",
            "invalid_field",
        )
    return model_metrics(model, range_key)

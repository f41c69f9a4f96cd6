"""``GET /api/v1/diagnostics``: the troubleshooting checklist, each check with what to do."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from webapp.api.decorators import api_view
from webapp.ops.diagnostics import run_diagnostics


@api_view("GET")
def diagnostics(request: HttpRequest) -> dict[str, Any]:
    return run_diagnostics()

"""``GET /api/v1/diagnostics``: the troubleshooting checklist, each check with what to do."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router

from webapp import slow_requests
from webapp.api import types
from webapp.api.app import RETRY_AFTER, errors
from webapp.ops.diagnostics import WAIT_SECONDS, for_api, latest_report

router = Router(tags=["server"], exclude_unset=True)


@router.get(
    "/diagnostics",
    response={200: types.Diagnostics, **errors(429, 503)},
    url_name="api-diagnostics",
    summary="The troubleshooting checklist: each check's state, what it found and what to do. "
    "The host checks (CANN, ATC, ATC's Python, npu_ge backend, NPU devices, npu-smi) come from "
    "the newest report of a worker on the host with the NPUs (host_report says which and how "
    "old); the hub checks (Triton reachable and restricted, stuck and failed loads) run in the "
    "web process.",
    openapi_extra={"x-responses": {str(c): {"headers": RETRY_AFTER} for c in (429, 503)}},
)
def diagnostics(request: HttpRequest, query: Query[types.DiagnosticsQuery]) -> Any:
    """The host checks of the newest host report and the hub's last checks (``age_s`` old;
    refreshed in the background after 30 s), said in the request's language (Accept-Language;
    the ``id`` and ``state`` codes never change).

    ``?fresh=true`` waits for a new run of the hub's checks (at most 20 s).
    """
    fresh = query.fresh.lower() in ("1", "true", "yes")
    with slow_requests.slow_request(str(request.user.pk), longest_s=WAIT_SECONDS):
        return for_api(latest_report(fresh=fresh))

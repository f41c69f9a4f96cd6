"""``GET /api/v1/diagnostics``: the troubleshooting checklist, each check with what to do."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from webapp import slow_requests
from webapp.api.decorators import api_view
from webapp.ops.diagnostics import WAIT_SECONDS, latest_report


@api_view("GET")
def diagnostics(request: HttpRequest) -> dict[str, Any]:
    """The last report (``age_s`` old; refreshed in the background after 30 s).

    ``?fresh=true`` waits for a new run (at most 20 s), as every call did before.
    """
    fresh = request.GET.get("fresh", "").lower() in ("1", "true", "yes")
    with slow_requests.slow_request(str(request.user.pk), longest_s=WAIT_SECONDS):
        return latest_report(fresh=fresh)

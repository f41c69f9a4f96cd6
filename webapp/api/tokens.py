"""``/api/v1/tokens``: the caller's own API tokens (list, create, set an expiry, revoke)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from webapp.accounts import tokens
from webapp.api.decorators import api_view, field, json_body


@api_view("GET", "POST")
def token_list(request: HttpRequest) -> HttpResponse | dict[str, Any]:
    user = request.user
    if request.method == "GET":
        rows = tokens.ApiToken.objects.live().filter(user=user)  # type: ignore[misc]
        return {"tokens": [t.to_dict() for t in rows]}
    data = json_body(request)
    token, key = tokens.create(
        user,  # type: ignore[arg-type]
        name=field(data, "name", str, default="api", max_len=100),
        scope=data.get("scope"),
        days=data.get("expires_in_days", "default"),
        via_token=hasattr(request, "api_token"),
    )
    return JsonResponse(token.to_dict() | {"key": key}, status=201)


@api_view("GET", "PATCH", "DELETE")
def token_detail(request: HttpRequest, token_id: int) -> HttpResponse | dict[str, Any]:
    token = tokens.owned(request.user, token_id)  # type: ignore[arg-type]
    if request.method == "DELETE":
        tokens.revoke(token)
        return HttpResponse(status=204)
    if request.method == "PATCH":
        data = json_body(request)
        if "expires_in_days" not in data:
            return JsonResponse(
                {"error": "Send expires_in_days (or null).", "code": "missing_field"}, status=400
            )
        tokens.set_expiry(token, data["expires_in_days"])
    return token.to_dict()

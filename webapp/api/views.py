"""REST API v1 (see ``webapp/api/schema.py`` for the documented contract)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt

from webapp.accounts.auth import is_api_request
from webapp.accounts.roles import Role
from webapp.api.decorators import api_view, field, json_body
from webapp.api.errors import error_response
from webapp.api.lookups import model_or_404
from webapp.api.schema import openapi_schema
from webapp.ops.health import run_checks
from webapp.ops.server_state import devices_summary, triton_summary
from webapp.registry import actions
from webapp.registry.models import Model


@login_not_required
@csrf_exempt
def health_live(request: HttpRequest) -> HttpResponse:
    """Liveness for load balancers and container health checks: no auth, no dependencies."""
    return JsonResponse({"status": "ok"})


@api_view("GET")
def health(request: HttpRequest) -> HttpResponse:
    checks = run_checks()
    ok = all(c["ok"] for c in checks.values())
    body: dict[str, Any] = {"status": "ok" if ok else "failing", "checks": checks}
    if not ok:
        failing = ", ".join(name for name, c in checks.items() if not c["ok"])
        body["error"] = f"Not healthy: {failing}."
        body["code"] = "unhealthy"
    return JsonResponse(body, status=200 if ok else 503)


@api_view("GET")
def server(request: HttpRequest) -> dict[str, Any]:
    return {"triton": triton_summary(), "devices": devices_summary()}


@api_view("GET")
def devices(request: HttpRequest) -> dict[str, Any]:
    return devices_summary()


@api_view("GET", "POST", role=Role.OPERATOR)
def models(request: HttpRequest) -> HttpResponse | dict[str, Any]:
    if request.method == "GET":
        rows = Model.objects.select_related("created_by")
        return {"models": [m.to_dict() for m in rows]}
    data = json_body(request)
    model = actions.create_model(
        name=field(data, "name", str, max_len=200),
        target=field(data, "target", str, default="onnxruntime", max_len=40),
        description=field(data, "description", str, default="", max_len=2000),
        user=request.user,  # type: ignore[arg-type]
    )
    return JsonResponse(model.to_dict(), status=201)


@api_view("GET")
def model_detail(request: HttpRequest, name: str) -> dict[str, Any]:
    return model_or_404(name).to_dict(versions=True)


@api_view("GET")
def schema(request: HttpRequest) -> dict[str, Any]:
    return openapi_schema()


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_request(request):
        return error_response(f"No API endpoint at {request.path}.", "not_found", 404)
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    if is_api_request(request):
        return error_response(
            "The server hit an unexpected error; it is logged.", "server_error", 500
        )
    return render(request, "500.html", status=500)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    if is_api_request(request):
        return error_response(
            "CSRF check failed: send the csrftoken cookie's value as X-CSRFToken, "
            "or authenticate with 'Authorization: Token <key>'.",
            "csrf_failed",
            403,
        )
    return render(request, "403_csrf.html", {"reason": reason}, status=403)

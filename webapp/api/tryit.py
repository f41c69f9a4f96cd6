"""Try it over the API: inference, saved examples, labels and preprocessing per model."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from model_store.inference import InferenceInputError, Preprocess, parse_labels
from webapp import slow_requests
from webapp.accounts.roles import Role, role_of
from webapp.api.decorators import api_view, field, json_body
from webapp.api.errors import ApiError, error_response
from webapp.api.lookups import model_or_404
from webapp.registry import demo, inference
from webapp.registry import examples as saved_examples
from webapp.registry import sweeps as sweeps_module
from webapp.registry.actions import RegistryError
from webapp.registry.models import Model


def _body_within_cap(request: HttpRequest) -> None:
    """Refuse an oversized body from its declared length, before reading a byte of it."""
    cap = settings.INFER_MAX_REQUEST_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > cap:
        raise ApiError(
            f"The request is {declared:,} bytes; the limit is {cap:,} "
            "(INFER_MAX_REQUEST_BYTES). Send a smaller image or tensor.",
            "too_large",
            413,
        )


def _input_error(exc: InferenceInputError) -> HttpResponse:
    body: dict[str, Any] = {"error": exc.message, "code": exc.code}
    if exc.field:
        body["input"] = exc.field
    return JsonResponse(body, status=exc.status)


@api_view("POST", role=Role.VIEWER)
def infer(request: HttpRequest, name: str) -> HttpResponse | dict[str, Any]:
    _body_within_cap(request)
    model = (
        Model.objects.filter(name=name)
        .only("id", "name", "serving_version", "labels", "try_settings")
        .first()
    )
    if model is None:
        raise ApiError(f"There is no model named {name!r}.", "not_found", 404)
    data = json_body(request)
    if "inputs" not in data:
        raise ApiError(
            "The field 'inputs' is required: an object of input name -> tensor "
            '(a nested list, {"data", "shape"}, {"b64", "shape"}, {"npy_b64"} or '
            '{"image_b64"}).',
            "missing_field",
        )
    try:
        with slow_requests.slow_request(
            str(request.user.pk), longest_s=settings.INFER_TIMEOUT_SECONDS
        ):
            return inference.run(
                model,
                data,
                user_key=str(request.user.pk),
                base_url=request.build_absolute_uri("/").rstrip("/"),
            )
    except InferenceInputError as exc:
        return _input_error(exc)
    except RegistryError as exc:
        response = error_response(exc.message, exc.code, exc.status)
        retry_after = getattr(exc, "retry_after", None)
        if retry_after:
            response["Retry-After"] = str(retry_after)
        return response


@api_view("GET", "POST", role=Role.VIEWER)
def examples(request: HttpRequest, name: str) -> HttpResponse | dict[str, Any]:
    model = model_or_404(name)
    if request.method == "GET":  # names only: a rerun reads one example's tensors
        return {"examples": [e.to_dict(inputs=False) for e in saved_examples.listed(model)]}
    _body_within_cap(request)
    data = json_body(request)
    label = field(data, "name", str, max_len=80).strip()
    if not label:
        raise ApiError("Give the example a name.", "invalid_field")
    try:
        example = saved_examples.save(
            model=model,
            user=request.user,  # type: ignore[arg-type]
            name=label,
            inputs=field(data, "inputs", dict),
            size=len(request.body),
        )
    except InferenceInputError as exc:
        return _input_error(exc)
    return JsonResponse(example.to_dict(inputs=False), status=201)


@api_view("GET", "DELETE", role=Role.VIEWER)
def example_detail(
    request: HttpRequest, name: str, example_id: int
) -> HttpResponse | dict[str, Any]:
    model = model_or_404(name)
    example = model.examples.filter(pk=example_id).first()
    if example is None:
        raise ApiError(f"{model.name} has no saved example {example_id}.", "not_found", 404)
    if request.method == "GET":
        return example.to_dict()
    if example.created_by_id != request.user.pk and role_of(request.user) < Role.OPERATOR:
        raise ApiError(
            "Only the person who saved an example, or an operator, may delete it.",
            "forbidden",
            403,
        )
    example.delete()
    return HttpResponse(status=204)


@api_view("GET", "PUT", role=Role.OPERATOR)
def labels(request: HttpRequest, name: str) -> dict[str, Any]:
    """GET the model's class labels; PUT a text file (one per line) or a JSON list."""
    model = model_or_404(name)
    if request.method == "PUT":
        if len(request.body) > 4 << 20:
            raise ApiError("A labels file may be at most 4 MiB.", "too_large", 413)
        try:
            text = request.body.decode("utf-8")
        except UnicodeDecodeError:
            raise ApiError("The labels file must be UTF-8 text.", "bad_labels") from None
        try:
            model.labels = parse_labels(text)
        except InferenceInputError as exc:
            raise ApiError(exc.message, exc.code, exc.status) from None
        model.save(update_fields=["labels", "updated"])
    return {"model": model.name, "count": len(model.labels), "labels": model.labels}


@api_view("GET", "PUT", role=Role.OPERATOR)
def try_settings(request: HttpRequest, name: str) -> dict[str, Any]:
    """How the Try it panel prepares images for this model (saved per model)."""
    model = model_or_404(name)
    if request.method == "PUT":
        data = json_body(request)
        settings_: dict[str, Any] = dict(model.try_settings or {})
        if "preprocess" in data:
            raw = field(data, "preprocess", dict)
            try:
                settings_["preprocess"] = Preprocess.from_dict(raw).to_dict()
            except InferenceInputError as exc:
                raise ApiError(exc.message, exc.code, exc.status) from None
        if "image_inputs" in data:
            names = field(data, "image_inputs", list)
            if not all(isinstance(n, str) and len(n) <= 256 for n in names):
                raise ApiError("'image_inputs' must be a list of input names.", "invalid_field")
            settings_["image_inputs"] = names
        model.try_settings = settings_
        model.save(update_fields=["try_settings", "updated"])
    return {"model": model.name, **_effective_settings(model)}


def _effective_settings(model: Any) -> dict[str, Any]:
    return {
        "preprocess": inference.saved_preprocess(model).to_dict(),
        "image_inputs": (model.try_settings or {}).get("image_inputs"),
        "saved": json.loads(json.dumps(model.try_settings or {})),
    }


@api_view("GET", "POST", role=Role.OPERATOR)
def sweeps(request: HttpRequest, name: str) -> HttpResponse | dict[str, Any]:
    """GET the model's recent sweeps; POST starts one on the serving version."""
    model = model_or_404(name)
    if request.method == "GET":
        runs = model.perf_runs.select_related("job", "version", "model")[:50]
        return {"sweeps": [r.to_dict() for r in runs]}
    data = json_body(request)
    run = sweeps_module.request_sweep(
        model=model,
        user=request.user,  # type: ignore[arg-type]
        max_concurrency=field(data, "max_concurrency", int, default=8),
        step_seconds=_optional_int(data, "step_seconds"),
        example_id=_optional_int(data, "example_id"),
    )
    return JsonResponse(run.to_dict(), status=202)


def _optional_int(data: dict[str, Any], name: str) -> int | None:
    if data.get(name) is None:
        return None
    return int(field(data, name, int))


@api_view("GET")
def sweep_detail(request: HttpRequest, name: str, run_id: int) -> dict[str, Any]:
    model = model_or_404(name)
    run = model.perf_runs.select_related("job", "version", "model").filter(pk=run_id).first()
    if run is None:
        raise ApiError(f"{model.name} has no sweep {run_id}.", "not_found", 404)
    return run.to_dict()


@api_view("GET", "POST", role=Role.OPERATOR)
def demo_model(request: HttpRequest) -> HttpResponse | dict[str, Any]:
    """GET whether the demo model can be added; POST adds it and queues its journey."""
    existing = demo.existing_demo()
    if request.method == "GET":
        return {
            "available": demo.is_available(),
            "model": existing.name if existing else None,
            "name": demo.NAME,
        }
    added = demo.add_demo_model(request.user)  # type: ignore[arg-type]
    return JsonResponse(
        {
            "model": added.model.name,
            "version": added.version.number,
            "job": str(added.job.uuid),
            "job_url": f"/jobs/{added.job.uuid}/",
        },
        status=201,
    )

"""Try it over the API: inference, saved examples, labels and preprocessing per model."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext
from ninja import Router, Status

from model_store.inference.class_names import IMAGENET_1K, MODEL_FILE
from webapp import slow_requests
from webapp.api import types
from webapp.api.app import OPERATOR, RETRY_AFTER, errors
from webapp.api.lookups import model_or_404
from webapp.errors import HubError
from webapp.registry.catalogue import demo
from webapp.registry.catalogue.actions import demo as demo_actions
from webapp.registry.catalogue.models import Model
from webapp.registry.performance.actions import sweeps as sweep_actions
from webapp.registry.tryit import examples as saved_examples
from webapp.registry.tryit import inference
from webapp.registry.tryit.actions import examples as example_actions
from webapp.registry.tryit.actions import settings as try_actions
from webapp.registry.tryit.ratelimit import infer_budget
from webapp.request_limits import require_infer_body_within_cap

router = Router(tags=["try it"], exclude_unset=True)


@router.post(
    "/models/{name}/infer",
    response={
        200: types.InferOut | types.V2InferOut,
        **dict.fromkeys((400, 413, 415, 422), types.Input),
        **errors(404, 409, 429, 503, 504),
    },
    url_name="api-infer",
    summary="Run one inference on the serving version (or 'version'); the hub's form or "
    "the KServe v2 JSON form",
    description="Answers outputs (values; top_k with labels and probabilities for "
    "classifiers), input shapes, latency {triton_ms, hub_ms} and, with snippets=true, the same "
    "request as curl and tritonclient code. Refusals: 400 bad input, 404, 409 not served or "
    "version not loaded, 413 over INFER_MAX_REQUEST_BYTES/INFER_MAX_ELEMENTS/"
    "INFER_MAX_IMAGE_PIXELS, 415 not an image, 422 wrong dtype or shape, 429 over "
    "INFER_RATE_PER_MINUTE or too many slow requests (Retry-After), 503 Triton down or the "
    "dashboard busy (Retry-After), 504 timeout",
    openapi_extra={
        "x-responses": {"429": {"headers": RETRY_AFTER}, "503": {"headers": RETRY_AFTER}}
    },
)
def infer(request: HttpRequest, name: str, data: types.InferIn) -> Any:
    require_infer_body_within_cap(request)
    model = (
        Model.objects.filter(name=name)
        .only("id", "name", "serving_version", "labels", "try_settings", "canary")
        .first()
    )
    if model is None:
        message = gettext("There is no model named %(name)s%(hint)s.")
        raise HubError(message % {"name": repr(name), "hint": ""}, "not_found", 404)
    with slow_requests.slow_request(str(request.user.pk), longest_s=settings.INFER_TIMEOUT_SECONDS):
        return inference.run(
            model,
            data.as_body(),
            user_key=str(request.user.pk),
            base_url=request.build_absolute_uri("/").rstrip("/"),
            budget=infer_budget(request),
            caller=request.user.get_username(),
        )


@router.get(
    "/models/{name}/examples",
    response={200: types.ExampleList, **errors(404)},
    url_name="api-examples",
    summary="Saved Try it inputs of a model",
)
def examples(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)  # names only: a rerun reads one example's tensors
    return {"examples": [e.to_dict(inputs=False) for e in saved_examples.listed(model)]}


@router.post(
    "/models/{name}/examples",
    response={201: types.ExampleOut, 400: types.Input, 413: types.Input, **errors(404, 409, 422)},
    summary="Save an input under a name (at most 50 per model, 8 MiB each)",
)
def example_create(request: HttpRequest, name: str, data: types.ExampleIn) -> Any:
    model = model_or_404(name)
    require_infer_body_within_cap(request)
    label = data.name.strip()
    if not label:
        raise HubError(gettext("Give the example a name."), "invalid_field")
    example = example_actions.save_example(
        model=model,
        user=request.user,  # type: ignore[arg-type]
        name=label,
        inputs=data.inputs,
        size=len(request.body),
    )
    return Status(201, example.to_dict(inputs=False))


@router.get(
    "/models/{name}/examples/{int:example_id}",
    response={200: types.ExampleDetail, **errors(404)},
    url_name="api-example",
    summary="One saved input, to rerun it",
)
def example_detail(request: HttpRequest, name: str, example_id: int) -> Any:
    return _example(name, example_id).to_dict()


@router.delete(
    "/models/{name}/examples/{int:example_id}",
    response={204: None, **errors(404)},
    summary="Delete it (whoever saved it, or an operator)",
)
def example_delete(request: HttpRequest, name: str, example_id: int) -> Any:
    example_actions.delete_example(example=_example(name, example_id), user=request.user)  # type: ignore[arg-type]
    return HttpResponse(status=204)


def _example(name: str, example_id: int) -> Any:
    model = model_or_404(name)
    example = model.examples.filter(pk=example_id).first()
    if example is None:
        message = gettext("%(name)s has no saved example %(example)s.")
        raise HubError(message % {"name": model.name, "example": example_id}, "not_found", 404)
    return example


@router.get(
    "/models/{name}/labels",
    response={200: types.LabelsOut, **errors(404)},
    url_name="api-labels",
    summary="Class names used to label top-k",
)
def labels(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)
    return {"model": model.name, "count": len(model.labels), "labels": model.labels}


@router.put(
    "/models/{name}/labels",
    response={200: types.LabelsOut, **errors(400, 404, 409, 413)},
    auth=OPERATOR,
    summary="Replace them (operator): text/plain, one per line, or a JSON list or object; or "
    '{"preset": "imagenet-1k"}, {"from_model_file": true} or {"labels": [...]}',
    description="The two one-click sources are those Try it offers for the serving version "
    "(409 not_offered otherwise): ImageNet-1k for an output of 1000 or 1001 classes, and the "
    "class names found in the ONNX file's metadata.",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "text/plain": {"schema": {"type": "string"}},
                "application/json": {
                    "schema": {
                        "oneOf": [
                            {"type": "array", "items": {"type": "string"}},
                            {"type": "object", "additionalProperties": {"type": "string"}},
                            types.LabelsIn.model_json_schema(),
                        ]
                    }
                },
            },
        }
    },
)
def labels_put(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)
    if len(request.body) > 4 << 20:
        raise HubError(gettext("A labels file may be at most 4 MiB."), "too_large", 413)
    try:
        text = request.body.decode("utf-8")
    except UnicodeDecodeError:
        raise HubError(gettext("The labels file must be UTF-8 text."), "bad_labels") from None
    choice = _labels_choice(text)
    user = request.user
    # An InferenceInputError (no usable labels) is answered like any store error.
    if choice is None:
        try_actions.set_labels(model=model, text=text, user=user)  # type: ignore[arg-type]
    elif "labels" in choice:
        try_actions.set_labels(model=model, text=json.dumps(choice["labels"]), user=user)  # type: ignore[arg-type]
    else:
        source = IMAGENET_1K if "preset" in choice else MODEL_FILE
        try_actions.use_offered_labels(model=model, source=source, user=user)  # type: ignore[arg-type]
    return {"model": model.name, "count": len(model.labels), "labels": model.labels}


_CHOICES = ("preset", "from_model_file", "labels")


def _labels_choice(text: str) -> dict[str, Any] | None:
    """The body as one of the three one-key objects, or None for labels as such (lines, a
    list, an object of index -> name, which never has these keys).

    Raises:
        HubError: ``bad_labels`` (400) for such an object that is not one of the three.
    """
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        body = json.loads(stripped)
    except (ValueError, RecursionError):
        return None  # not JSON: parse_labels reads it as lines and says what is wrong
    if not isinstance(body, dict) or not set(body) & set(_CHOICES):
        return None
    if len(body) != 1:
        keys = ", ".join(repr(k[:40]) for k in list(body)[:5])
        message = gettext(
            "Expected exactly one key, got %(keys)s. Send one of %(preset)s, %(from_file)s, "
            "%(labels)s."
        )
        usage = {
            "preset": '{"preset": "imagenet-1k"}',
            "from_file": '{"from_model_file": true}',
            "labels": '{"labels": [...]}',
        }
        raise HubError(message % {"keys": keys, **usage}, "bad_labels")
    if "preset" in body and body["preset"] != IMAGENET_1K:
        message = gettext("Unknown preset %(preset)s: the one preset is %(known)s.")
        shown = {"preset": repr(str(body["preset"])[:50]), "known": repr(IMAGENET_1K)}
        raise HubError(message % shown, "bad_labels")
    if "from_model_file" in body and body["from_model_file"] is not True:
        raise HubError(gettext('"from_model_file" must be true.'), "bad_labels")
    if "labels" in body and not isinstance(body["labels"], list | dict):
        raise HubError(
            gettext('"labels" must be a list of names or an object of index -> name.'),
            "bad_labels",
        )
    return body


@router.get(
    "/models/{name}/try-settings",
    response={200: types.TrySettingsOut, **errors(404)},
    url_name="api-try-settings",
    summary="How photos are preprocessed for this model, and which inputs are images",
)
def try_settings(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)
    return {"model": model.name, **_effective_settings(model)}


@router.put(
    "/models/{name}/try-settings",
    response={200: types.TrySettingsOut, **errors(400, 404)},
    auth=OPERATOR,
    summary="Save them (operator)",
)
def try_settings_put(request: HttpRequest, name: str, data: types.TrySettingsIn) -> Any:
    model = model_or_404(name)
    changes: dict[str, Any] = {}
    if "preprocess" in data.model_fields_set:
        if data.preprocess is None:
            message = gettext("The field %(name)s must be a %(type)s.")
            raise HubError(message % {"name": "'preprocess'", "type": "dict"}, "invalid_field")
        changes["preprocess"] = data.preprocess
    if "image_inputs" in data.model_fields_set:
        if data.image_inputs is None:
            message = gettext("%(field)s must be a list of input names.")
            raise HubError(message % {"field": "'image_inputs'"}, "invalid_field")
        changes["image_inputs"] = data.image_inputs
    try_actions.save_try_settings(model=model, changes=changes, user=request.user)  # type: ignore[arg-type]
    return {"model": model.name, **_effective_settings(model)}


def _effective_settings(model: Any) -> dict[str, Any]:
    return {
        "preprocess": inference.saved_preprocess(model).to_dict(),
        "image_inputs": (model.try_settings or {}).get("image_inputs"),
        "saved": json.loads(json.dumps(model.try_settings or {})),
    }


@router.get(
    "/models/{name}/sweeps",
    response={200: types.SweepList, **errors(404)},
    url_name="api-sweeps",
    summary="Recent performance sweeps with their levels",
)
def sweeps(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)
    runs = model.perf_runs.select_related("job", "version", "model")[:50]
    return {"sweeps": [r.to_dict() for r in runs]}


@router.post(
    "/models/{name}/sweeps",
    response={202: types.SweepOut, **errors(400, 404, 409)},
    auth=OPERATOR,
    summary="Start a sweep of the serving version at concurrency 1, 2, 4 ... up to "
    "max_concurrency (<= SWEEP_MAX_CONCURRENCY), or with mode 'rate' at each of 'rates' "
    "requests per second; step_seconds per level (operator); 202 with the run; cancel "
    "through its job",
    description='Closed loop (the default): {"max_concurrency": 8, "step_seconds": 3}. Open '
    'loop: {"mode": "rate", "rates": [10, 20, 50, 100], "step_seconds": 3}: requests are '
    "scheduled at a constant rate whatever the server does, at most SWEEP_MAX_CONCURRENCY in "
    "flight; one sent after its time because every sender was busy counts as late, and its "
    "latency is measured from the scheduled time (a client at that rate would have waited "
    "too). A rate level stops the sweep when less than 90 % of it completed or p99 more than "
    "doubled. 400 invalid_field/invalid_plan, 409 not served or a sweep already running.",
)
def sweep_create(request: HttpRequest, name: str, data: types.SweepIn) -> Any:
    model = model_or_404(name)
    run = sweep_actions.request_sweep(
        model=model,
        user=request.user,  # type: ignore[arg-type]
        max_concurrency=data.max_concurrency,
        step_seconds=data.step_seconds,
        example_id=data.example_id,
        captured=data.captured,
        mode=data.mode,
        rates=data.rates,
    )
    return Status(202, run.to_dict())


@router.get(
    "/models/{name}/sweeps/{int:run_id}",
    response={200: types.SweepOut, **errors(404)},
    url_name="api-sweep",
    summary="One sweep: per level throughput, p50/p90/p99, failures and Triton's queue/"
    "compute split (null when the backend reports no statistics)",
)
def sweep_detail(request: HttpRequest, name: str, run_id: int) -> Any:
    model = model_or_404(name)
    run = model.perf_runs.select_related("job", "version", "model").filter(pk=run_id).first()
    if run is None:
        message = gettext("%(name)s has no sweep %(run)s.")
        raise HubError(message % {"name": model.name, "run": run_id}, "not_found", 404)
    return run.to_dict()


@router.get(
    "/demo",
    response=types.DemoState,
    url_name="api-demo",
    summary="Whether the demo model can be added, and its name once added",
)
def demo_model(request: HttpRequest) -> Any:
    existing = demo.existing_demo()
    return {
        "available": demo.is_available(),
        "model": existing.name if existing else None,
        "name": demo.NAME,
    }


@router.post(
    "/demo",
    response={201: types.DemoAdded, **errors(404, 409)},
    auth=OPERATOR,
    summary="Add the demo EfficientNet-Lite0 and send it through upload, compile, verify "
    "and serve (operator); 201 {model, version, job}",
)
def demo_add(request: HttpRequest) -> Any:
    added = demo_actions.add_demo_model(request.user)  # type: ignore[arg-type]
    body = {
        "model": added.model.name,
        "version": added.version.number,
        "job": str(added.job.uuid),
        "job_url": f"/jobs/{added.job.uuid}/",
    }
    return Status(201, body)

"""Test inference on a served model: what the "Try it" panel and ``POST .../infer`` share.

The request is checked against the version's signature before Triton sees it (so a wrong
shape gets our plain message, not a backend error), sent over the process's long-lived gRPC
channel, and the outputs are described for people (top-k with labels) as well as returned.
Latency is reported as the hub measured it: the Triton call alone, and the whole request
inside the hub; the browser adds its own round trip.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from django.conf import settings
from django.utils.translation import gettext

from model_store.inference import (
    PRESETS,
    InferenceInputError,
    Limits,
    Preprocess,
    TensorSpec,
    curl_snippet,
    decode_inputs,
    describe_outputs,
    image_layout,
    specs_from_signature,
    tritonclient_snippet,
)
from model_store.inference.v2 import (
    is_v2_request,
    missing_outputs,
    payload_from_v2,
    requested_outputs,
    tensor_json,
    v2_answer,
)
from model_store.runtime.errors import TritonRequestError, TritonUnavailable
from webapp.errors import HubError
from webapp.ops.metrics_store import record_client_call
from webapp.ops.triton import inference_runtime, node_inference_runtime
from webapp.registry.capture import recorder
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.serving import canary_traffic
from webapp.registry.serving.rollout import inference_node
from webapp.registry.tryit.ratelimit import RateLimited, check_rate

MAX_TOP_K = 50
DEFAULT_PRESET = "imagenet"


def limits() -> Limits:
    return Limits(
        max_elements=settings.INFER_MAX_ELEMENTS,
        max_bytes=settings.INFER_MAX_REQUEST_BYTES * 4,
        max_image_pixels=settings.INFER_MAX_IMAGE_PIXELS,
        max_image_memory=settings.INFER_IMAGE_MEMORY_BYTES,
    )


def input_specs(version: Version) -> list[TensorSpec]:
    return specs_from_signature(version.signature, "inputs")


def saved_preprocess(model: Model) -> Preprocess:
    """The model's saved preprocessing, or the ImageNet preset when none was saved."""
    raw = (model.try_settings or {}).get("preprocess")
    if isinstance(raw, dict):
        try:
            return Preprocess.from_dict(raw)
        except InferenceInputError:
            pass  # a preset saved by an older release: fall back rather than refuse
    return PRESETS[DEFAULT_PRESET]


def image_inputs(model: Model, specs: list[TensorSpec]) -> list[str]:
    """Inputs the panel treats as images: those the person marked, else the image-like ones."""
    marked = (model.try_settings or {}).get("image_inputs")
    if isinstance(marked, list):
        names = {s.name for s in specs}
        return [str(n) for n in marked if n in names]
    return [s.name for s in specs if image_layout(s) is not None]


def _pick_version(model: Model, requested: object) -> Version:
    if requested is None:
        if model.serving_version is None:
            raise HubError(
                gettext("%(model)s is not served yet: serve a packaged version first, then try it.")
                % {"model": model.name},
                "not_served",
                409,
            )
        # The serving version, or a canary's candidate with the step's probability.
        number = canary_traffic.version_for(model) or model.serving_version
    elif isinstance(requested, int) and not isinstance(requested, bool) and requested > 0:
        number = requested
    else:
        raise HubError(gettext("'version' must be a positive whole number."), "invalid_field", 400)
    # Only what inference needs: a version row also holds large JSON (verification reports).
    version = (
        Version.objects.filter(model=model, number=number).only("id", "number", "signature").first()
    )
    if version is None:
        raise HubError(
            gettext("%(model)s has no version %(number)s.")
            % {"model": model.name, "number": number},
            "not_found",
            404,
        )
    return version


def _triton_error(model: Model, version: Version, exc: Exception) -> HubError:
    text = str(exc)
    lowered = text.lower()
    # Checked first: Triton's gRPC answers "not ready" with the UNAVAILABLE status code, which
    # is not the same as Triton being down.
    if any(
        p in lowered for p in ("unknown model", "not found", "not at ready state", "is not ready")
    ):
        serving = f"v{model.serving_version}" if model.serving_version else gettext("no version")
        return HubError(
            gettext(
                "v%(number)s of %(model)s is not loaded in Triton (%(serving)s serves). "
                "Serve it, load it beside the serving version to compare, or try the serving one."
            )
            % {"number": version.number, "model": model.name, "serving": serving},
            "version_not_loaded",
            409,
        )
    if isinstance(exc, TritonUnavailable):
        if "deadline" in lowered:
            return HubError(
                gettext(
                    "Triton did not answer within %(seconds)s s "
                    "(INFER_TIMEOUT_SECONDS). The model may be overloaded; try again or run a "
                    "smaller input."
                )
                % {"seconds": settings.INFER_TIMEOUT_SECONDS},
                "triton_timeout",
                504,
            )
        return HubError(
            gettext(
                "Triton is not reachable, so nothing can run: %(problem)s. "
                "The Server page says more."
            )
            % {"problem": text},
            "triton_unavailable",
            503,
        )
    message = getattr(exc, "triton_message", None) or text
    return HubError(
        gettext("Triton refused the request: %(problem)s") % {"problem": message},
        "triton_error",
        422,
    )


#: How long a request that found its serving version unloaded waits for the database to name
#: the new one: Triton unloads the old version as soon as the new one is ready, and the switch
#: records it a moment later (model_store/serving/switching.py).
SWITCH_SETTLE_SECONDS = 3.0


def _serving_after_a_switch(
    model: Model, tried: Version, requested: object, error: HubError
) -> Version | None:
    """The version serving now, when a request that named no version was sent to one that a
    switch has just unloaded; None when that is not what happened."""
    if requested is not None or error.code != "version_not_loaded":
        return None
    deadline = time.monotonic() + SWITCH_SETTLE_SECONDS
    while True:
        serving = Model.objects.filter(pk=model.pk).values_list("serving_version", flat=True)
        now = serving.first()
        if now is not None and now != tried.number:
            model.serving_version = now
            return _pick_version(model, None)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def run(
    model: Model,
    body: dict[str, Any],
    user_key: str,
    *,
    base_url: str | None = None,
    budget: tuple[str, int] | None = None,
    caller: str | None = None,
) -> dict[str, Any]:
    """One inference request from the API or the page; raises HubError/InferenceInputError.

    ``budget`` is whose rate limit the call spends (``ratelimit.infer_budget``); by default
    its user's. ``caller``: the user name of an infer API call, which the model's capture may
    keep (the page's own calls are not captured)."""
    started = time.perf_counter()
    try:
        check_rate(*(budget or (f"infer:{user_key}", settings.INFER_RATE_PER_MINUTE)))
    except RateLimited as exc:
        raise HubError(
            str(exc), "rate_limited", 429, headers={"Retry-After": str(exc.retry_after)}
        ) from None
    version = _pick_version(model, body.get("version"))
    top_k = body.get("top_k", 5)
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= MAX_TOP_K:
        raise HubError(
            gettext("'top_k' must be a whole number from 1 to %(max)s.") % {"max": MAX_TOP_K},
            "invalid_field",
        )
    specs = input_specs(version)
    if not specs:
        raise HubError(
            gettext("v%(number)s has no known inputs (its validation did not finish).")
            % {"number": version.number},
            "no_signature",
            409,
        )
    default = saved_preprocess(model)
    if "preprocess" in body:
        raw = body["preprocess"]
        if not isinstance(raw, dict):
            raise InferenceInputError(
                gettext('\'preprocess\' must be an object such as {"preset": "imagenet"}.'),
                code="bad_preprocess",
            )
        default = Preprocess.from_dict(raw)
    v2 = is_v2_request(body)
    wanted = requested_outputs(body.get("outputs")) if v2 else None
    payload = payload_from_v2(body["inputs"]) if v2 else body.get("inputs")
    arrays = decode_inputs(specs, payload, limits(), default_preprocess=default)
    elsewhere = inference_node(model, version.number)
    runtime = inference_runtime() if elsewhere is None else node_inference_runtime(*elsewhere[1:])
    protocol: Literal["http", "grpc"] = "grpc" if runtime.grpc_url else "http"
    call_started = time.perf_counter()
    try:
        outputs = runtime.infer(model.name, arrays, version=str(version.number), protocol=protocol)
    except (TritonUnavailable, TritonRequestError) as exc:
        error = _triton_error(model, version, exc)
        switched = _serving_after_a_switch(model, version, body.get("version"), error)
        if switched is None:
            record_client_call(model.name, version.number, 0.0, ok=False)
            canary_traffic.count(model, version.number, 0.0, ok=False)
            raise error from None
        # The version named none and a switch replaced the serving one under it: once.
        version = switched
        call_started = time.perf_counter()
        try:
            outputs = runtime.infer(
                model.name, arrays, version=str(version.number), protocol=protocol
            )
        except (TritonUnavailable, TritonRequestError) as again:
            record_client_call(model.name, version.number, 0.0, ok=False)
            canary_traffic.count(model, version.number, 0.0, ok=False)
            raise _triton_error(model, version, again) from None
    triton_ms = (time.perf_counter() - call_started) * 1000
    record_client_call(model.name, version.number, triton_ms, ok=True)
    canary_traffic.count(model, version.number, triton_ms, ok=True)
    if caller is not None and recorder.sampled(recorder.rate_for(model.name)):
        recorder.offer(
            recorder.Item(model.name, version.number, caller, triton_ms, "api",
                          inputs=dict(arrays), outputs=dict(outputs))
        )  # fmt: skip
    if v2:
        return _v2_answer(model, version, outputs, wanted, body.get("id"))
    described = describe_outputs(outputs, labels=model.labels or None, top_k=top_k)
    answer: dict[str, Any] = {
        "model": model.name,
        "version": version.number,
        "serving": version.number == model.serving_version,
        "inputs": {
            name: {"shape": list(a.shape), "dtype": str(a.dtype)} for name, a in arrays.items()
        },
        "outputs": described,
        "node": "local" if elsewhere is None else elsewhere[0],
        "latency": {
            "triton_ms": round(triton_ms, 3),
            "hub_ms": round((time.perf_counter() - started) * 1000, 3),
        },
    }
    if body.get("snippets") is True and base_url:
        answer["snippets"] = _snippets(model, version, specs, arrays, body, base_url, outputs)
    return answer


def _v2_answer(
    model: Model,
    version: Version,
    outputs: dict[str, Any],
    wanted: list[str] | None,
    request_id: object,
) -> dict[str, Any]:
    """A v2 request is answered in v2 form (model_store/inference/v2.py)."""
    unknown = missing_outputs(outputs, wanted)
    if unknown:
        raise InferenceInputError(
            gettext("%(model)s v%(number)s has no output %(output)s; it has %(outputs)s.")
            % {
                "model": model.name,
                "number": version.number,
                "output": repr(unknown[0]),
                "outputs": ", ".join(sorted(outputs)),
            },
            code="unknown_output",
            field=unknown[0],
        )
    answer = v2_answer(model.name, version.number, outputs, wanted)
    if isinstance(request_id, str) and len(request_id) <= 256:
        answer["id"] = request_id
    return answer


def _snippets(
    model: Model,
    version: Version,
    specs: list[TensorSpec],
    arrays: dict[str, Any],
    body: dict[str, Any],
    base_url: str,
    outputs: dict[str, Any],
) -> dict[str, str]:
    """The same request, as the tensors Triton received, in Triton's own protocol through the
    hub's ``/v2`` gateway: a curl command and a tritonclient script (what clients use in
    production, with an API token from ``$HUB_TOKEN``)."""
    request = {
        "inputs": [tensor_json(name, array) for name, array in arrays.items()],
        "outputs": [{"name": name} for name in sorted(outputs)],
    }
    return {
        "curl": curl_snippet(base_url, model.name, request, version=version.number),
        "python": tritonclient_snippet(
            base_url,
            model.name,
            version.number,
            specs,
            {name: list(a.shape) for name, a in arrays.items()},
            sorted(outputs),
            token_env="HUB_TOKEN",  # noqa: S106 - the variable's name, not a secret
        ),
    }

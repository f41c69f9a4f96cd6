"""``/v2``: Triton's own HTTP protocol on the hub, read-only and authenticated.

So that ``tritonclient.http.InferenceServerClient("hub:8080")`` with an ``Authorization``
header works unchanged, the hub answers the KServe v2 / Open Inference Protocol's health,
server and model metadata, config, readiness and inference calls (JSON and Triton's binary
tensor extension alike) by passing them to the Triton of a node that serves the model, and
passing back Triton's answer as it is: status, body, ``Content-Type`` and
``Inference-Header-Content-Length`` (protocol:
https://github.com/kserve/open-inference-protocol/blob/main/specification/protocol/inference_rest.md,
binary extension:
https://github.com/triton-inference-server/server/blob/main/docs/protocol/extension_binary_data.md).

Anyone who may call the infer API may call it; the per-user rate and slow-request limits
apply; each inference is counted in the hub's metrics for its model. Repository and model
control, shared memory, trace, logging and statistics are never passed on: 403 with the
reason. gRPC clients keep calling Triton directly, inside the trusted network.
"""

from __future__ import annotations

import http.client
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext, gettext_noop

from webapp import slow_requests
from webapp.edge.shared import PASSED_BACK, PASSED_ON, PREFIX
from webapp.errors import HubError
from webapp.ops.metrics_store import record_client_call
from webapp.registry.capture import recorder
from webapp.registry.catalogue.models import Model
from webapp.registry.serving import canary_traffic
from webapp.registry.serving.rollout import inference_node
from webapp.registry.tryit.ratelimit import RateLimited, check_rate, infer_budget
from webapp.request_limits import require_infer_body_within_cap
from webapp.text import localize

_MODEL = re.compile(
    r"models/(?P<name>[A-Za-z0-9][A-Za-z0-9_.\-]{0,63})"
    r"(?:/versions/(?P<version>[1-9][0-9]{0,18}))?(?:/(?P<what>config|ready|infer))?"
)
#: In English (marked): said with ``gettext(REFUSED)`` in the request's language.
REFUSED = gettext_noop(
    "The hub's v2 gateway serves health, server and model metadata, config, ready and infer. "
    "Repository and model control, shared memory, trace, logging and statistics stay on Triton "
    "inside the trusted network (or use the hub's own API)."
)


@dataclass(frozen=True)
class Call:
    """One allowed call: its kind and, for a model's, the model, version and what."""

    kind: str  # "server", "health", "model"
    model: str = ""
    version: str = ""
    what: str = ""  # "", "config", "ready", "infer"


def classify(method: str, rest: str) -> Call | None:
    """The call ``method /v2/<rest>`` is, or None when the gateway does not pass it on."""
    rest = rest.strip("/")
    if method == "GET" and rest == "":
        return Call("server")
    if method == "GET" and rest in ("health/live", "health/ready"):
        return Call("health")
    found = _MODEL.fullmatch(rest)
    # /v2/models/stats is Triton's statistics of every model, not a model's metadata.
    if found is None or found["name"] == "stats" or method not in ("GET", "POST"):
        return None
    what = found["what"] or ""
    if (method == "POST") != (what == "infer"):
        return None
    return Call("model", found["name"], found["version"] or "", what)


def _error(message: str, status: int) -> JsonResponse:
    # Triton's own error shape, so that tritonclient shows the message.
    return JsonResponse({"error": message}, status=status)


def v2(request: HttpRequest, rest: str = "") -> HttpResponse:
    call = classify(request.method or "", rest)
    if call is None:
        return _error(gettext(REFUSED), 403)
    user_key = str(request.user.pk)
    if call.kind != "model":
        return _forward(request, None, rest)
    model = (
        Model.objects.filter(name=call.model)
        .only("id", "name", "serving_version", "placement", "canary")
        .first()
    )
    if model is None:
        message = gettext("Unknown model: '%(name)s' (the hub has no such model).")
        return _error(message % {"name": call.model}, 404)
    version = int(call.version) if call.version else canary_traffic.version_for(model)
    target = inference_node(model, version) if version else None
    if call.what != "infer":
        return _forward(request, target, rest)
    try:
        check_rate(*infer_budget(request))
    except RateLimited as exc:
        refused = _error(str(exc), 429)
        refused["Retry-After"] = str(exc.retry_after)
        return refused
    if version and not call.version:
        # The serving version, as the fast path and the infer API do: Triton alone would pick
        # the highest loaded version, which during a rollback is not the serving one.
        rest = f"models/{model.name}/versions/{version}/infer"
    try:
        require_infer_body_within_cap(request)
        with slow_requests.slow_request(user_key, longest_s=settings.INFER_TIMEOUT_SECONDS):
            started = time.perf_counter()
            response = _forward(request, target, rest)
    except HubError as exc:  # too large, or too many slow requests: Triton's error shape
        refused = _error(localize(exc.message), exc.status)
        for key, value in (exc.headers or {}).items():
            refused[key] = value
        return refused
    ms = (time.perf_counter() - started) * 1000
    ok = response.status_code == 200
    record_client_call(model.name, version or "?", ms if ok else 0.0, ok=ok)
    if version and call.what == "infer":
        canary_traffic.count(model, version, ms, ok)
    if ok and version and recorder.sampled(recorder.rate_for(model.name)):
        recorder.offer(
            recorder.Item(
                model.name, version, request.user.get_username(), ms, "v2",
                request=request.body,
                request_header_length=_header_length(request.headers),
                answer=response.content,
                answer_header_length=_header_length(response.headers),
            )
        )  # fmt: skip
    return response


def _header_length(headers: Any) -> int | None:
    """``Inference-Header-Content-Length``: where a binary body's JSON header ends."""
    value = headers.get("Inference-Header-Content-Length")
    return int(value) if value and value.isdigit() else None


def _forward(
    request: HttpRequest, target: tuple[str, str, str | None] | None, rest: str
) -> HttpResponse:
    """Passes the call to ``target``'s Triton (None: local's) and its answer back."""
    address = settings.TRITON_URL if target is None else target[1]
    path = f"{PREFIX}/{rest}".rstrip("/") or PREFIX
    headers = {h: request.headers[h] for h in PASSED_ON if h in request.headers}
    body = request.body if request.method == "POST" else None
    try:
        status, payload, answer_headers = _send(
            address, request.method or "GET", path, body, headers
        )
    except (OSError, http.client.HTTPException) as exc:
        return _error(gettext("Triton did not answer: %(reason)s") % {"reason": exc}, 503)
    response = HttpResponse(payload, status=status)
    for header in PASSED_BACK:
        value = answer_headers.get(header)
        if value is not None:
            response[header] = value
    if "Content-Type" not in answer_headers:
        del response["Content-Type"]
    return response


_connections = threading.local()


def _send(
    address: str, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, bytes, dict[str, str]]:
    """One request on this thread's kept-alive connection to ``address``.

    A connection Triton closed while it was idle fails on first use; the request is then sent
    once more on a new one (inference is stateless for the models the hub serves: sequence
    batching is not among the configs it writes).
    """
    pool: dict[str, http.client.HTTPConnection] = _connections.__dict__.setdefault("pool", {})
    for attempt in (1, 2):
        connection = pool.get(address)
        if connection is None:
            host, _, port = address.split("://")[-1].partition(":")
            connection = http.client.HTTPConnection(
                host, int(port or 80), timeout=float(settings.INFER_TIMEOUT_SECONDS)
            )
            pool[address] = connection
        try:
            connection.request(method, path, body=body, headers=headers)
            answer = connection.getresponse()
            payload = answer.read()
        except (OSError, http.client.HTTPException):
            connection.close()
            pool.pop(address, None)
            if attempt == 2:
                raise
            continue
        if answer.will_close:
            connection.close()
            pool.pop(address, None)
        return answer.status, payload, {k.title(): v for k, v in answer.getheaders()}
    raise AssertionError("unreachable")

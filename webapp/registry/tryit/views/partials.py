"""The Try it tab's partials: a run's result and the saved examples' list.

The tab's form posts (htmx, multipart) to :func:`model_try_run`, which runs the same
``inference.run`` as the infer API, under the same limits (body size, the slow-request bounds,
the rate limit), and answers the result partial; saved examples are saved and deleted through
their partial too. Apart from the tab's page (webapp/registry/tryit/views/page.py): these answer the
fragments the panel swaps in, not a page.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from model_store.inference import InferenceInputError
from webapp import slow_requests
from webapp.accounts.roles import Role, require_role, role_of
from webapp.errors import HubError
from webapp.http import HubRequest
from webapp.registry.catalogue.models import Model
from webapp.registry.tryit import examples as saved_examples
from webapp.registry.tryit import form as try_form
from webapp.registry.tryit import inference
from webapp.registry.tryit.actions import examples as example_actions
from webapp.registry.tryit.models import TryExample
from webapp.request_limits import require_infer_body_within_cap
from webapp.text import localize

# The try tab needs only these columns; the labels list can be long but is used by the run.
_TRY_FIELDS = ("id", "name", "serving_version", "compare_version", "labels", "try_settings")


def _try_model(name: str) -> Model:
    return get_object_or_404(Model.objects.only(*_TRY_FIELDS), name=name)


def _error(exc: InferenceInputError | HubError) -> dict[str, Any]:
    message = localize(exc.message)
    error: dict[str, Any] = {"message": message, "code": exc.code, "status": exc.status}
    if isinstance(exc, InferenceInputError) and exc.field and repr(exc.field) not in message:
        error["input"] = exc.field  # named after the message unless the message names it
    error["retry_after"] = getattr(exc, "retry_after", None)
    return error


def _present_output(out: dict[str, Any]) -> dict[str, Any]:
    """What the result partial shows of one output: top-k rows and the values as text."""
    rows = []
    for row in out.get("top_k") or []:
        pct = row["probability"] * 100
        rows.append(
            {
                "index": row["index"],
                "label": (
                    row["label"]
                    if row.get("label") is not None
                    else gettext("class %(index)s") % {"index": row["index"]}
                ),
                "pct": pct,
                "pct_text": f"{pct:.1f}%" if pct >= 10 else f"{pct:.2f}%",
            }
        )
    values = out.get("values") or []
    shown = ["NaN" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v) for v in values]
    return {
        **out,
        "shape_text": "[" + ", ".join(str(d) for d in out["shape"]) + "]",
        "rows": rows,
        "values_text": ", ".join(shown),
        "values_count": (
            gettext("first %(count)s") % {"count": len(values)}
            if out.get("truncated")
            else str(len(values))
        ),
    }


def _run_one(
    request: HubRequest,
    model: Model,
    inputs: dict[str, Any],
    version: int | None,
    top_k: int,
    *,
    snippets: bool,
) -> dict[str, Any]:
    """One version's answer for the partial: its outputs and timing, or its error."""
    body: dict[str, Any] = {"inputs": inputs, "top_k": top_k, "snippets": snippets}
    if version is not None:
        body["version"] = version
    user_key = str(request.user.pk)
    try:
        with slow_requests.slow_request(user_key, longest_s=settings.INFER_TIMEOUT_SECONDS):
            answer = inference.run(
                model, body, user_key=user_key, base_url=request.build_absolute_uri("/").rstrip("/")
            )
    except (InferenceInputError, HubError) as exc:
        return {"version": version or model.serving_version, "error": _error(exc)}
    return {
        "version": answer["version"],
        "latency": answer["latency"],
        "outputs": [_present_output(o) for o in answer["outputs"]],
        "snippets": answer.get("snippets"),
    }


def _example(model: Model, raw: str) -> TryExample:
    example = model.examples.filter(pk=int(raw)).first() if raw.isdigit() else None
    if example is None:
        raise HubError(
            gettext("%(model)s has no saved example %(example)s.")
            % {"model": model.name, "example": raw},
            "not_found",
            404,
        )
    return example


def _result(context: dict[str, Any], status: int, retry_after: int | None = None) -> HttpResponse:
    response = render(context["request"], "registry/_try_result.html", context, status=status)
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


@require_POST
def model_try_run(request: HubRequest, name: str) -> HttpResponse:
    """Run the form's inputs (or a saved example) on one version or two; the result partial.

    The status is the API's for the same request (a single failed run answers its error's
    status); the panel swaps the partial in whatever the status.
    """
    require_role(request.user, Role.VIEWER)  # as the infer and examples API
    model = _try_model(name)
    context: dict[str, Any] = {
        "request": request,
        "model": model,
        "can_operate": role_of(request.user) >= Role.OPERATOR,
    }
    try:
        require_infer_body_within_cap(request)
        options = try_form.run_options(request.POST)
        if request.POST.get("example"):
            example = _example(model, request.POST["example"])
            inputs = example.inputs
            context["example"] = example
        else:
            inputs = try_form.inputs(request.POST, request.FILES)
    except (InferenceInputError, HubError) as exc:
        error = _error(exc)
        return _result(context | {"error": error}, error["status"], error["retry_after"])
    results = [
        _run_one(request, model, inputs, version, options.top_k, snippets=index == 0)
        for index, version in enumerate(options.versions)
    ]
    context |= {"results": results, "comparing": len(results) > 1}
    failed = results[0].get("error")
    if len(results) == 1 and failed:
        return _result(context, failed["status"], failed["retry_after"])
    return _result(context, 200)


def _examples_partial(
    request: HubRequest, model: Model, *, error: str = "", name: str = "", status: int = 200
) -> HttpResponse:
    context = {
        "model": model,
        "examples": saved_examples.listed(model),
        "examples_error": error,
        "example_name": name,
        "examples_open": True,
    }
    return render(request, "registry/_try_examples.html", context, status=status)


@require_POST
def model_try_example_save(request: HubRequest, name: str) -> HttpResponse:
    """Save the form's current inputs as an example; the examples partial."""
    require_role(request.user, Role.VIEWER)  # as the infer and examples API
    model = _try_model(name)
    label = request.POST.get("example_name", "").strip()[:80]
    label = label or gettext("Example %(time)s") % {
        "time": f"{timezone.localtime():%Y-%m-%d %H:%M:%S}"
    }
    try:
        require_infer_body_within_cap(request)
        inputs = try_form.inputs(request.POST, request.FILES)
        size = len(json.dumps(inputs))
        if size > settings.INFER_MAX_REQUEST_BYTES:
            raise HubError(
                gettext(
                    "This input is %(size)s bytes as JSON; a saved example may be at most "
                    "%(max)s (INFER_MAX_REQUEST_BYTES)."
                )
                % {"size": f"{size:,}", "max": f"{settings.INFER_MAX_REQUEST_BYTES:,}"},
                "too_large",
                413,
            )
        example_actions.save_example(
            model=model,
            user=request.user,  # type: ignore[arg-type]
            name=label,
            inputs=inputs,
            size=size,
        )
    except (InferenceInputError, HubError) as exc:
        return _examples_partial(
            request, model, error=localize(exc.message), name=label, status=exc.status
        )
    return _examples_partial(request, model, status=201)


@require_POST
def model_try_example_delete(request: HubRequest, name: str, example_id: int) -> HttpResponse:
    """Delete a saved example (its author or an operator); the examples partial."""
    require_role(request.user, Role.VIEWER)  # as the infer and examples API
    model = _try_model(name)
    example = model.examples.filter(pk=example_id).first()
    if example is None:
        return _examples_partial(
            request, model, error=gettext("That example was already deleted."), status=404
        )
    try:
        example_actions.delete_example(example=example, user=request.user)  # type: ignore[arg-type]
    except HubError as exc:
        return _examples_partial(request, model, error=localize(exc.message), status=exc.status)
    return _examples_partial(request, model)

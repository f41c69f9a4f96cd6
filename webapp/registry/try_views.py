"""The model page's "Try it" and "Performance" tabs, and the one-click demo model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.views.decorators.http import require_POST

from model_store.inference import PRESET_LABELS, PRESETS, example_value, image_layout
from webapp.accounts.roles import Role, role_of
from webapp.http import HubRequest
from webapp.registry import demo, inference
from webapp.registry import examples as saved_examples
from webapp.registry.actions import RegistryError
from webapp.registry.models import Job, Model, Version
from webapp.registry.state import state_of

DEMO_PHOTOS = ("coffee.png", "chelsea.png", "china.jpg")


def _header_context(request: HubRequest, model: Model, tab: str) -> dict[str, Any]:
    state, triton_error = state_of(model.name, model.serving_version is not None)
    return {
        "model": model,
        "state": state,
        "triton_error": triton_error,
        "tab": tab,
        "nav": "models",
        "can_operate": role_of(request.user) >= Role.OPERATOR,
    }


def _demo_photos() -> list[dict[str, str]]:
    folder: Path = demo.demo_images_dir()
    return [
        {"name": name, "url": static(f"demo/{name}")}
        for name in DEMO_PHOTOS
        if (folder / name).is_file()
    ]


def model_try(request: HubRequest, name: str) -> HttpResponse:
    model = get_object_or_404(Model, name=name)
    if request.htmx:
        # The waiting page polls; once a version serves, reload it whole so the panel's
        # script starts on the real form. Until then, nothing to swap.
        return HttpResponse(
            headers={"HX-Refresh": "true"} if model.serving_version else None,
            status=200 if model.serving_version else 204,
        )
    context = _header_context(request, model, "try")
    serving = (
        model.versions.filter(number=model.serving_version).first()
        if model.serving_version
        else None
    )
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    if serving is not None:
        specs = inference.input_specs(serving)
        images = set(inference.image_inputs(model, specs))
        for spec in specs:
            is_image = spec.name in images
            example = None if is_image else example_value(spec, "zeros")
            inputs.append(
                {
                    "name": spec.name,
                    "dtype": spec.triton_type,
                    "shape": spec.describe_shape(),
                    "image": is_image,
                    "image_like": image_layout(spec) is not None,
                    "example": json.dumps(example) if example is not None else "",
                    "elements": _elements(example),
                }
            )
        outputs = list(serving.signature.get("outputs", []))
    preprocess = inference.saved_preprocess(model).to_dict()
    packaged = model.versions.filter(status=Version.Status.READY).order_by("-number")
    context |= {
        "serving": serving,
        "inputs": inputs,
        "outputs": outputs,
        "packaged": packaged,
        "examples": saved_examples.listed(model),
        "page_config": {
            "model": model.name,
            "serving": model.serving_version,
            "inputs": inputs,
            "preprocess": preprocess,
            "presets": {k: {**p.to_dict(), "label": PRESET_LABELS[k]} for k, p in PRESETS.items()},
            "labels": len(model.labels),
            "maxRequestBytes": settings.INFER_MAX_REQUEST_BYTES,
            "compareVersion": model.compare_version,
            "canOperate": role_of(request.user) >= Role.OPERATOR,
        },
        "photos": _demo_photos() if any(i["image"] for i in inputs) else [],
        "labels_count": len(model.labels),
        "compile_job": _pending_job(model),
        "limits": {
            "bytes": settings.INFER_MAX_REQUEST_BYTES,
            "elements": settings.INFER_MAX_ELEMENTS,
            "pixels": settings.INFER_MAX_IMAGE_PIXELS,
            "rate": settings.INFER_RATE_PER_MINUTE,
            "timeout": settings.INFER_TIMEOUT_SECONDS,
        },
    }
    return render(request, "registry/model_try.html", context)


def _elements(example: Any) -> int:
    count = 0
    stack = [example]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif item is not None:
            count += 1
    return count


def _pending_job(model: Model) -> Job | None:
    """The newest unfinished compile or switch job, so an empty Try tab can point at it."""
    return (
        model.jobs.exclude(state__in=Job.FINISHED)
        .exclude(kind=Job.Kind.SWEEP)
        .order_by("-created")
        .first()
    )


def model_perf(request: HubRequest, name: str) -> HttpResponse:
    model = get_object_or_404(Model, name=name)
    context = _header_context(request, model, "perf")
    runs = list(model.perf_runs.select_related("job", "version", "model")[:20])
    running = next((r for r in runs if not r.job.is_finished), None)
    context |= {
        "runs": runs,
        "running": running,
        "runs_json": [r.to_dict() for r in runs],
        "max_concurrency": settings.SWEEP_MAX_CONCURRENCY,
        "concurrency_choices": [
            c for c in (1, 2, 4, 8, 16, 32, 64) if c <= settings.SWEEP_MAX_CONCURRENCY
        ],
        "step_seconds": settings.SWEEP_STEP_SECONDS,
        "examples": saved_examples.listed(model),
    }
    if request.htmx and request.GET.get("part") == "runs":
        return render(request, "registry/_perf_runs.html", context)
    return render(request, "registry/model_perf.html", context)


@require_POST
def model_sweep(request: HubRequest, name: str) -> HttpResponse:
    from webapp.registry.sweeps import request_sweep

    if role_of(request.user) < Role.OPERATOR:
        raise PermissionDenied("This needs the operator role.")
    model = get_object_or_404(Model, name=name)
    try:
        example = request.POST.get("example_id") or None
        request_sweep(
            model=model,
            user=request.user,  # type: ignore[arg-type]
            max_concurrency=int(request.POST.get("max_concurrency", "8")),
            step_seconds=int(request.POST.get("step_seconds", settings.SWEEP_STEP_SECONDS)),
            example_id=int(example) if example else None,
        )
        messages.success(request, "Sweep started; the chart fills in level by level.")
    except ValueError:
        messages.error(request, "Concurrency and seconds must be whole numbers.")
    except RegistryError as exc:
        messages.error(request, exc.message)
    return redirect("model-perf", name=name)


@require_POST
def demo_add(request: HubRequest) -> HttpResponse:
    if role_of(request.user) < Role.OPERATOR:
        raise PermissionDenied("This needs the operator role.")
    try:
        added = demo.add_demo_model(request.user)  # type: ignore[arg-type]
    except RegistryError as exc:
        messages.error(request, exc.message)
        existing = demo.existing_demo()
        return redirect("model", name=existing.name) if existing else redirect("models")
    messages.success(
        request,
        f"Demo model added: v{added.version.number} is being validated, compiled and verified, "
        "then it will serve. Follow it here; then open Try it.",
    )
    return redirect("job", job_id=added.job.uuid)

"""The model page's "Try it" and "Performance" tabs, and the one-click demo model.

Try it is rendered like every other page; its form's run and its saved examples answer
partials (webapp/registry/tryit/views/partials.py), and marking an input as an image posts here.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from model_store.inference import (
    PRESET_LABELS,
    PRESETS,
    InferenceInputError,
    Preprocess,
    example_value,
    image_layout,
)
from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError
from webapp.http import HubRequest
from webapp.registry.catalogue import demo
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.views.header import model_header
from webapp.registry.jobs.models import Job
from webapp.registry.tryit import examples as saved_examples
from webapp.registry.tryit import form as try_form
from webapp.registry.tryit import inference
from webapp.registry.tryit.actions import settings as try_actions
from webapp.registry.tryit.views import labels as labels_views
from webapp.text import localize

DEMO_PHOTOS = ("coffee.png", "chelsea.png", "china.jpg")


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
    return _try_page(request, model)


def _serving(model: Model) -> Version | None:
    if not model.serving_version:
        return None
    return model.versions.filter(number=model.serving_version).first()


def _try_page(
    request: HubRequest,
    model: Model,
    *,
    mark_error: dict[str, str] | None = None,
    status: int = 200,
) -> HttpResponse:
    """The Try it tab; ``mark_error`` (``input``, ``message``) reopens a refused image form."""
    context = model_header(request, model, "try")
    serving = _serving(model)
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    preprocess = inference.saved_preprocess(model).to_dict()
    presets = {k: {**p.to_dict(), "label": localize(PRESET_LABELS[k])} for k, p in PRESETS.items()}
    pp_fields = _preprocess_fields(preprocess, presets)
    if serving is not None:
        specs = inference.input_specs(serving)
        images = set(inference.image_inputs(model, specs))
        marked = (model.try_settings or {}).get("image_inputs")
        for index, spec in enumerate(specs):
            is_image = spec.name in images
            example = None if is_image else example_value(spec, "zeros")
            layouts = try_form.possible_layouts(spec)
            detected = image_layout(spec)
            markable = is_image or bool(layouts)
            inputs.append(
                {
                    "index": index,
                    "name": spec.name,
                    "dtype": spec.triton_type,
                    "shape": localize(spec.describe_shape()),
                    "image": is_image,
                    "image_like": detected is not None,
                    "example": json.dumps(example) if example is not None else "",
                    "elements": _elements(example),
                    # The "Treat as an image" form: offered where a photo could fit, and
                    # wherever one is expected already (so it can be undone).
                    "markable": markable,
                    "marked": isinstance(marked, list) and spec.name in marked,
                    "detected_layout": detected or "",
                    # Only a channel axis of any size needs the layout chosen.
                    "layouts": layouts if detected is None else [],
                    "layout": (
                        pp_fields["layout"]
                        if pp_fields["layout"] in layouts
                        else (layouts[0] if layouts else "")
                    ),
                    "mark_error": (
                        mark_error["message"]
                        if markable and mark_error and mark_error["input"] == spec.name
                        else ""
                    ),
                }
            )
        outputs = list(serving.signature.get("outputs", []))
    packaged = model.versions.filter(status=Version.Status.READY).order_by("-number")
    context |= {
        "serving": serving,
        "inputs": inputs,
        "outputs": outputs,
        "packaged": packaged,
        "examples": saved_examples.listed(model),
        "preprocess": pp_fields,
        "presets": presets,
        "mark_presets": _mark_presets(presets, pp_fields["preset"], preprocess),
        # A refusal about no input on the page (a stale form, a hand-made post) is shown once.
        "mark_error_elsewhere": (
            mark_error["message"] if mark_error and not any(i["mark_error"] for i in inputs) else ""
        ),
        # What try.js needs beyond the markup: the presets (to fill the fields when one is
        # picked) and the request limit (to refuse a too-big photo before sending it).
        "page_config": {
            "model": model.name,
            "presets": presets,
            "maxRequestBytes": settings.INFER_MAX_REQUEST_BYTES,
        },
        "photos": _demo_photos() if any(i["image"] for i in inputs) else [],
        **labels_views.labels_context(model, serving, can_operate=context["can_operate"]),
        "compile_job": _pending_job(model),
        "limits": {
            "bytes": settings.INFER_MAX_REQUEST_BYTES,
            "elements": settings.INFER_MAX_ELEMENTS,
            "pixels": settings.INFER_MAX_IMAGE_PIXELS,
            "rate": settings.INFER_RATE_PER_MINUTE,
            "timeout": settings.INFER_TIMEOUT_SECONDS,
        },
    }
    return render(request, "registry/model_try.html", context, status=status)


def _mark_presets(
    presets: dict[str, Any], current: str, saved: dict[str, Any]
) -> list[dict[str, Any]]:
    """The choices of the "Treat as an image" form, each saying what it does; the model's
    preset is chosen, and custom saved settings are offered first, to keep them."""
    choices = [
        {
            "key": key,
            "label": p["label"],
            "summary": _preprocess_summary(p),
            "checked": key == current,
        }
        for key, p in presets.items()
    ]
    if current == "custom":
        choices.insert(
            0,
            {
                "key": try_form.KEEP_SAVED,
                "label": gettext("This model's saved preprocessing"),
                "summary": _preprocess_summary(saved),
                "checked": True,
            },
        )
    return choices


def _preprocess_summary(pp: dict[str, Any]) -> str:
    """One line saying what a preprocessing does, e.g. "short side 256, centre 224 crop;
    mean 127, std 128; RGB" (and its layout when it fixes one)."""

    def triple(values: list[float]) -> str:
        return _number(values[0]) if len(set(values)) == 1 else ", ".join(map(_number, values))

    if not pp["resize_short"]:
        size = gettext("stretched to the model's size")
    else:
        size = gettext("short side %(short)s, centre %(crop)s crop") % {
            "short": pp["resize_short"],
            "crop": pp["crop"] or gettext("model-size"),
        }
    values = {
        "size": size,
        "mean": triple(pp["mean"]),
        "std": triple(pp["std"]),
        "color": pp["color"],
        "layout": pp.get("layout"),
    }
    if pp.get("layout"):
        return gettext("%(size)s; mean %(mean)s, std %(std)s; %(color)s, %(layout)s") % values
    return gettext("%(size)s; mean %(mean)s, std %(std)s; %(color)s") % values


def _preprocess_name(pp: Preprocess) -> str:
    """A preset's label (with the layout when one was chosen), else what it does."""
    plain = replace(pp, layout=None)
    label = next((localize(PRESET_LABELS[k]) for k, p in PRESETS.items() if p == plain), None)
    if label is None:
        return _preprocess_summary(pp.to_dict())
    if pp.layout:
        return gettext("%(label)s, layout %(layout)s") % {"label": label, "layout": pp.layout}
    return label


@require_POST
def model_try_image(request: HubRequest, name: str) -> HttpResponse:
    """Treat one input of the serving version as an image (saving the preprocessing chosen
    with it) or as a tensor again: ``image_inputs`` and ``preprocess`` of the model's Try it
    settings, saved by the action the API's ``PUT .../try-settings`` uses."""
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    serving = _serving(model)
    label = request.POST.get("input", "")
    try:
        if serving is None:
            raise HubError(
                gettext("%(model)s is not served yet; its inputs are known once a version serves.")
                % {"model": model.name},
                "not_served",
                409,
            )
        specs = inference.input_specs(serving)
        marking = try_form.image_marking(request.POST, specs, inference.saved_preprocess(model))
        wanted = set(inference.image_inputs(model, specs))
        if marking.image:
            wanted.add(marking.input)
        else:
            wanted.discard(marking.input)
        names = [s.name for s in specs if s.name in wanted]
        # Inputs of other versions keep their marks; only this signature's are decided here.
        marked = (model.try_settings or {}).get("image_inputs")
        known = {s.name for s in specs}
        if isinstance(marked, list):
            names += [n for n in marked if isinstance(n, str) and n not in known]
        changes: dict[str, Any] = {"image_inputs": names}
        if marking.preprocess is not None:
            changes["preprocess"] = marking.preprocess.to_dict()
        try_actions.save_try_settings(model=model, changes=changes, user=request.user)  # type: ignore[arg-type]
    except (InferenceInputError, HubError) as exc:
        if exc.status == 403:
            raise
        return _try_page(
            request,
            model,
            mark_error={"input": label, "message": localize(exc.message)},
            status=exc.status,
        )
    if marking.preprocess is not None:
        how = _preprocess_name(marking.preprocess)
        messages.success(
            request,
            gettext("%(input)s now takes a photo, preprocessed as: %(how)s.")
            % {"input": marking.input, "how": how},
        )
    else:
        messages.success(
            request,
            gettext("%(input)s now takes a tensor (JSON or .npy).") % {"input": marking.input},
        )
    return redirect("model-try", name=model.name)


def _preprocess_fields(pp: dict[str, Any], presets: dict[str, Any]) -> dict[str, Any]:
    """The form's starting values for an image input's preprocessing, and its preset's name."""
    preset = next(
        (
            key
            for key, p in presets.items()
            if all(p[f] == pp[f] for f in ("resize_short", "crop", "mean", "std", "color"))
        ),
        "custom",
    )
    return {
        "resize_short": pp["resize_short"],
        "crop": "" if pp["crop"] is None else pp["crop"],
        "mean": ", ".join(_number(v) for v in pp["mean"]),
        "std": ", ".join(_number(v) for v in pp["std"]),
        "color": pp["color"],
        "layout": pp.get("layout") or "",
        "preset": preset,
        "preset_label": presets[preset]["label"] if preset in presets else "custom",
    }


def _number(value: float) -> str:
    return f"{value:g}"


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

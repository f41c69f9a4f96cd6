"""The model's Captures tab: the capture settings, what is kept, and the captured requests.

Everyone with a role sees the settings and the counts; the requests themselves (their inputs
as images or as shapes and numbers, the caller) only operators, who may also change the
settings, delete, keep one as a Try it example, export or remove them all.
"""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import numpy as np
from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_POST
from PIL import Image

from model_store.inference.errors import InferenceInputError
from webapp.accounts.roles import Role, require_role, role_of
from webapp.errors import HubError, show_error
from webapp.http import HubRequest
from webapp.registry.capture import actions
from webapp.registry.capture.models import (
    LIMIT_MAX_ITEMS,
    LIMIT_RETENTION_HOURS,
    Capture,
)
from webapp.registry.catalogue.models import Model
from webapp.registry.catalogue.views.header import model_header
from webapp.registry.tryit.actions import examples as example_actions
from webapp.text import localize

PAGE_SIZE = 20
#: The time filter's choices: hours back (0: all).
SINCE_HOURS = (0, 1, 24, 168)
MIB = 1 << 20


class PolicyForm(forms.Form):
    enabled = forms.BooleanField(label=gettext_lazy("Capture requests"), required=False)
    sample_rate = forms.FloatField(
        label=gettext_lazy("Sample rate (percent)"), min_value=0, max_value=100, initial=100
    )
    max_items = forms.IntegerField(
        label=gettext_lazy("Keep at most (captures)"), min_value=1, max_value=LIMIT_MAX_ITEMS,
        initial=1000,
    )  # fmt: skip
    max_mib = forms.IntegerField(
        label=gettext_lazy("Keep at most (MiB)"), min_value=1, max_value=65_536, initial=1024
    )
    retention_hours = forms.IntegerField(
        label=gettext_lazy("Keep for (hours)"), min_value=1, max_value=LIMIT_RETENTION_HOURS,
        initial=168,
    )  # fmt: skip


def _filters(request: HubRequest) -> tuple[actions.Filters, dict[str, Any]]:
    version = request.GET.get("version", "")
    since = request.GET.get("since", "0")
    number = int(version) if version.isdigit() else None
    hours = int(since) if since.isdigit() and int(since) in SINCE_HOURS else 0
    start = timezone.now() - timedelta(hours=hours) if hours else None
    chosen = {"version": number, "since": hours}
    return actions.Filters(version=number, since=start), chosen


def model_captures(request: HubRequest, name: str) -> HttpResponse:
    model = get_object_or_404(Model, name=name)
    summary = actions.summary(model)
    policy = actions.policy_of(model)
    can_operate = role_of(request.user) >= Role.OPERATOR
    context = model_header(request, model, "captures") | {
        "summary": summary,
        "policy": policy,
        "can_operate": can_operate,
        "form": PolicyForm(
            initial={
                "enabled": policy.enabled or policy.pk is None,
                "sample_rate": policy.sample_rate,
                "max_items": policy.max_items,
                "max_mib": max(1, policy.max_bytes // MIB),
                "retention_hours": policy.retention_hours,
            }
        ),
        "since_choices": [(h, _since_label(h)) for h in SINCE_HOURS],
    }
    if can_operate:
        filters, chosen = _filters(request)
        found = actions.matching(model, filters)
        page = Paginator(found, PAGE_SIZE).get_page(request.GET.get("page"))
        versions = Capture.objects.filter(model=model).values_list("version", flat=True).distinct()
        query = {k: v for k, v in (("version", chosen["version"]), ("since", chosen["since"])) if v}
        export = reverse("api-captures-npz", args=[model.name])
        if filters.version is not None or filters.since is not None:
            params: dict[str, Any] = (
                {"version": filters.version} if filters.version is not None else {}
            )
            if filters.since is not None:
                params["since"] = filters.since.isoformat()
            export += "?" + urlencode(params)
        context |= {
            "page": page,
            "rows": [_row(model, c) for c in page.object_list],
            "versions": sorted(set(versions), reverse=True),
            "chosen": chosen,
            "query": query,
            "export_url": export,
            "matching": page.paginator.count,
        }
    return render(request, "registry/model_captures.html", context)


def _since_label(hours: int) -> str:
    return {
        0: gettext("any time"),
        1: gettext("last hour"),
        24: gettext("last day"),
        168: gettext("last week"),
    }[hours]


def _row(model: Model, capture: Capture) -> dict[str, Any]:
    row: dict[str, Any] = {"capture": capture, "image": False, "summary": []}
    for tensor in capture.inputs:
        if _looks_like_image(tensor["shape"]):
            row["image"] = True
    if not row["image"]:
        try:
            inputs, _ = actions.tensors(capture)
        except HubError:
            row["gone"] = True
            return row
        row["summary"] = [_summarise(n, a) for n, a in inputs.items()]
    return row


def _looks_like_image(shape: list[int]) -> bool:
    """One picture, or a batch of one: NCHW or NHWC with 1 or 3 channels, at least 16 x 16."""
    dims = shape[1:] if len(shape) == 4 and shape[0] == 1 else shape
    if len(dims) != 3:
        return False
    if dims[0] in (1, 3) and min(dims[1:]) >= 16:
        return True
    return dims[2] in (1, 3) and min(dims[:2]) >= 16


def _summarise(name: str, array: np.ndarray) -> dict[str, Any]:
    numeric = array.dtype.kind in "biuf" and array.size
    return {
        "name": name,
        "shape": "[" + ", ".join(str(d) for d in array.shape) + "]",
        "dtype": str(array.dtype),
        "min": float(array.min()) if numeric else None,
        "max": float(array.max()) if numeric else None,
        "mean": float(array.astype(np.float64).mean()) if numeric else None,
    }


def model_capture_image(request: HubRequest, name: str, capture_id: int) -> HttpResponse:
    """The capture's first image-shaped input as a PNG (scaled to 0-255 by its own range)."""
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    capture = get_object_or_404(Capture, model=model, pk=capture_id)
    inputs, _ = actions.tensors(capture)
    picture = next((a for a in inputs.values() if _looks_like_image(list(a.shape))), None)
    if picture is None:
        raise HubError(gettext("This capture has no input shaped like an image."), "no_image", 404)
    pixels = picture[0] if picture.ndim == 4 else picture
    if pixels.shape[0] in (1, 3) and pixels.shape[-1] not in (1, 3):
        pixels = np.moveaxis(pixels, 0, -1)  # CHW -> HWC
    pixels = pixels.astype(np.float64)
    low, high = float(pixels.min()), float(pixels.max())
    scaled = np.zeros_like(pixels) if high <= low else (pixels - low) / (high - low) * 255
    image = Image.fromarray(scaled.round().astype(np.uint8).squeeze(-1) if scaled.shape[-1] == 1
                            else scaled.round().astype(np.uint8))  # fmt: skip
    image.thumbnail((160, 160))
    out = io.BytesIO()
    image.save(out, format="PNG")
    response = HttpResponse(out.getvalue(), content_type="image/png")
    response["Cache-Control"] = "private, max-age=3600"
    return response


def _back(name: str, request: HubRequest) -> HttpResponse:
    url = reverse("model-captures", args=[name])
    query = request.POST.get("query", "")
    return redirect(f"{url}?{query}" if query and "\n" not in query else url)


@require_POST
def model_capture_settings(request: HubRequest, name: str) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    form = PolicyForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            label = form.fields[field].label if field in form.fields else ""
            messages.error(request, f"{label}: {' '.join(str(e) for e in errors)}")
        return _back(name, request)
    data = form.cleaned_data
    try:
        actions.set_policy(
            model,
            actions.PolicyIn(
                enabled=data["enabled"], sample_rate=data["sample_rate"],
                max_items=data["max_items"], max_bytes=data["max_mib"] * MIB,
                retention_hours=data["retention_hours"],
            ),
            request.user,  # type: ignore[arg-type]
        )  # fmt: skip
        messages.success(request, gettext("Capture settings saved."))
    except HubError as exc:
        show_error(request, exc)
    return _back(name, request)


@require_POST
def model_capture_delete(request: HubRequest, name: str, capture_id: int) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    actions.delete(Capture.objects.filter(model=model, pk=capture_id).select_related("model"))
    return _back(name, request)


@require_POST
def model_capture_example(request: HubRequest, name: str, capture_id: int) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    capture = get_object_or_404(Capture, model=model, pk=capture_id)
    label = (request.POST.get("name") or "").strip()[:80] or gettext("capture %(id)s") % {
        "id": capture.pk
    }
    try:
        example_actions.save_example(
            model=model, user=request.user, name=label,  # type: ignore[arg-type]
            inputs=actions.as_example_inputs(capture), size=capture.size,
        )  # fmt: skip
        messages.success(
            request, gettext("Saved as the example “%(name)s” on Try it.") % {"name": label}
        )
    except HubError as exc:
        show_error(request, exc)
    except InferenceInputError as exc:  # the inputs do not fit the serving version any more
        messages.error(request, localize(exc.message))
    return _back(name, request)


@require_POST
def model_captures_purge(request: HubRequest, name: str) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    removed = actions.purge(model, request.user)  # type: ignore[arg-type]
    messages.success(request, gettext("Removed %(count)s captures.") % {"count": removed})
    return redirect(reverse("model-captures", args=[name]))

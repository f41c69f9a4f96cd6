from __future__ import annotations

import logging
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.http import FileResponse, Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from model_store.errors import ModelStoreError
from model_store.targets import get_target
from webapp.accounts.roles import Role, require_role
from webapp.api.app import store_error
from webapp.errors import HubError, error_json, show_error
from webapp.http import HubRequest
from webapp.nodes import build_routing as routing
from webapp.registry.build.option_forms import OptionsForm
from webapp.registry.catalogue import demo
from webapp.registry.catalogue.actions import models as model_actions
from webapp.registry.catalogue.actions import versions as version_actions
from webapp.registry.catalogue.actions.models import create_model
from webapp.registry.catalogue.forms import (
    CatalogueFilterForm,
    ModelEditForm,
    NewModelForm,
    RetireForm,
)
from webapp.registry.catalogue.listing import CataloguePage, CatalogueQuery, find_models, known_tags
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs.models import Event
from webapp.registry.quantize import views as quantize_views
from webapp.registry.serving.cann_check import cann_skew
from webapp.registry.serving.memory import memory_estimate
from webapp.registry.serving.state import state_of
from webapp.registry.serving.views import canary as canary_views
from webapp.registry.serving.views import placement as placement_views
from webapp.text import localize

log = logging.getLogger(__name__)


PAGE_SIZE = 50


def model_list(request: HubRequest) -> HttpResponse:
    form = CatalogueFilterForm(request.GET or None)
    query = form.query(per_page=PAGE_SIZE)
    try:
        page = find_models(query, with_states=True)
    except HubError as exc:  # a hand-edited URL: say what is wrong, show the whole list
        messages.error(request, localize(exc.message))
        page = find_models(CatalogueQuery(per_page=PAGE_SIZE), with_states=True)
    context = {
        "page": page,
        "models": page.rows(),
        "form": form,
        "query": query.q,
        "filtered": form.is_filtered(),
        "known_tags": known_tags(),
        "previous_url": _page_url(page, -1),
        "next_url": _page_url(page, +1),
        # Retired ones count: with only retired models left, the list (and its Retired
        # switch) shows instead of the first-steps page.
        "total": Model.all_objects.count(),
        "triton_error": page.triton_error,
        "nav": "models",
        "demo_available": demo.is_available() and not demo.existing_demo(),
    }
    template = "registry/_model_rows.html" if request.htmx else "registry/model_list.html"
    return render(request, template, context)


def _page_url(page: CataloguePage, step: int) -> str:
    if (step < 0 and not page.has_previous) or (step > 0 and not page.has_next):
        return ""
    params = page.query.params(PAGE_SIZE, page=page.query.page + step)
    return f"{reverse('models')}?{urlencode(params)}"


def model_new(request: HubRequest) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    form = NewModelForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            model = create_model(user=request.user, **form.cleaned_data)  # type: ignore[arg-type]
        except HubError as exc:
            form.add_error("name" if exc.code == "name_taken" else None, localize(exc.message))
        else:
            messages.success(request, gettext("Model %(model)s created.") % {"model": model.name})
            return redirect("model", name=model.name)
    status = 400 if form.errors else 200
    return render(
        request, "registry/model_new.html", {"form": form, "nav": "models"}, status=status
    )


def model_detail(request: HubRequest, name: str) -> HttpResponse:
    model = get_object_or_404(Model.objects.select_related("created_by", "owner"), name=name)
    target = get_target(model.target)
    rows = model.versions.select_related("created_by", "revision_of").order_by("-number")
    state, triton_error = state_of(model.name, model.serving_version is not None)
    previous = (
        rows.filter(number=model.previous_version).first() if model.previous_version else None
    )
    context = {
        "model": model,
        "state": state,
        "triton_error": triton_error,
        "previous": previous,
        "events": Event.objects.filter(model=model).select_related("actor", "version")[:50],
        "target": target,
        "target_status": routing.build_status(target.name),
        "versions": rows,
        "jobs": model.jobs.select_related("version")[:5],
        "options_form": OptionsForm(target),
        "chunk_bytes": settings.UPLOAD_CHUNK_BYTES,
        "max_bytes": settings.UPLOAD_MAX_BYTES,
        "nav": "models",
    }
    if request.htmx and request.GET.get("part") == "versions":
        return render(request, "registry/_version_rows.html", context)
    if request.GET.get("part") == "state":  # the live badge in every tab's header
        return render(request, "registry/_model_state.html", context)
    context["nodes_card"] = placement_views.nodes_card(model)
    context.update(canary_views.card(request, model))
    context["demo_next"] = demo.next_steps(model)
    return render(request, "registry/model_detail.html", context)


def model_edit(request: HubRequest, name: str) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model.objects.select_related("owner"), name=name)
    form = ModelEditForm(request.POST or None, model=model)
    if request.method == "POST" and form.is_valid():
        try:
            model_actions.edit_model(model=model, user=request.user, **form.cleaned_data)  # type: ignore[arg-type]
        except HubError as exc:
            form.add_error(_EDIT_FIELDS.get(exc.code), localize(exc.message))
        else:
            messages.success(request, gettext("Saved %(model)s.") % {"model": model.name})
            return redirect("model", name=model.name)
    status = 400 if form.errors else 200
    context = {"model": model, "form": form, "nav": "models"}
    return render(request, "registry/model_edit.html", context, status=status)


_EDIT_FIELDS = {
    "invalid_tag": "tags",
    "too_many_tags": "tags",
    "unknown_owner": "owner",
    "invalid_description": "description",
}


def model_retire(request: HubRequest, name: str) -> HttpResponse:
    """The confirmation (GET) says what retiring does; POST asks for it."""
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    state, _ = state_of(model.name, model.serving_version is not None)
    form = RetireForm(request.POST or None, model=model, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            job = model_actions.request_retire(model=model, user=request.user, **form.cleaned_data)  # type: ignore[arg-type]
        except HubError as exc:
            if exc.status == 403:
                raise
            form.add_error(None, localize(exc.message))
        else:
            messages.info(
                request,
                gettext("Retiring %(model)s; this job does it.") % {"model": model.name},
            )
            return redirect("job", job_id=job.uuid)
    context = {
        "model": model,
        "state": state,
        "form": form,
        "versions": model.versions.count(),
        "nav": "models",
    }
    return render(
        request, "registry/model_retire.html", context, status=400 if form.errors else 200
    )


def retired_model(request: HubRequest, pk: int) -> HttpResponse:
    """A retired model: when and by whom, its versions as they were, its whole history."""
    model = get_object_or_404(
        Model.all_objects.exclude(retired_at=None).select_related(
            "created_by", "owner", "retired_by"
        ),
        pk=pk,
    )
    context = {
        "model": model,
        "versions": model.versions.select_related("created_by").order_by("-number"),
        "events": Event.objects.filter(model=model).select_related("actor", "version")[:300],
        "successor": Model.objects.filter(name=model.name).first(),
        "nav": "models",
    }
    return render(request, "registry/model_retired.html", context)


@require_POST
def version_new(request: HubRequest, name: str) -> JsonResponse:
    """The upload form's last step (JSON for upload.js): a finished upload becomes a version."""
    try:
        require_role(request.user, Role.OPERATOR)
    except HubError as exc:
        return error_json(exc)
    model = get_object_or_404(Model, name=name)
    form = OptionsForm(get_target(model.target), request.POST)
    if not form.is_valid():
        problems = "; ".join(
            f"{form.fields[k].label}: {' '.join(str(e) for e in v)}"
            for k, v in form.errors.items()
            if k in form.fields
        )
        return error_json(
            HubError(
                gettext("Check the options: %(problems)s") % {"problems": problems},
                "invalid_options",
            )
        )
    try:
        version, job = version_actions.create_version_from_upload(
            model=model,
            upload_id=request.POST.get("upload_id", ""),
            user=request.user,  # type: ignore[arg-type]
            options=form.options(),
            sha256=request.POST.get("sha256", ""),
            allow_duplicate=request.POST.get("allow_duplicate") == "1",
        )
    except ModelStoreError as exc:
        return error_json(store_error(exc))
    except HubError as exc:
        response = error_json(exc)
        if exc.code == "upload_corrupt":  # upload.js forgets the upload it would resume
            response = JsonResponse(
                {"error": exc.message, "code": exc.code, "upload_spent": True}, status=exc.status
            )
        return response
    return JsonResponse({"version": version.number, "job_url": f"/jobs/{job.uuid}/"}, status=201)


def version_detail(request: HubRequest, name: str, number: int) -> HttpResponse:
    version = get_object_or_404(
        Version.objects.select_related("model", "created_by", "revision_of"),
        model__name=name,
        model__retired_at=None,
        number=number,
    )
    context = {
        "model": version.model,
        "version": version,
        "target": get_target(version.model.target),
        "jobs": version.jobs.all()[:10],
        "nav": "models",
        "memory": _memory_estimate(version),
        "cann_skew": cann_skew(version),
        "int8_pair": quantize_views.pair(version),
        "quantized_as": list(
            version.revisions.filter(quantization__isnull=False).values_list("number", flat=True)
        ),
    }
    return render(request, "registry/version_detail.html", context)


def _memory_estimate(version: Version) -> dict[str, object] | None:
    """The memory estimate at the version's own config, or None (the page then says why)."""
    if not version.signature:
        return None
    try:
        return memory_estimate(version)
    except Exception:  # an estimate is a hint: it must never take the version page down
        log.warning("memory estimate of %s failed", version, exc_info=True)
        return None


def version_download(request: HubRequest, name: str, number: int, what: str) -> FileResponse:
    version = get_object_or_404(Version, model__name=name, model__retired_at=None, number=number)
    store = get_store()
    if what == "config":
        path = store.package_dir(name, number) / "config.pbtxt"
        filename = "config.pbtxt"
    elif what == "artifact" and version.artifact_name:
        path = store.package_dir(name, number) / str(number) / version.artifact_name
        filename = f"{name}-v{number}-{version.artifact_name}"
    elif what == "source":
        source = store.source_dir(name, number)
        path = next(
            (source / f for f in ("model.onnx", "bundle.zip") if (source / f).exists()), source
        )
        filename = f"{name}-v{number}-{path.name}"
    else:
        raise Http404
    if not path.is_file():
        raise Http404(gettext("That file is not there (yet)."))
    return FileResponse(path.open("rb"), as_attachment=True, filename=filename)


@require_POST
def version_override(request: HubRequest, name: str, number: int) -> HttpResponse:
    version = get_object_or_404(
        Version.objects.select_related("model"),
        model__name=name,
        model__retired_at=None,
        number=number,
    )
    try:
        version_actions.override_verification(version, request.user, request.POST.get("reason", ""))  # type: ignore[arg-type]
        messages.success(
            request, gettext("Verification overridden; the override is in the history.")
        )
    except HubError as exc:
        show_error(request, exc)
    return redirect("version", name=name, number=number)


@require_POST
def version_delete(request: HubRequest, name: str, number: int) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    version = get_object_or_404(
        Version.objects.select_related("model"),
        model__name=name,
        model__retired_at=None,
        number=number,
    )
    try:
        version_actions.delete_version(version=version, user=request.user)  # type: ignore[arg-type]
        messages.success(
            request, gettext("Version %(number)s deleted (files and record).") % {"number": number}
        )
    except HubError as exc:
        show_error(request, exc)
    return redirect("model", name=name)

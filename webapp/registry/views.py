from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from webapp.accounts.roles import Role, role_of
from webapp.http import HubRequest
from webapp.registry import actions
from webapp.registry.forms import NewModelForm
from webapp.registry.models import Model


def _require(request: HubRequest, role: Role) -> None:
    if role_of(request.user) < role:
        raise PermissionDenied(f"This needs the {role.label} role.")


def model_list(request: HubRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()[:100]
    rows = Model.objects.select_related("created_by")
    if query:
        rows = rows.filter(Q(name__icontains=query) | Q(description__icontains=query))
    context = {"models": rows, "query": query, "total": Model.objects.count(), "nav": "models"}
    template = "registry/_model_rows.html" if request.htmx else "registry/model_list.html"
    return render(request, template, context)


def model_new(request: HubRequest) -> HttpResponse:
    _require(request, Role.OPERATOR)
    form = NewModelForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            model = actions.create_model(user=request.user, **form.cleaned_data)  # type: ignore[arg-type]
        except actions.RegistryError as exc:
            form.add_error("name" if exc.code == "name_taken" else None, exc.message)
        else:
            messages.success(request, f"Model {model.name} created.")
            return redirect("model", name=model.name)
    status = 400 if form.errors else 200
    return render(
        request, "registry/model_new.html", {"form": form, "nav": "models"}, status=status
    )


def model_detail(request: HubRequest, name: str) -> HttpResponse:
    model = get_object_or_404(Model.objects.select_related("created_by"), name=name)
    return render(request, "registry/model_detail.html", {"model": model, "nav": "models"})

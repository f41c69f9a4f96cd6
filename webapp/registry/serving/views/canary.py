"""The model page's Canary card: start one, follow it live, promote it now or abort it.

The card is a partial (``?`` of ``model-canary``) that polls itself every 2 seconds while a
canary is active, so both versions' numbers and each decision show as the watcher makes them.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.http import require_POST

from model_store.canary import DEFAULT_MIN_REQUESTS
from model_store.targets import get_target
from webapp.accounts.roles import Role, require_role, role_of
from webapp.errors import HubError, show_error
from webapp.http import HubRequest
from webapp.registry.catalogue.models import Model
from webapp.registry.serving import canary_traffic
from webapp.registry.serving.actions import canary as canary_actions
from webapp.registry.serving.models import Canary
from webapp.registry.serving.switch import refusal


class CanaryForm(forms.Form):
    version = forms.TypedChoiceField(label=gettext_lazy("Candidate"), coerce=int, choices=())
    steps = forms.CharField(
        label=gettext_lazy("Steps, in percent of traffic"),
        initial="10, 50, 100",
        help_text=gettext_lazy("Increasing, ending at 100: reaching 100 promotes."),
    )
    step_seconds = forms.IntegerField(
        label=gettext_lazy("Seconds per step"), initial=60, min_value=5, max_value=86_400
    )
    max_error_rate = forms.FloatField(
        label=gettext_lazy("Highest error rate (%)"), initial=1.0, min_value=0, max_value=100
    )
    max_p99_ratio = forms.FloatField(
        label=gettext_lazy("Highest p99 (x serving)"), initial=1.5, min_value=1.01
    )
    min_requests = forms.IntegerField(
        label=gettext_lazy("Least requests per side"),
        initial=DEFAULT_MIN_REQUESTS,
        min_value=1,
        max_value=1_000_000,
    )

    def __init__(self, model: Model, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        candidates = [
            v for v in model.versions.order_by("-number")
            if v.number != model.serving_version and v.publishable and refusal(v) is None
        ]  # fmt: skip
        field = self.fields["version"]
        assert isinstance(field, forms.TypedChoiceField)
        field.choices = [(v.number, f"v{v.number}") for v in candidates]

    def clean_steps(self) -> list[int]:
        text = self.cleaned_data["steps"]
        try:
            return [int(part) for part in text.replace(";", ",").split(",") if part.strip()]
        except ValueError:
            raise forms.ValidationError(gettext("Whole percentages, e.g. 10, 50, 100.")) from None


def card(request: HubRequest, model: Model) -> dict[str, Any]:
    """What the Canary card shows: the newest canary with its live numbers, or the form."""
    latest = canary_actions.latest_canary(model)
    live = None
    if latest is not None and latest.state == Canary.State.RUNNING:
        live = canary_traffic.live(
            latest.window(), latest.candidate, latest.baseline, model=model.name,
            since=latest.step_started,
        )  # fmt: skip
    elapsed = None
    if latest is not None and latest.is_active and latest.step_started is not None:
        elapsed = int((timezone.now() - latest.step_started).total_seconds())
    return {
        "canary": latest,
        "elapsed": elapsed,
        "badge": _BADGES.get(latest.outcome or latest.state, "badge-busy") if latest else "",
        "label": Canary.State(latest.outcome or latest.state).label if latest else "",
        "active": latest is not None and latest.is_active,
        "live": live,
        "decisions": list(reversed(latest.decisions))[:20] if latest else [],
        "form": CanaryForm(model),
        "why_not": _why_not(model),
        "can_operate": role_of(request.user) >= Role.OPERATOR,
        "model": model,
    }


_BADGES = {
    "promoted": "badge-ok",
    "rolled_back": "badge-bad",
    "failed": "badge-bad",
    "aborted": "badge-idle",
}


def _why_not(model: Model) -> str:
    """Why this model cannot have a canary, in the page's language; empty when it can."""
    if model.serving_version is None:
        return gettext("Serve a version first; a canary compares the next one with it.")
    if not get_target(model.target).versions_side_by_side:
        return gettext(
            "%(target)s models hold one version per Triton model, so two versions cannot "
            "share traffic: switch, and roll back if it misbehaves."
        ) % {"target": model.target}
    return ""


def model_canary(request: HubRequest, name: str) -> HttpResponse:
    """The card alone (the page polls it while a canary is active)."""
    model = get_object_or_404(Model, name=name)
    return render(request, "registry/_canary_card.html", card(request, model))


@require_POST
def model_canary_start(request: HubRequest, name: str) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    form = CanaryForm(model, request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            label = form.fields[field].label if field in form.fields else ""
            said = " ".join(str(e) for e in errors)
            messages.error(request, f"{label}: {said}" if label else said)
        return redirect(f"{_model_url(name)}#canary")
    data = form.cleaned_data
    try:
        canary_actions.start_canary(
            model=model,
            version=data["version"],
            steps=data["steps"],
            step_seconds=data["step_seconds"],
            max_error_rate=data["max_error_rate"] / 100,
            max_p99_ratio=data["max_p99_ratio"],
            min_requests=data["min_requests"],
            user=request.user,  # type: ignore[arg-type]
        )
    except HubError as exc:
        show_error(request, exc)
    return redirect(f"{_model_url(name)}#canary")


@require_POST
def model_canary_promote(request: HubRequest, name: str) -> HttpResponse:
    return _hand(request, name, canary_actions.promote_now)


@require_POST
def model_canary_abort(request: HubRequest, name: str) -> HttpResponse:
    return _hand(request, name, canary_actions.abort)


def _hand(request: HubRequest, name: str, act: Any) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    try:
        act(model=model, user=request.user)
    except HubError as exc:
        show_error(request, exc)
    return redirect(f"{_model_url(name)}#canary")


def _model_url(name: str) -> str:
    return reverse("model", args=[name])

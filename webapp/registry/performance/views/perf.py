from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError, show_error
from webapp.http import HubRequest
from webapp.registry.capture.models import Capture
from webapp.registry.catalogue.models import Model
from webapp.registry.catalogue.views.header import model_header
from webapp.registry.performance.actions import sweeps as sweep_actions
from webapp.registry.tryit import examples as saved_examples


def model_perf(request: HubRequest, name: str) -> HttpResponse:
    model = get_object_or_404(Model, name=name)
    context = model_header(request, model, "perf")
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
        # The form starts as the newest sweep was asked, so a second run is one click.
        "sweep_mode": (runs[0].plan or {}).get("mode", "concurrency") if runs else "concurrency",
        "default_rates": ", ".join(
            f"{r:g}" for r in next((r.plan["rates"] for r in runs if r.plan.get("rates")), [])
        )
        or "10, 20, 50, 100",
        "examples": saved_examples.listed(model),
        "has_captures": context["can_operate"] and Capture.objects.filter(model=model).exists(),
    }
    if request.htmx and request.GET.get("part") == "runs":
        return render(request, "registry/_perf_runs.html", context)
    return render(request, "registry/model_perf.html", context)


@require_POST
def model_sweep(request: HubRequest, name: str) -> HttpResponse:
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    try:
        example = request.POST.get("example_id") or None
        mode = request.POST.get("mode", "concurrency")
        sweep_actions.request_sweep(
            model=model,
            user=request.user,  # type: ignore[arg-type]
            max_concurrency=int(request.POST.get("max_concurrency", "8")),
            step_seconds=int(request.POST.get("step_seconds", settings.SWEEP_STEP_SECONDS)),
            example_id=int(example) if example and example.isdigit() else None,
            captured=example == "capture",
            mode=mode,
            rates=sweep_actions.parse_rates(request.POST.get("rates", ""))
            if mode == "rate"
            else None,
        )
        messages.success(request, gettext("Sweep started; the chart fills in level by level."))
    except ValueError:
        messages.error(request, gettext("Concurrency and seconds must be whole numbers."))
    except HubError as exc:
        show_error(request, exc)
    return redirect("model-perf", name=name)

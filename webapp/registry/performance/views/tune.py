"""The Performance tab's "Find the best config": start a search, follow it, adopt the winner.

The panel renders itself (``model_tune_panel``), so the Performance page only includes a
placeholder that loads it and reloads it on every ``tuning`` live event; while a search runs
it also polls, in case the socket is down.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from webapp.accounts.roles import Role, require_role, role_of
from webapp.errors import HubError, show_error
from webapp.http import HubRequest
from webapp.nodes import summaries as ops_nodes
from webapp.registry.catalogue.models import Model
from webapp.registry.performance.actions import revisions as revision_actions
from webapp.registry.performance.actions import tuning as tuning_actions
from webapp.registry.performance.models import TuningRun
from webapp.registry.serving import placement

BUDGET_CHOICES = (60, 120, 300, 600, 1200, 1800)


def _winner_preview(run: TuningRun) -> dict[str, Any] | None:
    """The winner's config diff against the version tuned, when there is a winner to adopt."""
    best = run.best_trial
    if best is None or not best.get("changes") or run.revision is not None:
        return None
    try:
        return revision_actions.preview_revision(run.version, best["changes"])
    except HubError as exc:
        return {"error": exc.message}


def _chart_rows(run: TuningRun) -> dict[str, Any]:
    return {
        "objective": run.objective,
        "best": run.best,
        "trials": [
            {k: t.get(k) for k in ("index", "label", "state", "throughput_rps", "p99_ms")}
            for t in run.trials
        ],
    }


def _trial_nodes() -> list[str]:
    """Where trials may run: the stack's own Triton first, then every node that is up."""
    others = [n["name"] for n in ops_nodes.summaries() if n["state"] == "up"]
    return [placement.LOCAL, *sorted(n for n in others if n != placement.LOCAL)]


def model_tune_panel(request: HubRequest, name: str) -> Any:
    model = get_object_or_404(Model, name=name)
    runs = list(model.tuning_runs.select_related("job", "version", "model", "revision")[:5])
    latest = runs[0] if runs else None
    context = {
        "model": model,
        "can_operate": role_of(request.user) >= Role.OPERATOR,
        "latest": latest,
        "older": runs[1:],
        "running": latest is not None and not latest.job.is_finished,
        "winner": _winner_preview(latest) if latest and latest.job.is_finished else None,
        "chart": _chart_rows(latest) if latest else None,
        "budget_choices": [b for b in BUDGET_CHOICES if b <= settings.TUNE_MAX_BUDGET_S],
        "max_concurrency": settings.TUNE_MAX_CONCURRENCY,
        "nodes": _trial_nodes(),
    }
    return render(request, "registry/_tune_panel.html", context)


@require_POST
def model_tune_start(request: HubRequest, name: str) -> Any:
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    objective = request.POST.get("objective", "throughput")
    try:
        p99 = request.POST.get("p99_ms") or None
        rate = request.POST.get("rate") or None
        tuning_actions.request_tune(
            model=model,
            user=request.user,  # type: ignore[arg-type]
            objective=objective,
            p99_ms=float(p99) if p99 and objective == "throughput" else None,
            rate=float(rate) if rate and objective == "latency" else None,
            budget_s=int(request.POST.get("budget_s", "300")),
            strategy=request.POST.get("strategy", "search"),
            node=request.POST.get("node", placement.LOCAL),
        )
        messages.success(request, gettext("Search started; trials appear as they finish."))
    except ValueError:
        messages.error(request, gettext("The budget, p99 and rate must be numbers."))
    except HubError as exc:
        show_error(request, exc)
    return redirect("model-perf", name=name)


@require_POST
def model_tune_revise(request: HubRequest, name: str, run_id: int) -> Any:
    require_role(request.user, Role.OPERATOR)
    model = get_object_or_404(Model, name=name)
    run = get_object_or_404(
        TuningRun.objects.select_related("job", "version", "model", "revision"),
        pk=run_id,
        model=model,
    )
    try:
        revision, _job, plan = tuning_actions.revise_from_winner(run, request.user)  # type: ignore[arg-type]
    except HubError as exc:
        show_error(request, exc)
        return redirect("model-perf", name=name)
    if plan.reuses_artifact:
        said = gettext(
            "Version %(number)s has the winning config; it reuses the built model. "
            "Serve it when ready."
        )
    else:
        said = gettext(
            "Version %(number)s has the winning config; it is being rebuilt. Serve it when ready."
        )
    messages.success(request, said % {"number": revision.number})
    return redirect("version", name=name, number=revision.number)

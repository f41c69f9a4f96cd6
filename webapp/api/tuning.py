"""Finding the best serving config (``/models/{name}/tune``): start, follow, adopt the winner."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.translation import gettext
from ninja import Router, Status

from webapp.api import types
from webapp.api.app import OPERATOR, errors
from webapp.api.lookups import model_or_404
from webapp.errors import HubError
from webapp.registry.catalogue.models import Model
from webapp.registry.performance.actions import tuning as tuning_actions
from webapp.registry.performance.models import TuningRun

router = Router(tags=["tuning"], exclude_unset=True)


def _run(model: Model, run_id: int) -> TuningRun:
    run = (
        model.tuning_runs.select_related("job", "version", "model", "revision")
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        message = gettext("%(name)s has no tuning run %(run)s.")
        raise HubError(message % {"name": model.name, "run": run_id}, "not_found", 404)
    return run


@router.get(
    "/models/{name}/tune",
    response={200: types.TuneList, **errors(404)},
    url_name="api-tunes",
    summary="Tuning runs of a model, newest first",
)
def tune_list(request: HttpRequest, name: str) -> Any:
    model = model_or_404(name)
    runs = model.tuning_runs.select_related("job", "version", "model", "revision")[:20]
    return {"runs": [r.to_dict() for r in runs]}


@router.post(
    "/models/{name}/tune",
    response={202: types.TuneOut, **errors(400, 404, 409)},
    auth=OPERATOR,
    summary="Find the best config of the serving version (operator): trials as temporary "
    "models beside it, within budget_s; 202 with the run; cancel through its job",
)
def tune_create(request: HttpRequest, name: str, data: types.TuneIn) -> Any:
    model = model_or_404(name)
    run = tuning_actions.request_tune(
        model=model,
        user=request.user,  # type: ignore[arg-type]
        objective=data.objective,
        p99_ms=data.p99_ms,
        rate=data.rate,
        budget_s=data.budget_s,
        max_concurrency=data.max_concurrency,
        strategy=data.strategy,
        node=data.node,
        captured=data.captured,
    )
    return Status(202, run.to_dict())


@router.get(
    "/models/{name}/tune/{int:run_id}",
    response={200: types.TuneOut, **errors(404)},
    url_name="api-tune",
    summary="One tuning run: its state, every trial and the best",
)
def tune_detail(request: HttpRequest, name: str, run_id: int) -> Any:
    return _run(model_or_404(name), run_id).to_dict()


@router.post(
    "/models/{name}/tune/{int:run_id}/revise",
    response={201: types.NewRevision, **errors(404, 409)},
    auth=OPERATOR,
    url_name="api-tune-revise",
    summary="Make the winning config a revision of the version tuned (reuses its artifact)",
)
def tune_revise(request: HttpRequest, name: str, run_id: int) -> Any:
    run = _run(model_or_404(name), run_id)
    revision, job, plan = tuning_actions.revise_from_winner(run, request.user)  # type: ignore[arg-type]
    return Status(
        201,
        {
            "version": revision.number,
            "job": str(job.uuid),
            "status": revision.status,
            "revision_of": run.version.number,
            "reuses_artifact": plan.reuses_artifact,
            "rebuild": plan.rebuild,
            "changed": plan.changed,
        },
    )

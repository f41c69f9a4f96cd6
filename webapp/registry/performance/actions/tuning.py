"""Asking for the best config of a served model, and making the winner a revision.

The search runs on a worker (``webapp.registry.performance.tuning``); here the request is
checked and recorded. The version tuned is the one serving when asked; trials never touch it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext

from model_store.perf.tune import Objective
from model_store.targets import get_target
from model_store.text import Message, say
from webapp import dispatch, live
from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError
from webapp.nodes import summaries as ops_nodes
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.jobs.steps import TUNE_STEPS, initial_steps
from webapp.registry.performance import captured_inputs
from webapp.registry.performance.actions.revisions import request_revision
from webapp.registry.performance.models import TuningRun
from webapp.registry.serving import placement

#: Below this, a search cannot measure more than the serving config.
MIN_BUDGET_S = 30


def _objective(kind: str, p99_ms: float | None, rate: float | None) -> Objective:
    try:
        if kind == "throughput":
            return Objective("throughput", p99_ms=p99_ms)
        if kind == "latency":
            return Objective("latency", rate_rps=rate)
        return Objective(kind)  # type: ignore[arg-type]
    except ValueError as exc:
        raise HubError(
            gettext(
                "%(problem)s. Ask for the highest throughput with p99 under a budget "
                '({"objective": "throughput", "p99_ms": 50}) or the lowest p99 at a rate '
                '({"objective": "latency", "rate": 100}).'
            )
            % {"problem": exc},
            "invalid_objective",
        ) from None


def request_tune(
    *,
    model: Model,
    user: User,
    objective: str,
    p99_ms: float | None = None,
    rate: float | None = None,
    budget_s: int = 300,
    max_concurrency: int | None = None,
    strategy: str = TuningRun.Strategy.SEARCH,
    node: str = placement.LOCAL,
    captured: bool = False,
) -> TuningRun:
    """Check the request and queue the search; the serving version is the one tuned."""
    require_role(user, Role.OPERATOR)
    goal = _objective(objective, p99_ms, rate)
    if not MIN_BUDGET_S <= budget_s <= settings.TUNE_MAX_BUDGET_S:
        raise HubError(
            gettext("The time budget goes from %(min)s to %(max)s s (TUNE_MAX_BUDGET_S).")
            % {"min": MIN_BUDGET_S, "max": settings.TUNE_MAX_BUDGET_S},
            "invalid_field",
        )
    if strategy not in TuningRun.Strategy.values:
        raise HubError(
            gettext("Unknown strategy %(strategy)s; use search or grid.")
            % {"strategy": repr(strategy)},
            "invalid_field",
        )
    concurrency = max_concurrency or settings.TUNE_MAX_CONCURRENCY
    if not 1 <= concurrency <= settings.TUNE_MAX_CONCURRENCY:
        raise HubError(
            gettext(
                "Trials may keep 1 to %(max)s requests in flight here "
                "(TUNE_MAX_CONCURRENCY): they share the host with what serves."
            )
            % {"max": settings.TUNE_MAX_CONCURRENCY},
            "invalid_field",
        )
    if model.serving_version is None:
        raise HubError(
            gettext("%(model)s is not served; serve a version before tuning it.")
            % {"model": model.name},
            "not_served",
            409,
        )
    _check_node(node)
    version = model.versions.get(number=model.serving_version)
    target = get_target(model.target)
    if target.name == "npu_ge":
        # Trials are models loaded beside the serving one; in the GE backend a session is
        # never freed and one failed initialisation blocks every later npu_ge load in that
        # Triton until it restarts (docs/ge-backend.md#statistics-reload-and-unload).
        raise HubError(
            gettext(
                "Tuning loads trial models into the Triton that serves; for npu_ge that would "
                "leave NPU memory behind with every trial, and one failed trial would block "
                "every later npu_ge load there until Triton restarts. Change the serving "
                "options as a revision of the version instead, or tune an acl build of the "
                "same model."
            ),
            "not_tunable",
            409,
        )
    if not target.accepts_uploads or not target.config_only_options:
        raise HubError(
            gettext("The %(target)s target has no serving options the hub can change here.")
            % {"target": target.name},
            "not_tunable",
            409,
        )
    capture_id = captured_inputs.newest(version) if captured else None
    busy = Job.objects.filter(
        model=model, kind__in=[Job.Kind.TUNE, Job.Kind.SWEEP], state__in=jobs.UNFINISHED
    ).first()
    if busy is not None:
        raise HubError(
            gettext(
                "A %(kind)s of this model is running already; wait for "
                "it or cancel it (two measurements at once would skew both)."
            )
            % {"kind": busy.get_kind_display().lower()},
            "tune_running",
            409,
        )
    with transaction.atomic():
        job = Job.objects.create(
            kind=Job.Kind.TUNE,
            model=model,
            version=version,
            steps=initial_steps(TUNE_STEPS),
            params={"objective": goal.to_dict(), "budget_s": budget_s, "capture_id": capture_id},
            created_by=user,
        )
        run = TuningRun.objects.create(
            model=model,
            version=version,
            job=job,
            objective=goal.to_dict(),
            budget_s=budget_s,
            max_concurrency=concurrency,
            strategy=strategy,
            node=node,
        )
        text = say(
            "%(user)s asked for the best config of v%(version)s: %(goal)s, within %(budget)s s.",
            user=user.get_username(),
            version=version.number,
            goal=_goal(goal),
            budget=budget_s,
        )
        jobs.record_event(
            "tune.requested",
            text,
            model=model,
            version=version,
            job=job,
            actor=user,
        )
        transaction.on_commit(lambda: _enqueue(job))
    return run


def _goal(goal: Objective) -> Message:
    """``goal.describe()`` as a sentence the reader's language can say."""
    if goal.kind == "throughput":
        return say("highest throughput with p99 <= %(p99)s ms", p99=f"{goal.p99_ms:g}")
    return say("lowest p99 at %(rate)s requests/s", rate=f"{goal.rate_rps:g}")


def _check_node(node: str) -> None:
    """Trials run on the stack's Triton or on a node that reports in (and is not draining)."""
    if node == placement.LOCAL:
        return
    known = {n["name"]: n for n in ops_nodes.summaries()}
    if node not in known:
        raise HubError(
            gettext("There is no node %(node)s.") % {"node": repr(node)}, "unknown_node", 404
        )
    if known[node]["state"] != "up":
        raise HubError(
            gettext(
                "Node %(node)s is %(state)s; trials need a node that reports in and is "
                "not draining."
            )
            % {"node": node, "state": known[node]["state"]},
            "node_not_up",
            409,
        )


def _enqueue(job: Job) -> None:
    dispatch.tune_job(job.pk)
    live.publish("tuning", {"model": job.model.name, "job": str(job.uuid)})


def revise_from_winner(run: TuningRun, user: User) -> tuple[Version, Job, Any]:
    """Make the best trial's config a revision of the version tuned (reusing its artifact)."""
    if run.job.state != Job.State.SUCCEEDED:
        raise HubError(gettext("The search has not finished."), "not_finished", 409)
    best = run.best_trial
    if best is None:
        raise HubError(gettext("No trial met the objective; there is no winner."), "no_winner", 409)
    if not best["changes"]:
        raise HubError(
            gettext("The serving config won: there is nothing to change."),
            "serving_config_won",
            409,
        )
    if run.revision is not None:
        raise HubError(
            gettext("The winner is already version %(number)s.") % {"number": run.revision.number},
            "already_revised",
            409,
        )
    revision, job, plan = request_revision(run.version, best["changes"], user)
    TuningRun.objects.filter(pk=run.pk).update(revision=revision)
    run.revision = revision
    return revision, job, plan

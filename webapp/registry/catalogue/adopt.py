"""Adopting an existing Triton repository: the scan and plan against the hub, and the action.

The scan and plan are Django-free (:mod:`model_store.adopt`); here they meet the database:
:func:`dry_run` plans against the hub's models, :func:`start_adoption` records the chosen
models and versions and sends one ``adopt`` job per version to the workers (or runs them in
this process, for the management command). The copying itself is
:mod:`webapp.registry.catalogue.adopt_work`.
Nothing in the team's repository is ever moved or edited.

Only admins adopt: it reads any path the hub's processes can read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction

from model_store.adopt import (
    AdoptionPlan,
    ExistingModel,
    PlannedModel,
    RepositoryScan,
    ScannedModel,
    plan_adoption,
    scan_repository,
)
from model_store.errors import ModelStoreError
from model_store.text import as_json, say
from webapp import dispatch
from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Event, Job

log = logging.getLogger(__name__)

#: The kind of the jobs that copy one adopted version (one job per version, so each version
#: is whole or absent on its own).
ADOPT_KIND = Job.Kind.ADOPT
ADOPT_STEPS = ("copy", "verify", "package")
#: Kind of the Event that records where a model was adopted from (re-adoption reads it).
ADOPTED_EVENT = "model.adopted"


@dataclass
class DryRun:
    """A scan and what adopting it would do now."""

    scan: RepositoryScan
    plan: AdoptionPlan

    def rows(self) -> list[tuple[ScannedModel, PlannedModel]]:
        return list(zip(self.scan.models, self.plan.models, strict=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": str(self.scan.root),
            "problems": [p.to_dict() for p in self.scan.problems],
            "models": [
                {**found.to_dict(), "plan": planned.to_dict()} for found, planned in self.rows()
            ],
        }


def existing_models(names: Iterable[str]) -> dict[str, ExistingModel]:
    """What the hub holds under each of ``names``: targets, version digests, adoption origin."""
    found: dict[str, ExistingModel] = {}
    for model in Model.objects.filter(name__in=set(names)).prefetch_related("versions"):
        versions = [v for v in model.versions.all() if v.status != Version.Status.FAILED]
        origin = Event.objects.filter(model=model, kind=ADOPTED_EVENT).order_by("-created").first()
        found[model.name] = ExistingModel(
            target=model.target,
            digests=frozenset(v.source_sha256 for v in versions),
            numbers=frozenset(v.number for v in versions),
            adopted_from=str((origin.data or {}).get("root", "")) if origin else "",
        )
    return found


def dry_run(
    path: str | Path,
    *,
    chosen: Iterable[str] | None = None,
    renames: Mapping[str, str] | None = None,
) -> DryRun:
    """Scans ``path`` and plans against the hub; changes nothing anywhere.

    Raises:
        HubError: 400 when the path cannot be scanned or a rename is wrong.
    """
    try:
        scan = scan_repository(Path(str(path).strip()))
        names = {m.directory for m in scan.models} | set((renames or {}).values())
        plan = plan_adoption(scan, existing_models(names), chosen=chosen, renames=renames)
    except ModelStoreError as exc:
        raise HubError(exc.message, getattr(exc, "code", "invalid_path")) from exc
    return DryRun(scan, plan)


def start_adoption(
    *,
    path: str | Path,
    user: User | None,
    chosen: Iterable[str] | None = None,
    renames: Mapping[str, str] | None = None,
    in_process: bool = False,
) -> tuple[DryRun, list[Job]]:
    """Scans and plans again (never trusting an earlier page), records what will be copied and
    queues one job per version; ``in_process`` runs the jobs here instead (the command).

    Raises:
        HubError: Not an admin (403), a bad path or rename (400), a model that appeared in
            the hub meanwhile under a chosen name (409).
    """
    if user is not None:
        require_role(user, Role.ADMIN)
    result = dry_run(path, chosen=chosen, renames=renames)
    created: list[Job] = []
    with transaction.atomic():
        for found, planned in result.rows():
            if planned.copies:
                created += _record_model(result.scan, found, planned, user)
        if not in_process:
            transaction.on_commit(lambda: _enqueue_all(created))
    if in_process:
        from webapp.registry.catalogue.adopt_work import run_adopt_job

        for job in created:
            run_adopt_job(job.pk)
    return result, created


def _record_model(
    scan: RepositoryScan, found: ScannedModel, planned: PlannedModel, user: User | None
) -> list[Job]:
    model, made = Model.objects.select_for_update().get_or_create(
        name=planned.hub_name,
        defaults={
            "target": found.target,
            "description": f"Adopted from {found.path}.",
            "created_by": user,
        },
    )
    if not made and planned.action == "adopt":
        raise HubError(
            f"A model called {planned.hub_name} appeared in the hub meanwhile; run the dry run "
            "again and choose skip or another name.",
            "name_taken",
            409,
        )
    who = user.get_username() if user else say("The hub")
    jobs.record_event(
        model=model,
        kind=ADOPTED_EVENT,
        actor=user,
        message=say(
            "%(who)s adopted %(directory)s from %(root)s (versions %(versions)s, target "
            "%(target)s).",
            who=who,
            directory=found.directory,
            root=str(scan.root),
            versions=", ".join(map(str, planned.versions)),
            target=found.target,
        ),
        data={
            "root": str(scan.root),
            "directory": found.directory,
            "versions": planned.versions,
            "backend": found.backend,
            "limits": found.limits,
        },
    )
    by_number = {v.number: v for v in found.versions}
    return [_record_version(model, found, by_number[n], user) for n in planned.versions]


def _finding(problem: Any) -> dict[str, Any]:
    """A scan or lint problem as a stored finding (its message said on the version page)."""
    message = as_json(problem.message)
    return {"level": problem.level, "code": problem.code, "message": message, "advice": ""}


def _record_version(model: Model, found: ScannedModel, scanned: Any, user: User | None) -> Job:
    problems = [*found.problems, *scanned.problems]
    # A failed earlier try left only its row (its job removed every file): try again.
    Version.objects.filter(
        model=model, number=scanned.number, status=Version.Status.FAILED
    ).delete()
    version = Version.objects.create(
        model=model,
        number=scanned.number,
        source_filename=f"{found.directory}/{scanned.number}/"[:128],
        source_sha256=scanned.digest,
        source_size=scanned.size,
        options={},
        signature=found.signature,
        findings=[_finding(p) for p in problems if p.level in ("error", "warning")],
        verification={
            "status": "adopted",
            "reason": "Adopted as found; not verified by the hub yet.",
            "adopted": True,
        },
        config_pbtxt=found.config_text,
        created_by=user,
    )
    return Job.objects.create(
        kind=ADOPT_KIND,
        model=model,
        version=version,
        steps=[{"name": n, "label": n, "state": "pending", "message": ""} for n in ADOPT_STEPS],
        params={
            "origin": str(found.path / str(scanned.number)),
            "files": [
                {"path": f.relpath, "sha256": f.sha256, "size": f.size} for f in scanned.files
            ],
            "backend": found.backend,
        },
        created_by=user,
    )


def _enqueue_all(created: list[Job]) -> None:
    for job in created:
        try:
            dispatch.adopt_job(job.pk)
        except Exception:  # Redis is away: the job stays queued and says so on its page
            log.warning("adopt job %s could not be queued", job.uuid, exc_info=True)

"""Config revisions: a packaged version with other serving options becomes the next version.

``preview_revision`` answers what a change would do (the new config.pbtxt, its diff, the
target's findings and the linter's problems, and whether the artifact can be reused) without
writing anything: the page's form calls it as the operator edits. ``request_revision`` makes
the version: it shares the original's source in the store, and queues either the two short
steps that reuse the original's artifact and verification (reuse -> package) or, when a
changed option shapes the artifact, the whole compile chain, saying which options made that
necessary. The planning itself is ``model_store.targets.revise``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max
from django.utils.translation import gettext

from model_store.errors import ModelStoreError
from model_store.onnx_info import OnnxInfo, inspect_onnx
from model_store.targets import get_target
from model_store.targets.revise import RevisionPlan, normalize_changes, plan_revision
from model_store.text import Message, say
from webapp import dispatch, live
from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError
from webapp.registry.catalogue.actions.versions import enqueue_compile
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs.models import Job
from webapp.registry.jobs.record import record_event
from webapp.registry.jobs.steps import initial_steps
from webapp.text import localize, localized


@functools.lru_cache(maxsize=16)
def _inspect(path: str, size: int, mtime_ns: int) -> OnnxInfo:
    # Keyed on size and mtime too: a form previews many edits of one version in a row, and a
    # large protobuf takes a while to parse; the file never changes under the same key.
    return inspect_onnx(Path(path))


def _info(path: Path) -> OnnxInfo:
    stat = path.stat()
    return _inspect(str(path), stat.st_size, stat.st_mtime_ns)


def model_infos(version: Version) -> tuple[OnnxInfo, OnnxInfo | None]:
    """(the source's description, the packaged ONNX artifact's when there is one)."""
    store = get_store()
    name, number = version.model.name, version.number
    artifact = store.package_dir(name, number) / str(number) / version.artifact_name
    packaged = _info(artifact) if artifact.suffix == ".onnx" and artifact.is_file() else None
    source = store.source_dir(name, number) / "model.onnx"
    if source.is_file():
        return _info(source), packaged
    if packaged is not None:
        # A bundle's source (a zip) cannot be read without unpacking it; the packaged ONNX
        # file has the same inputs and outputs and sits with its external data.
        return packaged, packaged
    raise HubError(
        gettext(
            "Version %(number)s came as a bundle and was built into an %(artifact)s; "
            "its serving config cannot be revised here yet. Upload it again with the new options."
        )
        % {"number": number, "artifact": version.artifact_name},
        "revision_unsupported",
        409,
    )


def _check_revisable(version: Version) -> None:
    target = get_target(version.model.target)
    if not target.accepts_uploads:
        raise HubError(
            gettext(
                "%(model)s was adopted as an external model; the hub did not build it, "
                "so it cannot revise its config. Adopt the changed repository instead."
            )
            % {"model": version.model.name},
            "external_model",
            409,
        )
    if version.status != Version.Status.READY:
        raise HubError(
            gettext("Version %(number)s is %(status)s; only a packaged version can be revised.")
            % {"number": version.number, "status": version.get_status_display().lower()},
            "not_ready",
            409,
        )


def plan_for(version: Version, changes: object) -> RevisionPlan:
    """The plan of revising ``version`` with ``changes`` as the model's next version.

    Raises:
        HubError: 409 when the version cannot be revised; 400 ``invalid_options`` or
            ``no_change`` when the changes are wrong or change nothing.
    """
    _check_revisable(version)
    info, packaged = model_infos(version)
    model = version.model
    next_number = (model.versions.aggregate(m=Max("number"))["m"] or 0) + 1
    try:
        return plan_revision(
            get_target(model.target),
            name=model.name,
            number=next_number,
            original=version.options,
            changes=normalize_changes(changes),
            info=info,
            config_info=packaged,
        )
    except ModelStoreError as exc:
        raise HubError(localize(exc.message), getattr(exc, "code", "invalid_options")) from exc


def preview_revision(version: Version, changes: object) -> dict[str, Any]:
    """What revising ``version`` with ``changes`` would do; nothing is written.

    Findings are messages (the page says them in its language); an API answer passes this
    through :func:`localized_preview`.
    """
    return plan_for(version, changes).to_dict() | {"revision_of": version.number}


def localized_preview(preview: dict[str, Any]) -> dict[str, Any]:
    """A :func:`preview_revision` answer in the request's language (``Accept-Language``):
    findings and the linter's problems said from their templates."""
    return localized(preview)


def _describe(plan: RevisionPlan) -> str:
    parts = [f"{key} {before!r} -> {after!r}" for key, (before, after) in plan.changed.items()]
    return ", ".join(parts)


def request_revision(
    version: Version, changes: object, user: User
) -> tuple[Version, Job, RevisionPlan]:
    """Make the next version of ``version``'s model from it with ``changes``; queue its job.

    Raises:
        HubError: As :func:`plan_for`; 400 ``invalid_config`` when the target's checks or the
            config linter find an error in the result (nothing is written then).
    """
    require_role(user, Role.OPERATOR)
    plan = plan_for(version, changes)
    if not plan.ok:
        errors = [
            f"{localize(f.message)} {localize(f.advice)}".strip()
            for f in plan.findings
            if f.level == "error"
        ]
        problems = [localize(p) for p in plan.problems]
        raise HubError(
            gettext("The revised config would not serve: %(problems)s")
            % {"problems": " ".join([*errors, *problems][:5])},
            "invalid_config",
        )
    if version.quantization is not None and not plan.reuses_artifact:
        # A rebuild starts from the FP32 source: it would silently drop the quantisation.
        raise HubError(
            gettext(
                "Version %(number)s is quantised to INT8 and %(options)s would rebuild it "
                "from the FP32 source. Revise version %(source)s instead, then quantise that."
            )
            % {
                "number": version.number,
                "options": ", ".join(plan.rebuild),
                "source": version.revision_of.number if version.revision_of else "?",
            },
            "quantized_rebuild",
            409,
        )
    steps = dispatch.REUSE_STEPS if plan.reuses_artifact else dispatch.COMPILE_STEPS
    why = (
        say("reuses the artifact and its verification")
        if plan.reuses_artifact
        else say(
            "rebuilt and verified again because %(options)s shape(s) the artifact",
            options=", ".join(plan.rebuild),
        )
    )
    revision, job = make_revision(
        version,
        user,
        options=plan.options,
        findings=[f.to_dict() for f in plan.findings],
        steps=steps,
        params={"revision_of": version.number, "changed": plan.changed},
        quantization=version.quantization,  # the artifact is reused as it is
        event=lambda number: (
            "version.revised",
            say(
                "%(user)s revised version %(original)s as version %(number)s (%(changes)s); "
                "%(why)s.",
                user=user.get_username(),
                original=version.number,
                number=number,
                changes=_describe(plan),
                why=why,
            ),
            {
                "revision_of": version.number,
                "changed": plan.changed,
                "rebuild": plan.rebuild,
                "diff": plan.diff,
            },
        ),
    )
    return revision, job, plan


#: ``event(number) -> (kind, message, data)`` of the audit line a new revision records.
EventFor = Callable[[int], tuple[str, Message, dict[str, Any]]]


def make_revision(
    version: Version,
    user: User,
    *,
    options: dict[str, Any],
    findings: list[dict[str, Any]],
    steps: tuple[str, ...],
    params: dict[str, Any],
    event: EventFor,
    quantization: dict[str, Any] | None = None,
    prepare: Callable[[Job], None] | None = None,
) -> tuple[Version, Job]:
    """The model's next version from ``version``'s source, its job queued on commit.

    ``prepare(job)`` runs inside the transaction once the job exists (to move files into its
    work directory); raising there records nothing.
    """
    model = version.model
    store = get_store()
    shared: list[int] = []
    try:
        with transaction.atomic():
            # Locking the model row serialises number allocation with uploads (actions.versions).
            locked = Model.objects.select_for_update().get(pk=model.pk)
            number = (locked.versions.aggregate(m=Max("number"))["m"] or 0) + 1
            store.share_source(model.name, version.number, number)
            shared.append(number)
            revision = Version.objects.create(
                model=locked,
                number=number,
                source_filename=version.source_filename,
                source_sha256=version.source_sha256,
                source_size=version.source_size,
                options=options,
                signature=version.signature,
                onnx_summary=version.onnx_summary,
                findings=findings,
                verification_sample=version.verification_sample,
                revision_of=version,
                quantization=quantization,
                created_by=user,
            )
            job = Job.objects.create(
                kind=Job.Kind.COMPILE,
                model=locked,
                version=revision,
                steps=initial_steps(steps),
                params=params,
                created_by=user,
            )
            if prepare is not None:
                prepare(job)
            kind, text, data = event(number)
            record_event(kind, text, model=locked, version=revision, job=job, actor=user, data=data)
            locked.save(update_fields=["updated"])
            transaction.on_commit(lambda: enqueue_compile(job))
    except BaseException:
        # The version was not recorded: its shared source must not block the next number.
        for number in shared:
            store.remove_source(model.name, number)
        raise
    live.publish("models", {"model": model.name})
    return revision, job

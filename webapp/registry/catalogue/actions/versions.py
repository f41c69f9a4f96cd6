"""Versions: a new one from an upload, delete one, override its verification, cancel a job.

The page's upload form (``catalogue.views.pages.version_new``) and the API
(``POST /api/v1/models/{name}/versions``) both end in :func:`create_version_from_upload`, so
they refuse the same things with the same codes. Every change here is also an Event (the
audit trail) and is pushed to open pages.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext

from model_store.errors import ModelStoreError
from model_store.targets import get_target
from model_store.text import say
from model_store.uploads import FinishedUpload
from webapp import dispatch, live
from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.storage import get_store, get_uploads
from webapp.registry.jobs.models import Job
from webapp.registry.jobs.record import record_event
from webapp.registry.jobs.steps import COMPILE_STEPS, initial_steps
from webapp.registry.serving.lock import (
    acquire_lock_or_wait_for_reconcile,
    lock_busy_error,
    release_lock,
)
from webapp.text import localize

SOURCE_NAMES = {".onnx": "model.onnx", ".zip": "bundle.zip"}
log = logging.getLogger(__name__)


def parse_options(model: Model, raw: object) -> dict[str, Any]:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise HubError(gettext("options must be a JSON object."), "invalid_options")
    try:
        return get_target(model.target).parse_options(raw)
    except ModelStoreError as exc:
        raise HubError(localize(exc.message), getattr(exc, "code", "invalid_options")) from exc


def find_duplicate(model: Model, sha256: str) -> Version | None:
    return (
        model.versions.filter(source_sha256=sha256)
        .exclude(status__in=[Version.Status.FAILED, Version.Status.CANCELLED])
        .first()
    )


def create_version_from_upload(
    *,
    model: Model,
    upload_id: str,
    user: User,
    options: object,
    sha256: str = "",
    allow_duplicate: bool = False,
    sample: dict[str, Any] | None = None,
) -> tuple[Version, Job]:
    """A finished upload of ``user``'s becomes the next version; the upload is spent.

    ``sha256`` is the client's digest of the file, when it computed one; ``options`` the raw
    options object (checked against the model's target here).

    Raises:
        HubError: Not the user's upload (404 ``upload_not_found``), the digest differs (400
            ``upload_corrupt``, the upload is deleted), bad options, a duplicate (409).
        ModelStoreError: The upload is unknown or incomplete.
    """
    uploads = get_uploads()
    if uploads.status(upload_id).owner != str(user.pk):
        raise HubError(gettext("There is no such upload."), "upload_not_found", 404)
    finished = uploads.finish(upload_id)
    client_sha = sha256.strip().lower()
    if client_sha and client_sha != finished.sha256:
        uploads.cancel(upload_id)
        raise HubError(
            gettext(
                "The file changed in transit: your sha256 does not match what arrived. "
                "Upload again."
            ),
            "upload_corrupt",
        )
    version, job = create_version(
        model=model,
        upload=finished,
        options=parse_options(model, options),
        user=user,
        allow_duplicate=allow_duplicate,
        sample=sample,
    )
    uploads.cancel(upload_id)  # stored as the version's source: the upload is spent
    return version, job


def create_version(
    *,
    model: Model,
    upload: FinishedUpload,
    options: dict[str, Any],
    user: User,
    allow_duplicate: bool = False,
    sample: dict[str, Any] | None = None,
    serve_when_packaged: bool = False,
) -> tuple[Version, Job]:
    """Store the uploaded file as the next version's immutable source and queue its compile job.

    ``serve_when_packaged`` asks the pipeline to serve the version as soon as it is packaged
    and verified (the demo model's one-click journey).
    """
    if not get_target(model.target).accepts_uploads:
        raise HubError(
            gettext(
                "%(model)s was adopted as an external model: it takes no uploads. Adopt its "
                "repository again to add versions (docs/adopt.md)."
            )
            % {"model": model.name},
            "external_model",
            409,
        )
    duplicate = find_duplicate(model, upload.sha256)
    if duplicate is not None and not allow_duplicate:
        raise HubError(
            gettext(
                "This file is already version %(number)s of %(model)s (same sha256). Use that "
                "version, or send allow_duplicate=true to build it again with other options."
            )
            % {"number": duplicate.number, "model": model.name},
            "duplicate",
            409,
        )
    suffix = Path(upload.filename).suffix.lower()
    if suffix not in SOURCE_NAMES:
        raise HubError(gettext("Upload a .onnx file or a .zip bundle."), "invalid_upload")
    store = get_store()
    with transaction.atomic():
        # Locking the model row serialises number allocation across web processes.
        locked = Model.objects.select_for_update().get(pk=model.pk)
        number = (locked.versions.aggregate(m=Max("number"))["m"] or 0) + 1
        store.store_source(model.name, number, upload.path, SOURCE_NAMES[suffix], move=True)
        version = Version.objects.create(
            model=locked,
            number=number,
            source_filename=upload.filename,
            source_sha256=upload.sha256,
            source_size=upload.size,
            options=options,
            verification_sample=sample,
            created_by=user,
        )
        job = Job.objects.create(
            kind=Job.Kind.COMPILE,
            model=locked,
            version=version,
            steps=initial_steps(COMPILE_STEPS),
            params={"serve_when_packaged": True} if serve_when_packaged else {},
            created_by=user,
        )
        text = say(
            "%(user)s uploaded %(file)s as version %(number)s.",
            user=user.get_username(),
            file=upload.filename,
            number=number,
        )
        record_event(
            "version.uploaded",
            text,
            model=locked,
            version=version,
            job=job,
            actor=user,
            data={
                "sha256": upload.sha256,
                "size": upload.size,
                "options": options,
            },
        )
        locked.save(update_fields=["updated"])
        transaction.on_commit(lambda: enqueue_compile(job))
    return version, job


def enqueue_compile(job: Job) -> None:
    """Send ``job`` (a compile) to the workers; while the broker is away it waits, marked unsent."""
    try:
        dispatch.compile_job(job.pk, tuple(step["name"] for step in job.steps))
    except Exception:
        # Redis (the broker) does not answer: the job stays queued, marked unsent, and
        # reconcile sends it once Redis is back (reconcile.requeue_stalled_jobs).
        log.warning("compile job %s could not be queued yet", job.uuid, exc_info=True)
        mark_unsent(job)
    live.publish("models", {"model": job.model.name})


def mark_unsent(job: Job) -> None:
    job.params = {**(job.params or {}), "unsent": True}
    Job.objects.filter(pk=job.pk).update(params=job.params)


def cancel_job(job: Job, user: User) -> Job:
    if job.is_finished:
        raise HubError(
            gettext("The job has already %(state)s.") % {"state": job.state},
            "job_finished",
            409,
        )
    Job.objects.filter(pk=job.pk).update(cancel_requested=True)
    text = say(
        "%(user)s asked to cancel the %(kind)s job.", user=user.get_username(), kind=job.kind
    )
    record_event(
        "job.cancel_requested",
        text,
        model_id=job.model_id,
        version_id=job.version_id,
        job=job,
        actor=user,
    )
    job.refresh_from_db()
    if job.state == Job.State.QUEUED:
        # Not started yet: the first step sees the flag and stops at once.
        live.publish(job.topic, {"cancel_requested": True})
    return job


def override_verification(version: Version, user: User, reason: str) -> Version:
    """Let a version whose verification failed (or did not run) be published anyway."""
    require_role(user, Role.ADMIN)
    if version.status != Version.Status.READY:
        raise HubError(gettext("Only a packaged version can be overridden."), "not_ready", 409)
    if version.verification_passed:
        raise HubError(
            gettext("This version passed verification; nothing to override."), "passed", 409
        )
    reason = reason.strip()
    if not 5 <= len(reason) <= 1000:
        raise HubError(gettext("Say why, in 5 to 1000 characters."), "invalid_reason")
    version.verification_override = {
        "by": user.get_username(),
        "at": timezone.now().isoformat(),
        "reason": reason,
        "verification_status": (version.verification or {}).get("status"),
    }
    version.save(update_fields=["verification_override", "updated"])
    text = say(
        "%(user)s overrode the verification of version %(number)s: %(reason)s",
        user=user.get_username(),
        number=version.number,
        reason=reason,
    )
    record_event(
        "verification.override",
        text,
        model=version.model,
        version=version,
        actor=user,
        data=version.verification_override,
    )
    return version


def delete_version(*, version: Version, user: User) -> None:
    """Remove a version that neither serves nor is compared, nor has a running job."""
    model = version.model
    if model.serving_version == version.number:
        raise HubError(
            gettext("Version %(number)s is serving; serve another version first.")
            % {"number": version.number},
            "serving",
            409,
        )
    if model.compare_version == version.number:
        raise HubError(
            gettext(
                "Version %(number)s is loaded beside the serving one for a comparison; "
                "stop comparing first."
            )
            % {"number": version.number},
            "comparing",
            409,
        )
    if Job.objects.filter(version=version).exclude(state__in=Job.FINISHED).exists():
        raise HubError(gettext("A job for this version is still running."), "busy", 409)
    if Job.objects.filter(version__revision_of=version).exclude(state__in=Job.FINISHED).exists():
        raise HubError(
            gettext(
                "A revision of version %(number)s is still being built from it; wait for "
                "its job to finish."
            )
            % {"number": version.number},
            "busy",
            409,
        )
    holder = uuid.uuid4().hex
    if not acquire_lock_or_wait_for_reconcile(model, holder):
        raise lock_busy_error(model)
    try:
        store = get_store()
        number = version.number
        side_by_side = get_target(model.target).versions_side_by_side
        if side_by_side and store.version_dir(model.name, number).exists():
            store.remove_version(model.name, number)
        store.remove_source(model.name, number)
        text = say(
            "%(user)s deleted version %(number)s of %(model)s.",
            user=user.get_username(),
            number=number,
            model=model.name,
        )
        record_event(
            "version.deleted",
            text,
            model=model,
            actor=user,
            data={
                "version": number,
                "sha256": version.source_sha256,
            },
        )
        if model.previous_version == number:
            Model.objects.filter(pk=model.pk).update(previous_version=None)
        version.delete()
    finally:
        release_lock(model, holder)
    live.publish("models", {"model": model.name})

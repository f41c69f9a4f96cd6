"""Retiring a model, the worker's side (the request is ``actions.models.request_retire``).

The job holds the model's switch lock. It unloads the model from Triton (when the hub serves
it: a model without a serving version is not loaded, explicit model control loads only what
the hub asks for), removes its repository directory, keeps or purges its sources
(``model_store.retire``), then marks the row retired. The row, its versions, jobs and events
stay: the history is reachable on the retired model's page and in the audit log.
"""

from __future__ import annotations

from django.utils import timezone

from model_store.retire import retire_files
from model_store.serving import unload_model
from model_store.text import say
from webapp import live
from webapp.ops.triton import get_runtime
from webapp.registry.capture import actions as capture_actions
from webapp.registry.capture.models import CapturePolicy
from webapp.registry.catalogue.models import Model
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job

UNLOAD_TIMEOUT_S = 60.0


def run_retire(job: Job) -> None:
    model = job.model
    who = job.created_by.get_username() if job.created_by else say("the hub")
    purge = bool(job.params.get("purge_sources"))
    if model.serving_version is not None:
        jobs.log(job, f"Unloading {model.name} (v{model.serving_version}) from Triton.")
        unload_model(get_runtime(timeout=UNLOAD_TIMEOUT_S), model.name, UNLOAD_TIMEOUT_S)
    else:
        jobs.log(job, f"{model.name} has no serving version: Triton does not hold it.")
    files = retire_files(get_store(), model.name, key=str(model.pk), purge_sources=purge)
    jobs.log(
        job,
        "Removed its directory from the repository."
        if files.repository_removed
        else "It had no directory in the repository.",
    )
    sources = (
        say("its sources were purged")
        if purge
        else say("its sources are kept")
        if files.sources_kept_at
        else say("it had no sources")
    )
    said = str(sources)  # the log is English
    jobs.log(job, said[0].upper() + said[1:] + ".")
    # Captured requests are real callers' data: they go with the model, whatever is kept.
    captured = capture_actions.purge(model, None)
    CapturePolicy.objects.filter(model=model).update(enabled=False)
    if captured:
        jobs.log(job, f"Removed its {captured} captured requests.")
    now = timezone.now()
    # The lock goes with the retirement: nothing switches a retired model again.
    Model.all_objects.filter(pk=model.pk).update(
        retired_at=now,
        retired_by=job.created_by,
        serving_version=None,
        compare_version=None,
        lock_holder="",
        lock_expires=None,
    )
    reason = job.params.get("reason", "")
    values = {"who": who, "model": model.name, "version": model.serving_version, "sources": sources}
    message = (
        say("%(who)s retired %(model)s (it served v%(version)s); %(sources)s.", **values)
        if model.serving_version
        else say("%(who)s retired %(model)s; %(sources)s.", **values)
    )
    if reason:
        message = say("%(message)s Reason: %(reason)s", message=message, reason=reason)
    jobs.record_event(
        model=model,
        job=job,
        kind="retire",
        actor=job.created_by,
        message=message,
        data={
            "served": model.serving_version,
            "purge_sources": purge,
            "sources_kept_at": str(files.sources_kept_at) if files.sources_kept_at else None,
            "reason": reason,
        },
    )
    jobs.finish_step(job, job.kind, say("retired"))
    jobs.succeed(job, f"{model.name} retired")
    live.publish("models", {"retired": model.name})

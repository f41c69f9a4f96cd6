"""Recording a job's life: steps, progress, log lines, the end. Every change is pushed live.

Workers call these as they go; pages and the API read the same rows. Writes use
``update()`` on the job row so that a cancel request written by the web process is never
overwritten by a worker's progress update.

Log lines: every line goes to the job's full log file in the store (``logs/<job>.log``). Only
the first ``JOB_LOG_MAX_LINES`` become database rows and live pushes (a chatty ATC run writes
hundreds of thousands); then one note row says so, and later lines are only counted
(``Job.log_lines_more``).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Max
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.http import FileResponse, Http404
from django.utils import timezone

from model_store.text import Message, Said, as_json, say
from webapp import live
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs.db_outage import CONNECTION_ERRORS, drop_connection, retrying
from webapp.registry.jobs.models import Event, Job, JobLogLine

UNFINISHED = (Job.State.QUEUED, Job.State.RUNNING)


def verification_word(status: str | None) -> Message | str:
    """A verification status inside an event's sentence ("verification passed"), said so that
    the page can translate it; an unknown status as it is."""
    words = {
        "passed": say("passed"),
        "failed": say("failed"),
        "not_run": say("not run"),
        "not run": say("not run"),
        "adopted": say("adopted"),
    }
    return words.get(status or "", status or "")


def record_event(
    kind: str, message: Said, *, data: Mapping[str, Any] | None = None, **fields: Any
) -> Event:
    """Add one line to the audit trail: the one way events are written.

    ``message`` is what the history shows (a :class:`~model_store.text.Message`, said in each
    reader's language); ``data`` the facts behind it; ``fields`` the model, version, job and
    actor it concerns (``model=``, ``actor=``, ... or their ``*_id``).
    """
    return Event.objects.create(kind=kind, message=message, data=dict(data or {}), **fields)


def _push(job: Job, **extra: Any) -> None:
    payload = {
        "state": job.state,
        "step": job.step,
        "progress": round(job.progress, 4),
        "steps": job.steps,
        **extra,
    }
    live.publish(job.topic, payload)


def _save(job: Job, *fields: str) -> None:
    """Write ``fields`` of ``job``; a database restart in between is waited out."""
    values = {f: getattr(job, f) for f in fields}
    retrying(lambda: Job.objects.filter(pk=job.pk).update(**values))


def runner() -> dict[str, object]:
    """Which process runs a step now: host, pid and the process's start time (pids are reused).

    Reconcile fails a job whose step is still "running" when that process is gone
    (:func:`webapp.registry.build.pipeline.fail_interrupted_compiles`).
    """
    import psutil

    return {"host": socket.gethostname(), "pid": os.getpid(),
            "since": psutil.Process().create_time()}  # fmt: skip


def start_step(job: Job, name: str, version_status: str | None = None) -> None:
    retrying(lambda: job.refresh_from_db(fields=["cancel_requested", "state"]))
    now = timezone.now()
    if job.started is None:
        job.started = now
    job.state = Job.State.RUNNING
    job.step = name
    for step in job.steps:
        if step["name"] == name:
            step |= {"state": "running", "started": now.isoformat()}
    job.params = {**(job.params or {}), "runner": runner()}
    _save(job, "state", "step", "steps", "started", "params")
    version_id = job.version_id
    if version_status and version_id:
        retrying(lambda: Version.objects.filter(pk=version_id).update(status=version_status))
    _push(job)


def finish_step(job: Job, name: str, message: Said = "", state: str = "done") -> None:
    """Mark step ``name`` finished, with what it found (a message pages say in their language)."""
    for step in job.steps:
        if step["name"] == name:
            step |= {"state": state, "finished": timezone.now().isoformat()}
            step["message"] = as_json(message)
    done = sum(1 for s in job.steps if s["state"] in ("done", "warning"))
    job.progress = done / max(len(job.steps), 1)
    _save(job, "steps", "progress")
    _push(job)


def set_progress(job: Job, fraction_of_step: float) -> None:
    """Progress within the current step, mapped onto the whole job.

    Best effort: while the database is away the figure waits for the next call.
    """
    index = next((i for i, s in enumerate(job.steps) if s["name"] == job.step), 0)
    job.progress = (index + max(0.0, min(1.0, fraction_of_step))) / max(len(job.steps), 1)
    try:
        Job.objects.filter(pk=job.pk).update(progress=job.progress)
    except CONNECTION_ERRORS:
        drop_connection()
    _push(job)


def log(job: Job, text: Said, level: str = "info") -> None:
    """Append one line: to the full log file, and to the database while under the cap.

    Rows cut long lines (a page is for people, not for dumps); the file keeps them whole.
    While the database is away (a restart), lines go to the file only and the work goes on:
    a one-hour ATC run must not die of a log line.
    """
    text = str(text).rstrip("\n")  # the log is English: it is for whoever debugs the job
    _append_to_file(job, text, level)
    try:
        # Once full, always full (nobody deletes log rows): skip the query for the next seq.
        if vars(job).get("_log_full") or not _store_line(job, text[:4000], level):
            vars(job)["_log_full"] = True
            Job.objects.filter(pk=job.pk).update(log_lines_more=F("log_lines_more") + 1)
    except CONNECTION_ERRORS:
        drop_connection()  # the next line opens a new connection, once the database is back


def _store_line(job: Job, text: str, level: str) -> bool:
    """Store and push one line; False when the job already has its cap of rows."""
    cap = settings.JOB_LOG_MAX_LINES
    with transaction.atomic():
        seq = (job.log_lines.aggregate(m=Max("seq"))["m"] or 0) + 1
        if seq > cap + 1:
            return False
        if seq == cap + 1:
            text, level = _cap_note(cap), "warning"
        line = JobLogLine.objects.create(job=job, seq=seq, level=level, text=text)
    live.publish(job.topic, {"line": line.to_dict()})
    return seq <= cap


def _cap_note(cap: int) -> str:
    return (
        f"Only the first {cap} lines of this log are shown here; this line and every later one "
        "are in the full log file (download it from the job page, or GET /api/v1/jobs/<id>/log)."
    )


def full_log_path(job: Job) -> Path:
    return get_store().job_log_path(job.uuid.hex)


def _append_to_file(job: Job, text: str, level: str) -> None:
    path: Path | None = vars(job).get("_log_path")
    if path is None:  # once per job object: get_store() creates the store's folders
        path = full_log_path(job)
        path.parent.mkdir(parents=True, exist_ok=True)
        vars(job)["_log_path"] = path
    stamp = timezone.now().isoformat(timespec="milliseconds")
    # Append mode: the worker and the web process (a cancel) may both write, a line at a time.
    with path.open("a", encoding="utf-8", errors="replace") as file:
        file.write(f"{stamp} {level:<7} {text}\n")


def full_log_download(job: Job) -> FileResponse:
    """The full log file as an attachment, streamed from disk."""
    path = full_log_path(job)
    if not path.is_file():
        raise Http404("This job has no log file: it logged nothing, or ran before they were kept.")
    return FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=f"{job.model.name}-{job.kind}-{job.uuid.hex[:8]}.log",
        content_type="text/plain; charset=utf-8",
    )


@receiver(post_delete, sender=Job)
def _remove_full_log(sender: type[Job], instance: Job, **kwargs: Any) -> None:
    """A job's full log goes with its row (and with its model or version, which cascade)."""
    path = full_log_path(instance)
    transaction.on_commit(lambda: path.unlink(missing_ok=True))


def add_command(job: Job, command: str) -> None:
    job.commands = [*job.commands, command]
    _save(job, "commands")


def release_switch_lock(model_id: int, holder: str) -> None:
    """Free a model's switch lock if ``holder`` holds it (``serving/switch.py`` takes it)."""
    Model.objects.filter(pk=model_id, lock_holder=holder).update(lock_holder="", lock_expires=None)


def succeed(job: Job, message: Said = "") -> None:
    # A finished job holds no lock: whoever sees it finished may switch again at once.
    retrying(lambda: release_switch_lock(job.model_id, job.uuid.hex))
    job.state = Job.State.SUCCEEDED
    job.progress = 1.0
    job.finished = timezone.now()
    job.step = ""
    _save(job, "state", "progress", "finished", "step")
    _push(job, message=as_json(message))
    live.publish("jobs", {"id": str(job.uuid), "state": job.state})


def fail(job: Job, error: Said, code: str, *, cancelled: bool = False) -> None:
    # A finished job holds no lock: whoever sees it finished may switch again at once.
    retrying(lambda: release_switch_lock(job.model_id, job.uuid.hex))
    job.state = Job.State.CANCELLED if cancelled else Job.State.FAILED
    job.error = error
    job.error_code = code
    job.finished = timezone.now()
    for step in job.steps:
        if step["state"] == "running":
            step["state"] = "cancelled" if cancelled else "failed"
            step["message"] = as_json(_bounded(error, 500))
    # Only a failed build fails its version: a switch or a sweep that failed (Triton down, a
    # restart) leaves a packaged version packaged, so that it can be served again. The version
    # is written first: whoever sees the job finished must see its version's outcome too.
    version_id = job.version_id
    if version_id and job.kind == Job.Kind.COMPILE:
        status = Version.Status.CANCELLED if cancelled else Version.Status.FAILED
        retrying(lambda: Version.objects.filter(pk=version_id).update(status=status, error=error))
    _save(job, "state", "error", "error_code", "finished", "steps")
    retrying(
        lambda: record_event(
            "job.cancelled" if cancelled else "job.failed",
            _bounded(error, 1000),
            data={"code": code, "step": job.step},
            model_id=job.model_id,
            version_id=job.version_id,
            job_id=job.pk,
            actor_id=job.created_by_id,
        )
    )
    _push(job, error=as_json(error), code=code)
    live.publish("jobs", {"id": str(job.uuid), "state": job.state})


def _bounded(said: Said, limit: int) -> Said:
    """Plain words cut to ``limit`` characters (an outside tool's output can be long); a
    message is the hub's own sentence and stays whole."""
    return said if isinstance(said, Message) else said[:limit]


class CancelCheck:
    """A cheap ``cancelled()`` for long steps: asks the database at most once a second."""

    def __init__(self, job: Job, every_s: float = 1.0) -> None:
        self.job = job
        self.every_s = every_s
        self._last = 0.0
        self._cancelled = False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self._cancelled and now - self._last >= self.every_s:
            self._last = now
            try:
                self._cancelled = Job.objects.filter(pk=self.job.pk, cancel_requested=True).exists()
            except CONNECTION_ERRORS:  # asked again in a second, once the database is back
                drop_connection()
        return self._cancelled

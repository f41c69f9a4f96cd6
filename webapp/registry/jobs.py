"""Recording a job's life: steps, progress, log lines, the end. Every change is pushed live.

Workers call these as they go; pages and the API read the same rows. Writes use
``update()`` on the job row so that a cancel request written by the web process is never
overwritten by a worker's progress update.
"""

from __future__ import annotations

import time
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from webapp import live
from webapp.registry.models import Event, Job, JobLogLine, Version

COMPILE_STEPS = ("validate", "compile", "verify", "package")
STEP_LABELS = {
    "validate": "Validate the ONNX model",
    "compile": "Compile for the target",
    "verify": "Verify against the source",
    "package": "Package the Triton version",
    "prepare": "Prepare the inputs",
    "sweep": "Drive the model at rising concurrency",
    "record": "Record the results",
}
SWEEP_STEPS = ("prepare", "sweep", "record")


def initial_steps(names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        {"name": n, "label": STEP_LABELS.get(n, n), "state": "pending", "message": ""}
        for n in names
    ]


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
    Job.objects.filter(pk=job.pk).update(**{f: getattr(job, f) for f in fields})


def start_step(job: Job, name: str, version_status: str | None = None) -> None:
    job.refresh_from_db(fields=["cancel_requested", "state"])
    now = timezone.now()
    if job.started is None:
        job.started = now
    job.state = Job.State.RUNNING
    job.step = name
    for step in job.steps:
        if step["name"] == name:
            step |= {"state": "running", "started": now.isoformat()}
    _save(job, "state", "step", "steps", "started")
    if version_status and job.version_id:
        Version.objects.filter(pk=job.version_id).update(status=version_status)
    _push(job)


def finish_step(job: Job, name: str, message: str = "", state: str = "done") -> None:
    for step in job.steps:
        if step["name"] == name:
            step |= {"state": state, "finished": timezone.now().isoformat(), "message": message}
    done = sum(1 for s in job.steps if s["state"] in ("done", "warning"))
    job.progress = done / max(len(job.steps), 1)
    _save(job, "steps", "progress")
    _push(job)


def set_progress(job: Job, fraction_of_step: float) -> None:
    """Progress within the current step, mapped onto the whole job."""
    index = next((i for i, s in enumerate(job.steps) if s["name"] == job.step), 0)
    job.progress = (index + max(0.0, min(1.0, fraction_of_step))) / max(len(job.steps), 1)
    _save(job, "progress")
    _push(job)


def log(job: Job, text: str, level: str = "info") -> None:
    """Append one line (long lines are cut: a log is for people, not for dumps)."""
    text = text.rstrip("\n")[:4000]
    with transaction.atomic():
        seq = (job.log_lines.aggregate(m=Max("seq"))["m"] or 0) + 1
        line = JobLogLine.objects.create(job=job, seq=seq, level=level, text=text)
    live.publish(job.topic, {"line": line.to_dict()})


def add_command(job: Job, command: str) -> None:
    job.commands = [*job.commands, command]
    _save(job, "commands")


def succeed(job: Job, message: str = "") -> None:
    job.state = Job.State.SUCCEEDED
    job.progress = 1.0
    job.finished = timezone.now()
    job.step = ""
    _save(job, "state", "progress", "finished", "step")
    _push(job, message=message)
    live.publish("jobs", {"id": str(job.uuid), "state": job.state})


def fail(job: Job, error: str, code: str, *, cancelled: bool = False) -> None:
    job.state = Job.State.CANCELLED if cancelled else Job.State.FAILED
    job.error = error
    job.error_code = code
    job.finished = timezone.now()
    for step in job.steps:
        if step["state"] == "running":
            step |= {"state": "cancelled" if cancelled else "failed", "message": error[:500]}
    _save(job, "state", "error", "error_code", "finished", "steps")
    if job.version_id:
        status = Version.Status.CANCELLED if cancelled else Version.Status.FAILED
        Version.objects.filter(pk=job.version_id).update(status=status, error=error)
    Event.objects.create(
        model_id=job.model_id,
        version_id=job.version_id,
        job=job,
        kind="job.cancelled" if cancelled else "job.failed",
        actor=job.created_by,
        message=error[:1000],
        data={"code": code, "step": job.step},
    )
    _push(job, error=error, code=code)
    live.publish("jobs", {"id": str(job.uuid), "state": job.state})


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
            self._cancelled = Job.objects.filter(pk=self.job.pk, cancel_requested=True).exists()
        return self._cancelled

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.steps import shown_step
from webapp.text import MessageEncoder, MessageField, localize, localized


class Job(models.Model):
    """Background work with steps, progress and a log that pages follow live."""

    class Kind(models.TextChoices):
        COMPILE = "compile", _("Compile")
        SERVE = "serve", _("Serve")
        ROLLBACK = "rollback", _("Roll back")
        UNLOAD = "unload", _("Unload")
        LOAD = "load", _("Load")
        SWEEP = "sweep", _("Performance sweep")
        RETIRE = "retire", _("Retire")
        ADOPT = "adopt", _("Adopt")
        PLACE = "place", _("Place on nodes")
        TUNE = "tune", _("Find the best config")

    class State(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Cancelled")

    FINISHED = (State.SUCCEEDED, State.FAILED, State.CANCELLED)

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="jobs")
    version = models.ForeignKey(
        Version, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs"
    )
    state = models.CharField(max_length=20, choices=State.choices, default=State.QUEUED)
    step = models.CharField(max_length=40, blank=True)
    progress = models.FloatField(default=0.0)
    steps = models.JSONField(default=list, blank=True, encoder=MessageEncoder)
    commands = models.JSONField(default=list, blank=True)
    error = MessageField()
    error_code = models.CharField(max_length=40, blank=True)
    cancel_requested = models.BooleanField(default=False)
    # Lines logged past JOB_LOG_MAX_LINES: counted here, kept only in the full log file.
    log_lines_more = models.PositiveIntegerField(default=0)
    # What a serve/rollback job switches from and to, and why (the operator's words).
    params = models.JSONField(default=dict, blank=True, encoder=MessageEncoder)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.kind} job {self.uuid}"

    @property
    def is_finished(self) -> bool:
        return self.state in self.FINISHED

    @property
    def duration_seconds(self) -> float | None:
        if self.started is None or self.finished is None:
            return None
        return (self.finished - self.started).total_seconds()

    @property
    def topic(self) -> str:
        return f"job.{self.uuid.hex}"

    @property
    def shown_steps(self) -> list[dict[str, Any]]:
        """The steps as a page shows them: label, state and message in the active language."""
        return [shown_step(step) for step in self.steps]

    @property
    def step_label(self) -> str:
        """The running step's label in the active language ("" when none runs)."""
        step = next((s for s in self.steps if s.get("name") == self.step), None)
        if step is None:
            return self.step
        return str(shown_step(step)["label"])

    def to_dict(self, *, log: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(self.uuid),
            "kind": self.kind,
            "model": self.model.name,
            "version": self.version.number if self.version else None,
            "state": self.state,
            "step": self.step,
            "progress": round(self.progress, 4),
            "steps": localized(self.steps),
            "commands": self.commands,
            "error": localize(self.error),
            "error_code": self.error_code,
            "cancel_requested": self.cancel_requested,
            "created": self.created.isoformat(),
            "started": self.started.isoformat() if self.started else None,
            "finished": self.finished.isoformat() if self.finished else None,
        }
        if log:
            data["log"] = [line.to_dict() for line in self.log_lines.order_by("seq")]
            data["log_lines_more"] = self.log_lines_more
        return data


class JobLogLine(models.Model):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="log_lines")
    seq = models.PositiveIntegerField()
    time = models.DateTimeField(auto_now_add=True)
    level = models.CharField(max_length=10, default="info")
    text = models.TextField()

    class Meta:
        ordering = ["job", "seq"]
        constraints = [models.UniqueConstraint(fields=["job", "seq"], name="log_seq_per_job")]

    def __str__(self) -> str:
        return f"{self.seq}: {self.text[:60]}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "time": self.time.isoformat(),
            "level": self.level,
            "text": self.text,
        }


class Event(models.Model):
    """The audit trail: who did what to which model, when, and why."""

    # PROTECT: the audit trail outlives its model. Models are retired, never deleted; a delete
    # that would take events with it is refused.
    model = models.ForeignKey(
        Model, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    version = models.ForeignKey(
        Version, null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=40)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    message = MessageField(blank=False)
    data = models.JSONField(default=dict, blank=True, encoder=MessageEncoder)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.kind}: {str(self.message)[:60]}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "model": self.model.name if self.model else None,
            "version": self.version.number if self.version else None,
            "actor": self.actor.get_username() if self.actor else None,
            "message": localize(self.message),
            "data": localized(self.data),
            "time": self.created.isoformat(),
        }

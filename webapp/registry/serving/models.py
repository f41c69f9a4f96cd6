from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from webapp.access_epoch import WatchedQuerySet
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.models import Job
from webapp.text import MessageEncoder, MessageField, localize


class NodeServing(models.Model):
    """What one node other than ``local`` serves of one model, as its last step left it.

    ``local``'s is the model's own ``serving_version``. Rows are written by rollouts and
    placement jobs (webapp/registry/serving/rollout.py) and read by the model's API and page.
    """

    class State(models.TextChoices):
        PLACING = "placing", _("Placing")
        SERVING = "serving", _("Serving")
        FAILED = "failed", _("Failed")

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="node_servings")
    node = models.CharField(max_length=64)
    version = models.PositiveIntegerField(null=True, blank=True)
    #: A canary's candidate, loaded beside ``version`` on this node (the model's
    #: ``compare_version`` is ``local``'s and the placement's).
    compare_version = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PLACING)
    error = MessageField()
    duration_s = models.FloatField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    objects = models.Manager.from_queryset(WatchedQuerySet)()  # update() moves the access epoch

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["model", "node"], name="node_serving_model_node")
        ]
        ordering = ["node"]

    def __str__(self) -> str:
        return f"{self.model_id} on {self.node}: v{self.version} {self.state}"

    def to_dict(self) -> dict[str, object]:
        return {
            "node": self.node,
            "version": self.version,
            "beside": self.compare_version,
            "state": self.state,
            "error": localize(self.error) or None,
            "duration_s": self.duration_s,
            "updated": self.updated.isoformat(),
        }


class ReconcileReport(models.Model):
    """The last comparison of database, repository files and Triton's index (one row)."""

    created = models.DateTimeField(auto_now=True)
    #: Lines as messages (``{{ line|translated }}``) or plain words.
    repairs = models.JSONField(default=list, blank=True, encoder=MessageEncoder)
    warnings = models.JSONField(default=list, blank=True, encoder=MessageEncoder)

    def __str__(self) -> str:
        return f"reconcile at {self.created:%Y-%m-%d %H:%M:%S}"


class Canary(models.Model):
    """A canary release of one version: a growing share of traffic, decided by the numbers.

    The worker's side is webapp/registry/serving/canary.py; asking for one is
    ``serving.actions.canary.start_canary``. While it is active the canary holds the model's switch
    lock (holder ``canary-<uuid>``), so no other switch interleaves with it.
    """

    class State(models.TextChoices):
        STARTING = "starting", _("Loading the candidate")
        RUNNING = "running", _("Running")
        PROMOTING = "promoting", _("Promoting")
        ENDING = "ending", _("Unloading the candidate")
        PROMOTED = "promoted", _("Promoted")
        ROLLED_BACK = "rolled_back", _("Rolled back")
        ABORTED = "aborted", _("Aborted")
        FAILED = "failed", _("Failed")

    #: Holding the lock: the watcher looks at these. ``ending`` has decided (``outcome``) and
    #: waits for the candidate to be unloaded.
    ACTIVE = (State.STARTING, State.RUNNING, State.PROMOTING, State.ENDING)

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="canaries")
    candidate = models.PositiveIntegerField()
    baseline = models.PositiveIntegerField()  # the version serving when it started
    steps = models.JSONField(default=list)  # increasing percentages ending at 100
    step_seconds = models.PositiveIntegerField()
    max_error_rate = models.FloatField()
    max_p99_ratio = models.FloatField()
    min_requests = models.PositiveIntegerField()
    state = models.CharField(max_length=12, choices=State.choices, default=State.STARTING)
    step_index = models.PositiveSmallIntegerField(default=0)
    step_started = models.DateTimeField(null=True, blank=True)
    #: Each decision with its numbers, oldest first (``reason`` as a message's JSON).
    decisions = models.JSONField(default=list, blank=True, encoder=MessageEncoder)
    reason = MessageField()  # why it ended, said when shown
    outcome = models.CharField(max_length=12, blank=True)  # the end an ``ending`` one reaches
    #: A person's "promote now" or "abort", carried out at the watcher's next look.
    asked = models.CharField(max_length=8, blank=True)
    asked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: The job it waits for: loading the candidate, the promoting switch, the unload after.
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    ticked = models.DateTimeField(null=True, blank=True)  # the watcher's last look
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            # One active canary per model, whatever two requests race.
            models.UniqueConstraint(
                fields=["model"],
                condition=models.Q(state__in=["starting", "running", "promoting", "ending"]),
                name="one_active_canary_per_model",
            )
        ]

    def __str__(self) -> str:
        return f"canary of v{self.candidate} on {self.model_id}: {self.state}"

    @property
    def holder(self) -> str:
        """The switch lock's holder while this canary is active."""
        return f"canary-{self.uuid.hex}"

    @property
    def is_active(self) -> bool:
        return self.state in self.ACTIVE

    @property
    def weight(self) -> int:
        """The candidate's share of unpinned calls now, in percent."""
        if self.state == self.State.PROMOTED:
            return 100
        if self.state in (self.State.RUNNING, self.State.PROMOTING) and self.steps:
            return int(self.steps[min(self.step_index, len(self.steps) - 1)])
        return 0

    def window(self) -> str:
        """Where this step's calls are counted (the step's own, so each decides on its own)."""
        return f"{self.uuid.hex[:16]}-{self.step_index}"

    def to_dict(self) -> dict[str, object]:
        shown = {
            self.State.STARTING: "running",
            self.State.PROMOTING: "running",
            self.State.ENDING: self.outcome or "running",
        }
        return {
            "id": str(self.uuid),
            "state": shown.get(self.State(self.state), self.state),
            "phase": self.state,
            "version": self.candidate,
            "serving_version": self.baseline,
            "weight": self.weight,
            "steps": self.steps,
            "step": self.step_index,
            "step_seconds": self.step_seconds,
            "max_error_rate": self.max_error_rate,
            "max_p99_ratio": self.max_p99_ratio,
            "min_requests": self.min_requests,
            "step_started": self.step_started.isoformat() if self.step_started else None,
            "decisions": self.decisions,
            "reason": localize(self.reason) or None,
            "job": str(self.job.uuid) if self.job_id and self.job else None,
            "created": self.created.isoformat(),
            "created_by": self.created_by.get_username() if self.created_by else None,
            "finished": self.finished.isoformat() if self.finished else None,
        }

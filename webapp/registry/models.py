from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from webapp.access_epoch import WatchedQuerySet
from webapp.registry.model_rules import DEFAULT_TARGET, TAG_MAX_LENGTH
from webapp.registry.steps import shown_step
from webapp.text import MessageEncoder, MessageField, localize, localized


class LiveModels(models.Manager.from_queryset(WatchedQuerySet)):  # type: ignore[misc]
    """The catalogue: models that are not retired. Finding a model by name goes through here,
    so a retired model's name is free for a new model (its own row, with its own history)."""

    def get_queryset(self) -> models.QuerySet[Model]:
        return super().get_queryset().filter(retired_at__isnull=True)


class Model(models.Model):
    """A named model in the Triton repository; its name is its Triton name.

    A retired model keeps its row (versions, jobs, events, who retired it and when): retiring
    is a soft delete, so the audit trail never goes with it. ``Model.objects`` sees the
    catalogue only; ``Model.all_objects`` sees retired rows too.
    """

    # Unique among live models (the constraint below); a retired model's name may be reused.
    name = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=20, default=DEFAULT_TARGET)
    description = models.TextField(blank=True, max_length=2000)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who answers for the model (a user of the hub); its tags are ModelTag rows.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    retired_at = models.DateTimeField(null=True, blank=True)
    retired_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    serving_version = models.PositiveIntegerField(null=True, blank=True)
    # The version that served before the current one: what "roll back" returns to.
    previous_version = models.PositiveIntegerField(null=True, blank=True)
    # A second version loaded beside the serving one so Try it can compare the two.
    compare_version = models.PositiveIntegerField(null=True, blank=True)
    # A switch lock that holds across processes and hosts; it expires, so a worker killed in
    # the middle of a switch cannot keep it forever (see webapp/registry/serving.py).
    lock_holder = models.CharField(max_length=64, blank=True)
    lock_expires = models.DateTimeField(null=True, blank=True)
    # Class names for decoding classification outputs (index -> label), uploaded per model.
    labels = models.JSONField(default=list, blank=True)
    # How the "Try it" panel prepares inputs: {"preprocess": {...}, "image_inputs": [...]}.
    try_settings = models.JSONField(default=dict, blank=True)
    # Which nodes serve it: {"nodes": [...]} or {"labels": {...}}; empty is local alone
    # (webapp/registry/placement.py).
    placement = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    # The default manager sees live models only, so get_object_or_404(Model, name=...) and
    # every lookup by name do; related lookups (job.model) use the base manager and still
    # reach a retired model.
    # Both managers' update() moves the access epoch (webapp/access_epoch.py).
    all_objects = models.Manager.from_queryset(WatchedQuerySet)()
    objects = LiveModels()

    class Meta:
        ordering = ["name"]
        default_manager_name = "objects"
        base_manager_name = "all_objects"
        constraints = [
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(retired_at__isnull=True),
                name="model_name_unique_while_live",
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_retired(self) -> bool:
        return self.retired_at is not None

    @property
    def tag_labels(self) -> list[str]:
        # .all() so that a prefetch_related("tags") of a list serves it without a query.
        return sorted(t.label for t in self.tags.all())

    def to_dict(self, *, versions: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "target": self.target,
            "description": self.description,
            "created": self.created.isoformat(),
            "created_by": self.created_by.get_username() if self.created_by else None,
            "updated": self.updated.isoformat(),
            "owner": self.owner.get_username() if self.owner else None,
            "tags": self.tag_labels,
            "serving_version": self.serving_version,
            "previous_version": self.previous_version,
        }
        if self.retired_at is not None:
            data["retired_at"] = self.retired_at.isoformat()
            data["retired_by"] = self.retired_by.get_username() if self.retired_by else None
        if versions:
            data["versions"] = [v.to_dict() for v in self.versions.order_by("-number")]
        return data


class NodeServing(models.Model):
    """What one node other than ``local`` serves of one model, as its last step left it.

    ``local``'s is the model's own ``serving_version``. Rows are written by rollouts and
    placement jobs (webapp/registry/rollout.py) and read by the model's API and page.
    """

    class State(models.TextChoices):
        PLACING = "placing", _("Placing")
        SERVING = "serving", _("Serving")
        FAILED = "failed", _("Failed")

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="node_servings")
    node = models.CharField(max_length=64)
    version = models.PositiveIntegerField(null=True, blank=True)
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
            "state": self.state,
            "error": localize(self.error) or None,
            "duration_s": self.duration_s,
            "updated": self.updated.isoformat(),
        }


class ModelTag(models.Model):
    """One free label on a model; a table (not a JSON list) so that lists filter by it in SQL."""

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="tags")
    label = models.CharField(max_length=TAG_MAX_LENGTH, db_index=True)

    class Meta:
        ordering = ["label"]
        constraints = [
            models.UniqueConstraint(fields=["model", "label"], name="tag_once_per_model")
        ]

    def __str__(self) -> str:
        return f"{self.model.name}: {self.label}"


class Version(models.Model):
    """One uploaded ONNX file and what was built from it for the model's target."""

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        VALIDATING = "validating", _("Validating")
        COMPILING = "compiling", _("Compiling")
        VERIFYING = "verifying", _("Verifying")
        PACKAGING = "packaging", _("Packaging")
        READY = "ready", _("Packaged")
        FAILED = "failed", _("Failed")
        CANCELLED = "cancelled", _("Cancelled")

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    source_filename = models.CharField(max_length=128)
    source_sha256 = models.CharField(max_length=64)
    source_size = models.BigIntegerField()
    options = models.JSONField(default=dict, blank=True)
    signature = models.JSONField(default=dict, blank=True)
    onnx_summary = models.JSONField(default=dict, blank=True)
    findings = models.JSONField(default=list, blank=True, encoder=MessageEncoder)
    verification = models.JSONField(null=True, blank=True, encoder=MessageEncoder)
    verification_override = models.JSONField(null=True, blank=True)
    # An input the uploader supplied ({input name: nested list}); verified besides random ones.
    verification_sample = models.JSONField(null=True, blank=True)
    config_pbtxt = models.TextField(blank=True)
    artifact_name = models.CharField(max_length=64, blank=True)
    artifact_sha256 = models.CharField(max_length=64, blank=True)
    artifact_size = models.BigIntegerField(null=True, blank=True)
    # The CANN toolkit (and its operator package) that built the artifact, for targets that
    # compile with CANN: an OM must not run on an older CANN (docs/cann.md#version-compatibility).
    cann_version = models.CharField(max_length=64, blank=True)
    cann_ops_version = models.CharField(max_length=64, blank=True)
    # A config revision: the version whose source (and, when only config.pbtxt changed, whose
    # artifact and verification) this one reuses (model_store.targets.revise).
    revision_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="revisions"
    )
    error = MessageField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["model", "number"], name="version_number_per_model")
        ]
        # Duplicate detection looks versions up by the source's hash within a model.
        indexes = [models.Index(fields=["model", "source_sha256"], name="version_source_sha")]

    def __str__(self) -> str:
        return f"{self.model.name} v{self.number}"

    @property
    def verification_passed(self) -> bool:
        return bool(self.verification and self.verification.get("status") == "passed")

    @property
    def publishable(self) -> bool:
        """Packaged, and verified (or an admin overrode a failed/not-run verification)."""
        return self.status == self.Status.READY and (
            self.verification_passed or self.verification_override is not None
        )

    def to_dict(self, *, detail: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "version": self.number,
            "status": self.status,
            "source": {
                "filename": self.source_filename,
                "sha256": self.source_sha256,
                "size": self.source_size,
            },
            "verification": (self.verification or {}).get("status"),
            "verification_override": self.verification_override,
            "publishable": self.publishable,
            "created": self.created.isoformat(),
            "created_by": self.created_by.get_username() if self.created_by else None,
            "error": localize(self.error),
            "revision_of": self.revision_of.number if self.revision_of else None,
        }
        if detail:
            data |= {
                "options": self.options,
                "signature": self.signature,
                "onnx": self.onnx_summary,
                # Said in the request's language (Accept-Language).
                "findings": localized(self.findings or []),
                "verification_report": localized(self.verification),
                "config": self.config_pbtxt,
                "artifact": {
                    "name": self.artifact_name,
                    "sha256": self.artifact_sha256,
                    "size": self.artifact_size,
                },
                "built_with": {
                    "cann_version": self.cann_version or None,
                    "cann_ops_version": self.cann_ops_version or None,
                },
                "jobs": [str(j.uuid) for j in self.jobs.order_by("-created")],
            }
        return data


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


class ReconcileReport(models.Model):
    """The last comparison of database, repository files and Triton's index (one row)."""

    created = models.DateTimeField(auto_now=True)
    #: Lines as messages (``{{ line|translated }}``) or plain words.
    repairs = models.JSONField(default=list, blank=True, encoder=MessageEncoder)
    warnings = models.JSONField(default=list, blank=True, encoder=MessageEncoder)

    def __str__(self) -> str:
        return f"reconcile at {self.created:%Y-%m-%d %H:%M:%S}"


class TryExample(models.Model):
    """A saved "Try it" request (inputs as the infer API takes them), one click to rerun."""

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="examples")
    name = models.CharField(max_length=80)
    inputs = models.JSONField()
    #: Bytes of the request that saved it: the per-model budget adds these up.
    size = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.model.name}: {self.name}"

    def to_dict(self, *, inputs: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.pk,
            "name": self.name,
            "created": self.created.isoformat(),
            "created_by": self.created_by.get_username() if self.created_by else None,
        }
        if inputs:
            data["inputs"] = self.inputs
        return data


class PerfRun(models.Model):
    """One performance sweep of one version under one config, kept to compare runs."""

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="perf_runs")
    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="perf_runs")
    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="perf_run")
    # The config Triton served during the run: runs compare only under the same config.
    config_sha256 = models.CharField(max_length=64)
    config_summary = models.JSONField(default=dict, blank=True)
    plan = models.JSONField(default=dict, blank=True, encoder=MessageEncoder)
    levels = models.JSONField(default=list, blank=True, encoder=MessageEncoder)
    stopped = models.CharField(max_length=20, blank=True)
    server_stats = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"sweep of {self.model.name} v{self.version.number} ({self.job.state})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "job": str(self.job.uuid),
            "state": self.job.state,
            "model": self.model.name,
            "version": self.version.number,
            "config_sha256": self.config_sha256,
            "config": self.config_summary,
            "plan": self.plan,
            "levels": self.levels,
            "stopped": self.stopped or None,
            "server_stats": self.server_stats,
            "created": self.created.isoformat(),
        }


class TuningRun(models.Model):
    """One search for a better serving config of one version (model_store/perf/tune.py).

    Trials run as temporary models beside the serving one; ``active_trial`` names the one
    loaded now, so that reconcile can unload it if the worker dies mid-trial.
    """

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="tuning_runs")
    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="tuning_runs")
    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="tuning_run")

    class Strategy(models.TextChoices):
        SEARCH = "search", _("Search")
        GRID = "grid", _("Every config of a small grid")

    objective = models.JSONField(default=dict)
    budget_s = models.PositiveIntegerField()
    strategy = models.CharField(max_length=10, choices=Strategy.choices, default=Strategy.SEARCH)
    # Where the trials run: the stack's own Triton (``local``) or a node's, through its queue.
    node = models.CharField(max_length=64, default="local")
    max_concurrency = models.PositiveIntegerField(default=4)
    # Every trial in the order tried: its option changes, state, numbers and why.
    trials = models.JSONField(default=list, blank=True, encoder=MessageEncoder)
    best = models.IntegerField(null=True, blank=True)
    stopped = models.CharField(max_length=20, blank=True)
    grid_size = models.PositiveIntegerField(default=0)
    active_trial = models.CharField(max_length=100, blank=True)
    # The revision made from the winner, once someone asked for it.
    revision = models.ForeignKey(
        Version, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"tuning of {self.model.name} v{self.version.number} ({self.job.state})"

    @property
    def best_trial(self) -> dict[str, Any] | None:
        if self.best is None or not 0 <= self.best < len(self.trials):
            return None
        return dict(self.trials[self.best])

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.pk,
            "job": str(self.job.uuid),
            "state": self.job.state,
            "model": self.model.name,
            "version": self.version.number,
            "objective": self.objective,
            "budget_s": self.budget_s,
            "strategy": self.strategy,
            "node": self.node,
            "max_concurrency": self.max_concurrency,
            "trials": self.trials,
            "best": self.best_trial,
            "stopped": self.stopped or None,
            "grid_size": self.grid_size,
            "revision": self.revision.number if self.revision else None,
            "created": self.created.isoformat(),
        }

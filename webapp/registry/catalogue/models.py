from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from webapp.access_epoch import WatchedQuerySet
from webapp.registry.catalogue.rules import DEFAULT_TARGET, TAG_MAX_LENGTH
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
    # While a canary runs (webapp/registry/serving/canary.py): the candidate (loaded beside as
    # compare_version), its share of unpinned calls in percent, and the window its calls are
    # counted in. {} when no traffic is split. Read by every path that routes a call.
    canary = models.JSONField(default=dict, blank=True)
    # A switch lock that holds across processes and hosts; it expires, so a worker killed in
    # the middle of a switch cannot keep it forever (see webapp/registry/serving/switch.py).
    lock_holder = models.CharField(max_length=64, blank=True)
    lock_expires = models.DateTimeField(null=True, blank=True)
    # Class names for decoding classification outputs (index -> label), uploaded per model.
    labels = models.JSONField(default=list, blank=True)
    # How the "Try it" panel prepares inputs: {"preprocess": {...}, "image_inputs": [...]}.
    try_settings = models.JSONField(default=dict, blank=True)
    # Which nodes serve it: {"nodes": [...]} or {"labels": {...}}; empty is local alone
    # (webapp/registry/serving/placement.py).
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
    #: How this version was quantised from ``revision_of`` (None: not quantised by the hub):
    #: method, calibration source, the inputs' split and the quantiser's result.
    quantization = models.JSONField(null=True, blank=True)
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
            "quantized": self.quantization is not None,
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
                "quantization": self.quantization,
                "jobs": [str(j.uuid) for j in self.jobs.order_by("-created")],
            }
        return data

"""What is captured of a model's traffic, and how much may be kept (docs/capture.md)."""

from __future__ import annotations

from typing import Any

from django.db import models

from webapp.access_epoch import WatchedQuerySet
from webapp.registry.catalogue.models import Model

DEFAULT_MAX_ITEMS = 1000
DEFAULT_MAX_BYTES = 1 << 30
DEFAULT_RETENTION_HOURS = 168
#: The most any model may keep, whatever its settings say.
LIMIT_MAX_ITEMS = 100_000
LIMIT_MAX_BYTES = 64 << 30
LIMIT_RETENTION_HOURS = 24 * 365


class CapturePolicy(models.Model):
    """A model's capture settings, and what stopped or dropped captures (off by default)."""

    model = models.OneToOneField(Model, on_delete=models.CASCADE, related_name="capture_policy")
    enabled = models.BooleanField(default=False)
    #: Percent of answered requests kept, 0 to 100.
    sample_rate = models.FloatField(default=100.0)
    max_items = models.PositiveIntegerField(default=DEFAULT_MAX_ITEMS)
    max_bytes = models.BigIntegerField(default=DEFAULT_MAX_BYTES)
    retention_hours = models.PositiveIntegerField(default=DEFAULT_RETENTION_HOURS)
    #: Set when capturing stopped by itself ("disk_full"); cleared when a person saves again.
    stopped_reason = models.CharField(max_length=32, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    #: The /v2 fast path keeps each model's rate: a change moves the access epoch.
    objects = WatchedQuerySet.as_manager()

    def __str__(self) -> str:
        return f"capture of {self.model_id}: {'on' if self.enabled else 'off'}"

    @property
    def active(self) -> bool:
        return self.enabled and not self.stopped_reason and self.sample_rate > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "sample_rate": self.sample_rate,
            "max_items": self.max_items,
            "max_bytes": self.max_bytes,
            "retention_hours": self.retention_hours,
            "stopped_reason": self.stopped_reason or None,
        }


class Capture(models.Model):
    """One captured request: who, when, which version, how long, and its tensors' file."""

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="captures")
    version = models.PositiveIntegerField()
    created = models.DateTimeField(db_index=True)
    #: The caller's user name (never their token).
    caller = models.CharField(max_length=150, blank=True)
    latency_ms = models.FloatField()
    #: "v2" (the /v2 gateway) or "api" (POST /api/v1/models/{name}/infer).
    source = models.CharField(max_length=8)
    #: ``[{"name", "datatype", "shape"}]`` of the inputs and of the outputs.
    inputs = models.JSONField(default=list)
    outputs = models.JSONField(default=list)
    #: The file under the model's capture folder, and its size on disk.
    file = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField()

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["model", "created"], name="capture_model_created")]

    def __str__(self) -> str:
        return f"{self.model_id} v{self.version} at {self.created:%Y-%m-%d %H:%M:%S}"


class CaptureCounters(models.Model):
    """Per model: requests captured, and those not captured and why (the writer adds up)."""

    model = models.OneToOneField(Model, on_delete=models.CASCADE, related_name="capture_counts")
    written = models.PositiveBigIntegerField(default=0)
    dropped_queue_full = models.PositiveBigIntegerField(default=0)
    dropped_disk_full = models.PositiveBigIntegerField(default=0)
    dropped_unreadable = models.PositiveBigIntegerField(default=0)
    trimmed = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"capture counters of {self.model_id}"

    def to_dict(self) -> dict[str, int]:
        return {
            "written": self.written,
            "dropped_queue_full": self.dropped_queue_full,
            "dropped_disk_full": self.dropped_disk_full,
            "dropped_unreadable": self.dropped_unreadable,
            "trimmed": self.trimmed,
        }

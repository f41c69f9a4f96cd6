from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from webapp.access_epoch import WatchedQuerySet
from webapp.registry.catalogue.models import Model
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


class ReconcileReport(models.Model):
    """The last comparison of database, repository files and Triton's index (one row)."""

    created = models.DateTimeField(auto_now=True)
    #: Lines as messages (``{{ line|translated }}``) or plain words.
    repairs = models.JSONField(default=list, blank=True, encoder=MessageEncoder)
    warnings = models.JSONField(default=list, blank=True, encoder=MessageEncoder)

    def __str__(self) -> str:
        return f"reconcile at {self.created:%Y-%m-%d %H:%M:%S}"

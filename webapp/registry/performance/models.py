from __future__ import annotations

from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _

from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Job
from webapp.text import MessageEncoder


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

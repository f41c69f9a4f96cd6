"""The metrics time series and what the scraper keeps between two runs.

A row is one :class:`model_store.runtime.series.Point`: sums over an interval, so that
downsampling is addition and every rate is ``sum / seconds``. See webapp/ops/metrics_store.py.
"""

from __future__ import annotations

from django.db import models


class MetricPoint(models.Model):
    """One model version on one node over ``[start, start + seconds)`` in one tier (0 raw,
    60, 600 s). ``node`` is the :class:`Node` whose Triton was scraped (``local``: the stack's)."""

    node = models.CharField(max_length=64, default="local")
    model_name = models.CharField(max_length=64)
    version = models.CharField(max_length=20)
    tier = models.PositiveSmallIntegerField()
    start = models.DateTimeField()
    seconds = models.FloatField()
    success = models.BigIntegerField(default=0)
    failures = models.BigIntegerField(default=0)
    inferences = models.BigIntegerField(default=0)
    executions = models.BigIntegerField(default=0)
    request_us = models.FloatField(default=0.0)
    queue_us = models.FloatField(default=0.0)
    compute_input_us = models.FloatField(default=0.0)
    compute_infer_us = models.FloatField(default=0.0)
    compute_output_us = models.FloatField(default=0.0)
    # The most requests seen waiting in Triton's scheduler at a scrape in the interval.
    pending = models.FloatField(null=True)
    # The hub's own calls (Try it, sweeps): the only numbers for npu_ge models.
    client_requests = models.BigIntegerField(default=0)
    client_failures = models.BigIntegerField(default=0)
    client_latency_ms = models.FloatField(default=0.0)

    class Meta:
        indexes = [
            # A model page's chart: one model, one tier, a time range (every node or one).
            models.Index(fields=["model_name", "tier", "start"], name="metric_model_tier_start"),
            # Roll-ups and pruning: one node, one tier, a time range, every model.
            models.Index(fields=["node", "tier", "start"], name="metric_node_tier_start"),
            # The models list and the Nodes page: one tier, a time range, every node.
            models.Index(fields=["tier", "start"], name="metric_tier_start"),
        ]

    def __str__(self) -> str:
        return f"{self.model_name} v{self.version} tier {self.tier} @ {self.start.isoformat()}"


class MetricsState(models.Model):
    """The previous scrape (parsed) and how far the roll-ups got; one row per node, keyed
    ``node:<name>`` (``webapp.ops.metrics_store.state_key``).

    Consecutive scrape tasks may run in different worker processes or hosts: whichever runs
    next diffs against this row, under a row lock (the database's, never a process's).
    """

    key = models.CharField(max_length=200, unique=True)
    at = models.FloatField(null=True)
    scrape = models.JSONField(null=True)
    # Raw points before this instant are rolled up into 1-minute rows; 1-minute before the
    # next one into 10-minute rows. Readers take the finer tier from these instants on.
    minute_done = models.DateTimeField(null=True)
    ten_done = models.DateTimeField(null=True)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.key


class ClientTally(models.Model):
    """The hub's own inference calls since the last flush of one process; folded in by the
    next scrape (which deletes the rows it read). Insert-only for the writers: no races."""

    model_name = models.CharField(max_length=64)
    version = models.CharField(max_length=20)
    requests = models.BigIntegerField(default=0)
    failures = models.BigIntegerField(default=0)
    latency_ms = models.FloatField(default=0.0)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.model_name} v{self.version}: {self.requests} calls"

"""The nodes the hub knows and the newest report of each host.

Both tables were made by the ``ops`` app and keep their names (``ops_node``,
``ops_hostreport``): the move to this app changed Django's bookkeeping, not the data
(migrations ``nodes 0001`` and ``ops 0006``).
"""

from __future__ import annotations

from django.db import models

from webapp.text import MessageEncoder, MessageField


class HostReport(models.Model):
    """The newest probe report of one host (``model_store.host_report``), kept with its time.

    One row per node; with one machine that is the node ``local``. Workers write it, pages read
    it: the web process never probes hardware itself.
    """

    node = models.CharField(max_length=64, unique=True)
    made_at = models.DateTimeField()
    received = models.DateTimeField(auto_now=True)
    data = models.JSONField(default=dict, encoder=MessageEncoder)

    class Meta:
        db_table = "ops_hostreport"

    def __str__(self) -> str:
        return f"{self.node} at {self.made_at:%Y-%m-%d %H:%M:%S}"


class Node(models.Model):
    """One Triton host the hub knows: its Triton, its worker's queue ``node.<name>`` and, in
    :class:`HostReport` (same ``name``), its newest report. docs/nodes.md#built.

    ``local`` is the stack's own worker and Triton; other nodes join with a node token
    (``manage.py nodetoken NAME``) and report over the API. What the node says about itself
    (Triton's URLs, its code version, its operator's labels) is copied from its newest
    accepted report; ``draining`` is the hub operator's; ``refused_reason`` is set when the
    hub refused its last report (protocol or version) and cleared by the next accepted one.
    """

    name = models.CharField(max_length=64, unique=True)
    triton = models.JSONField(default=dict)
    hub_version = models.CharField(max_length=40, blank=True)
    labels = models.JSONField(default=dict)
    draining = models.BooleanField(default=False)
    refused_reason = MessageField()
    refused_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "ops_node"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

"""Messages are stored once (see registry's 0017): the templates the host reports kept beside
their English are folded into the fields they described, and a node's refusal reason becomes a
message.

``Node.refused_reason`` kept only English; the three refusal templates of that time are matched
against it here, once, so that the Nodes page says an old refusal in its reader's language too.
"""

from __future__ import annotations

import importlib
from typing import Any

from django.db import migrations, models

import webapp.text

_stored_once = importlib.import_module("webapp.registry.migrations.0017_messages_stored_once")

#: The refusal templates as they were when reasons were stored as English (webapp/hub_version.py).
REFUSALS = (
    "the node runs hub code version %(version)s, which is not a version",
    "the node runs hub code %(node)s, this hub runs %(hub)s: the major.minor versions must "
    "match; update the node",
    "the node speaks report protocol %(theirs)s, this hub speaks %(ours)s; run the same hub "
    "code version on the node",
)


def forward(apps: Any, schema_editor: Any) -> None:
    HostReport = apps.get_model("ops", "HostReport")
    Node = apps.get_model("ops", "Node")
    for report in HostReport.objects.all().iterator():
        report.data = _stored_once.fold(report.data)
        report.save(update_fields=["data"])
    for node in Node.objects.all().iterator():
        node.refused_said = _stored_once.message_from_english(node.refused_reason, REFUSALS)
        node.save(update_fields=["refused_said"])


def backward(apps: Any, schema_editor: Any) -> None:
    HostReport = apps.get_model("ops", "HostReport")
    Node = apps.get_model("ops", "Node")
    for report in HostReport.objects.all().iterator():
        HostReport.objects.filter(pk=report.pk).update(data=_stored_once.english(report.data))
    for node in Node.objects.all().iterator():
        Node.objects.filter(pk=node.pk).update(refused_reason=str(node.refused_said or ""))


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0004_metrics_per_node"),
        ("registry", "0017_messages_stored_once"),
    ]

    operations = [
        migrations.AddField("node", "refused_said", webapp.text.MessageField()),
        migrations.AlterField(
            "hostreport",
            "data",
            models.JSONField(default=dict, encoder=webapp.text.MessageEncoder),
        ),
        migrations.RunPython(forward, backward, elidable=False),
        migrations.RemoveField("node", "refused_reason"),
        migrations.RenameField("node", "refused_said", "refused_reason"),
    ]

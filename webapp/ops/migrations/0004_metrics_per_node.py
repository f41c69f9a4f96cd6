"""Metrics per node: each point names the node scraped, and the scraper's state is kept per
node (key ``node:<name>``) instead of per metrics URL.

Existing points were scraped from the stack's own Triton: they become ``local``'s. The state
row of that Triton (keyed by ``TRITON_METRICS_URL``) is renamed ``node:local``, so the first
scrape after the upgrade diffs against the last one before it instead of starting a new
baseline (and its roll-up instants carry over). Rows of other URLs (an older address) are
left alone: nothing reads them.
"""

from django.conf import settings
from django.db import migrations, models


def key_state_by_node(apps, schema_editor):
    MetricsState = apps.get_model("ops", "MetricsState")
    if MetricsState.objects.filter(key="node:local").exists():
        return
    MetricsState.objects.filter(key=str(settings.TRITON_METRICS_URL)).update(key="node:local")


def key_state_by_url(apps, schema_editor):
    MetricsState = apps.get_model("ops", "MetricsState")
    MetricsState.objects.filter(key="node:local").update(key=str(settings.TRITON_METRICS_URL))


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0003_nodes"),
    ]

    operations = [
        migrations.AddField(
            model_name="metricpoint",
            name="node",
            field=models.CharField(default="local", max_length=64),
        ),
        migrations.AddIndex(
            model_name="metricpoint",
            index=models.Index(fields=["node", "tier", "start"], name="metric_node_tier_start"),
        ),
        migrations.RunPython(key_state_by_node, key_state_by_url),
    ]

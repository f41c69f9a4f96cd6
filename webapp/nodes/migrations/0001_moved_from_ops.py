"""Node and HostReport move from the ``ops`` app to ``nodes``: Django's state only.

The tables keep their names (``ops_node``, ``ops_hostreport``) and their rows; nothing is
created or copied. The content types follow the models, so permissions and admin history
that name them keep pointing at the same rows. ``ops 0006`` removes the models from the
``ops`` state after this one has added them here.
"""

from django.db import migrations, models

import webapp.text

MOVED = ("node", "hostreport")


def _relabel(apps, schema_editor, old, new):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        # A database made before the move has the old row; a fresh one has neither yet
        # (content types are created after migrating). Never make a duplicate.
        if not ContentType.objects.filter(app_label=new, model=model).exists():
            ContentType.objects.filter(app_label=old, model=model).update(app_label=new)


def forwards(apps, schema_editor):
    _relabel(apps, schema_editor, "ops", "nodes")


def backwards(apps, schema_editor):
    _relabel(apps, schema_editor, "nodes", "ops")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("ops", "0005_messages_stored_once"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="HostReport",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("node", models.CharField(max_length=64, unique=True)),
                        ("made_at", models.DateTimeField()),
                        ("received", models.DateTimeField(auto_now=True)),
                        ("data", models.JSONField(default=dict, encoder=webapp.text.MessageEncoder)),
                    ],
                    options={"db_table": "ops_hostreport"},
                ),
                migrations.CreateModel(
                    name="Node",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("name", models.CharField(max_length=64, unique=True)),
                        ("triton", models.JSONField(default=dict)),
                        ("hub_version", models.CharField(blank=True, max_length=40)),
                        ("labels", models.JSONField(default=dict)),
                        ("draining", models.BooleanField(default=False)),
                        ("refused_reason", webapp.text.MessageField()),
                        ("refused_at", models.DateTimeField(blank=True, null=True)),
                        ("created", models.DateTimeField(auto_now_add=True)),
                    ],
                    options={"db_table": "ops_node", "ordering": ["name"]},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]

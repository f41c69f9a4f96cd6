"""Node and HostReport now belong to the ``nodes`` app (``nodes 0001``): state only.

The tables stay (``nodes`` uses them under the same names); only Django's record of which
app owns them changes, so no row is touched.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0005_messages_stored_once"),
        ("nodes", "0001_moved_from_ops"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="HostReport"),
                migrations.DeleteModel(name="Node"),
            ],
            database_operations=[],
        ),
    ]

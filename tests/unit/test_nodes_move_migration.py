"""Node and HostReport moved from the ``ops`` app to ``nodes``: the rows, tables and content
types of a database made before the move are all still there after it, and going back works.

The database is migrated back to the schema before the move (``ops 0005``, no ``nodes`` app),
filled as that release would fill it, then migrated forward.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from webapp.nodes.models import HostReport, Node

BEFORE = [("ops", "0005_messages_stored_once"), ("nodes", None)]
AFTER = [("ops", "0006_nodes_moved_out"), ("nodes", "0001_moved_from_ops")]


def migrate_to(targets: list[tuple[str, str | None]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state([t for t in targets if t[1]]).apps


@pytest.fixture
def before_the_move(transactional_db: None) -> Any:
    apps = migrate_to(BEFORE)
    yield apps
    call_command("migrate", verbosity=0)


def test_rows_and_content_types_survive_the_move(before_the_move: Any) -> None:
    apps = before_the_move
    assert "ops_node" in connection.introspection.table_names()
    OldNode = apps.get_model("ops", "Node")
    OldReport = apps.get_model("ops", "HostReport")
    node = OldNode.objects.create(name="npu-a", draining=True, labels={"rack": "7"})
    OldReport.objects.create(node="npu-a", made_at=timezone.now(), data={"npus": []})
    # Content types are not part of the migrations' history: the tables are today's.
    ContentType.objects.clear_cache()
    node_type = ContentType.objects.get_or_create(app_label="ops", model="node")[0]
    perm = Permission.objects.get_or_create(
        content_type_id=node_type.pk, codename="view_node", defaults={"name": "Can view node"}
    )[0]

    migrate_to(AFTER)

    moved = Node.objects.get(name="npu-a")
    assert (moved.pk, moved.draining, moved.labels) == (node.pk, True, {"rack": "7"})
    assert HostReport.objects.get(node="npu-a").data == {"npus": []}
    assert Node._meta.db_table == "ops_node"
    assert HostReport._meta.db_table == "ops_hostreport"
    # The same content type row, now under its new app: permissions still point at it.
    ContentType.objects.clear_cache()
    relabelled = ContentType.objects.get_for_model(Node)
    assert relabelled.pk == node_type.pk
    assert not ContentType.objects.filter(app_label="ops", model="node").exists()
    assert Permission.objects.get(pk=perm.pk).content_type_id == relabelled.pk


def test_going_back_gives_the_rows_to_ops_again(transactional_db: None) -> None:
    Node.objects.create(name="npu-b")
    try:
        apps = migrate_to(BEFORE)
        assert apps.get_model("ops", "Node").objects.filter(name="npu-b").exists()
        assert "ops_node" in connection.introspection.table_names()
    finally:
        call_command("migrate", verbosity=0)
    assert Node.objects.filter(name="npu-b").exists()

"""The migration that stores messages once, on a database as the previous release made it.

The database is migrated back to the previous release's schema (registry 0016, ops 0004), filled
with rows in that release's format (English in the field, the template beside it under
``texts``), then migrated forward: every row must say what it said before, in English and in
Chinese, and rows that kept no template stay the words they were. Then back again: the old
columns get the English.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone, translation
from django.utils.translation import gettext

from model_store.text import Message
from webapp.text import localize

OLD = [("registry", "0016_reconcile_node_texts"), ("ops", "0004_metrics_per_node")]
NEW = [("registry", "0017_messages_stored_once"), ("ops", "0005_messages_stored_once")]

UPLOADED = "%(user)s uploaded %(file)s as version %(number)s."
NOT_SERVED = "%(model)s did not load: %(reason)s"
REASON = "Triton at %(url)s does not answer."
OTHER_VERSION = (
    "the node runs hub code %(node)s, this hub runs %(hub)s: the major.minor versions must "
    "match; update the node"
)


def old_json(template: str, **params: Any) -> dict[str, Any]:
    """A template as the previous release stored it (``Text.to_json``)."""
    values = {k: {"__text__": v} if isinstance(v, dict) else v for k, v in params.items()}
    english = template % {k: v["text"] if isinstance(v, dict) else v for k, v in params.items()}
    return {"text": english, "template": template, "params": values}


def migrate_to(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


@pytest.fixture
def old_apps(transactional_db: None) -> Any:
    apps = migrate_to(OLD)
    yield apps
    call_command("migrate", verbosity=0)


def fill_old(apps: Any) -> dict[str, Any]:
    """Rows in the previous release's format; returns their primary keys."""
    Model = apps.get_model("registry", "Model")
    Version = apps.get_model("registry", "Version")
    Job = apps.get_model("registry", "Job")
    Event = apps.get_model("registry", "Event")
    NodeServing = apps.get_model("registry", "NodeServing")
    ReconcileReport = apps.get_model("registry", "ReconcileReport")
    HostReport = apps.get_model("ops", "HostReport")
    Node = apps.get_model("ops", "Node")

    model = Model.objects.create(name="resnet", target="onnxruntime")
    reason = old_json(REASON, url="http://triton:8000")
    failed = old_json(NOT_SERVED, model="resnet", reason=reason)
    version = Version.objects.create(
        model=model,
        number=1,
        status="failed",
        source_filename="resnet.onnx",
        source_sha256="ab" * 32,
        source_size=10,
        error=failed["text"],
        findings=[
            {
                "level": "warning",
                "code": "x",
                "message": reason["text"],
                "advice": "plain advice",
                "texts": {"message": reason},
            }
        ],
        verification={"status": "not_run", "reason": reason["text"], "texts": {"reason": reason}},
    )
    job = Job.objects.create(
        kind="compile",
        model=model,
        version=version,
        state="failed",
        error=failed["text"],
        texts={"error": failed},
        steps=[
            {"name": "validate", "state": "done", "message": "ok"},
            {
                "name": "compile",
                "state": "failed",
                "message": failed["text"],
                "texts": {"message": failed},
            },
        ],
    )
    uploaded = old_json(UPLOADED, user="ada", file="resnet.onnx", number=1)
    event = Event.objects.create(
        model=model,
        kind="version.uploaded",
        message=uploaded["text"],
        data={"sha256": "ab", "texts": {"message": uploaded}},
    )
    plain_event = Event.objects.create(model=model, kind="old", message="Made before templates.")
    NodeServing.objects.create(
        model=model, node="n1", state="failed", error=reason["text"], texts={"error": reason}
    )
    ReconcileReport.objects.create(
        pk=1,
        repairs=[reason["text"], "plain repair"],
        warnings=[],
        texts={"repairs": [reason, "plain repair"], "warnings": []},
    )
    HostReport.objects.create(
        node="local",
        made_at=timezone.now(),
        data={
            "devices": {
                "available": False,
                "reason": reason["text"],
                "warnings": [reason["text"]],
                "texts": {"reason": reason, "warnings": [reason]},
            }
        },
    )
    english_refusal = OTHER_VERSION % {"node": "1.0.0", "hub": "2.1.0"}
    Node.objects.create(name="n1", refused_reason=english_refusal)
    Node.objects.create(name="n2", refused_reason="some words of an older hub")
    return {
        "job": job.pk,
        "version": version.pk,
        "event": event.pk,
        "plain_event": plain_event.pk,
        "refusal": english_refusal,
    }


def test_rows_of_the_previous_release_say_what_they_said(old_apps: Any) -> None:
    keys = fill_old(old_apps)
    call_command("migrate", verbosity=0)
    from webapp.nodes.models import HostReport, Node
    from webapp.registry.catalogue.models import Version
    from webapp.registry.jobs.models import Event, Job
    from webapp.registry.serving.models import NodeServing, ReconcileReport

    job = Job.objects.get(pk=keys["job"])
    assert isinstance(job.error, Message) and job.error.template == NOT_SERVED
    assert str(job.error) == "resnet did not load: Triton at http://triton:8000 does not answer."
    assert job.steps[0]["message"] == "ok"
    assert job.steps[1]["message"]["template"] == NOT_SERVED
    assert "texts" not in job.steps[1]
    version = Version.objects.get(pk=keys["version"])
    assert version.error == job.error  # the failed build's template, found through its job
    assert version.findings[0]["message"]["template"] == REASON
    assert version.findings[0]["advice"] == "plain advice"
    assert version.verification["reason"]["template"] == REASON
    event = Event.objects.get(pk=keys["event"])
    assert isinstance(event.message, Message) and event.message.template == UPLOADED
    assert event.data == {"sha256": "ab"}
    assert Event.objects.get(pk=keys["plain_event"]).message == "Made before templates."
    assert NodeServing.objects.get(node="n1").error.template == REASON
    report = ReconcileReport.objects.get(pk=1)
    assert report.repairs[0]["template"] == REASON and report.repairs[1] == "plain repair"
    devices = HostReport.objects.get(node="local").data["devices"]
    assert devices["reason"]["template"] == REASON and devices["warnings"][0]["template"] == REASON
    assert "texts" not in devices
    refused = Node.objects.get(name="n1").refused_reason
    assert isinstance(refused, Message) and refused.template == OTHER_VERSION
    assert str(refused) == keys["refusal"]
    assert Node.objects.get(name="n2").refused_reason == "some words of an older hub"

    # Shown as before in English, and in Chinese now from the same stored value.
    with translation.override("en"):
        assert localize(event.message) == "ada uploaded resnet.onnx as version 1."
    with translation.override("zh-hans"):
        chinese = gettext(UPLOADED) % {"user": "ada", "file": "resnet.onnx", "number": 1}
        assert chinese != "ada uploaded resnet.onnx as version 1."
        assert localize(event.message) == chinese
        assert localize(devices["reason"]) == gettext(REASON) % {"url": "http://triton:8000"}


def test_back_to_the_previous_release_gives_english(old_apps: Any) -> None:
    keys = fill_old(old_apps)
    call_command("migrate", verbosity=0)
    apps = migrate_to(OLD)
    job = apps.get_model("registry", "Job").objects.get(pk=keys["job"])
    assert job.error == "resnet did not load: Triton at http://triton:8000 does not answer."
    assert job.steps[1]["message"] == job.error
    event = apps.get_model("registry", "Event").objects.get(pk=keys["event"])
    assert event.message == "ada uploaded resnet.onnx as version 1."
    node = apps.get_model("ops", "Node").objects.get(name="n1")
    assert node.refused_reason == keys["refusal"]


def test_the_new_state_needs_no_further_migration(db: None) -> None:
    executor = MigrationExecutor(connection)
    assert not executor.migration_plan(executor.loader.graph.leaf_nodes())

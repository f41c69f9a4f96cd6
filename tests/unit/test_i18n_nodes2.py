"""Issue 22: the nodes' and operations' sentences are said from templates — the reconcile
report's repairs and warnings, a node's serving error and refusal reason, the waits for a node's
answer, npu-smi's reasons and warnings, the CANN status, the tuner's notes — with the English
unchanged and the message stored once (its template and values) where it is stored.

The zh-Hans catalogue is merged later, so these tests check the mechanism: a stand-in
translator (``webapp.text.gettext`` patched) shows that pages send the template through it, and
records of plain words show as stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.template import Context, Template
from django.utils import translation

from model_store.compile.atc.environment import LAYOUT_NAMES, cann_status
from model_store.devices import read_devices
from model_store.devices.info_table import parse_npu_smi_info
from model_store.perf.tune import Measurement, Objective, Trial, _label, _why_not
from model_store.text import Message, as_json, restored, say
from model_store.text import said as _said
from webapp import live
from webapp import text as web_text
from webapp.hub_version import incompatibility
from webapp.nodes import host_reports
from webapp.nodes import summaries as ops_nodes
from webapp.nodes.models import Node
from webapp.nodes.replies import _crashed, _stopped_reporting, _too_slow
from webapp.ops.diagnostics import STATE_LABELS
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.jobs.steps import COMPILE_STEPS, initial_steps
from webapp.registry.serving import rollout
from webapp.registry.serving.models import NodeServing, ReconcileReport
from webapp.registry.serving.reconcile import _save_report, interrupted_repair


@pytest.fixture(autouse=True)
def _store(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings.MODEL_STORE_ROOT = tmp_path / "store"


@pytest.fixture(autouse=True)
def _no_pushes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "publish", lambda topic, data: None)


@pytest.fixture
def zh(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in catalogue: every template is "translated" to ``ZH[<template>]``."""
    monkeypatch.setattr(web_text, "gettext", lambda template: f"ZH[{template}]")


def render(source: str, **context: Any) -> str:
    with translation.override("en"):
        return Template("{% load hub_i18n %}" + source).render(Context(context))


# --------------------------------------------------------------------------- reconcile


def test_reconcile_stores_its_lines_as_messages(db: None, zh: None) -> None:
    repair = say("%(model)s: Triton had forgotten it; v%(version)s is loaded again.",
                 model="resnet", version=3)  # fmt: skip
    warning = say("Triton serves %(model)s, which this hub does not know.", model="bert")
    report = _save_report([repair, "a plain line"], [warning])
    report.refresh_from_db()
    assert report.repairs == [repair.to_json(), "a plain line"]
    assert report.warnings == [warning.to_json()]
    shown = render("{% for l in r.repairs %}{{ l|translated }}|{% endfor %}", r=report)
    assert shown == f"ZH[{repair!s}]|a plain line|"
    assert render("{% for l in r.warnings %}{{ l|translated }}{% endfor %}", r=report) == (
        f"ZH[{warning!s}]"
    )


def test_a_reconcile_report_of_plain_words_shows_as_stored(db: None, zh: None) -> None:
    report = ReconcileReport.objects.create(repairs=["old repair"], warnings=["old warning"])
    assert report.repairs == ["old repair"]
    assert render("{% for l in r.warnings %}{{ l|translated }}{% endfor %}", r=report) == (
        "old warning"
    )


def test_interrupted_job_repair_is_one_sentence_per_kind() -> None:
    said = interrupted_repair("resnet", "serve", "u1")
    assert said == "resnet: marked the interrupted serve job u1 as failed."
    assert "%(kind)s" not in said.template
    assert interrupted_repair("m", "unload", "u").template.count("unload job") == 1


# --------------------------------------------------------------------------- node serving


def test_node_serving_error_is_a_message(db: None, zh: None) -> None:
    model = Model.objects.create(name="resnet")
    row = NodeServing.objects.create(model=model, node="b", version=2, state="serving")
    assert rollout.note_triton_models("b", {"resnet": [1]}) == ["resnet"]
    row.refresh_from_db()
    assert row.error == (
        "node b's Triton does not serve v2 (it restarted, or was changed by hand); reconcile "
        "places it again"
    )
    assert isinstance(row.error, Message) and row.error.params == {"node": "b", "version": 2}
    assert row.to_dict()["error"] == "ZH[" + str(row.error) + "]"  # the answer: said words
    assert render("{{ r.error|translated }}", r=row).startswith("ZH[node b")


def test_a_node_serving_error_of_plain_words_shows_as_stored(db: None, zh: None) -> None:
    model = Model.objects.create(name="resnet")
    row = NodeServing.objects.create(model=model, node="b", state="failed", error="old words")
    row.refresh_from_db()
    assert render("{{ r.error|translated }}", r=row) == "old words"
    assert row.to_dict()["error"] == "old words"


def test_node_task_sentences_are_whole_per_task() -> None:
    for what in ("build", "switch", "trial", "unload"):
        crashed = _crashed(what, node="b", error="boom")
        assert crashed == f"Node b crashed running the {what}: boom"
        assert "%(what)s" not in crashed.template
        down = _stopped_reporting(what, node="b", seconds="45")
        assert (
            down
            == f"Node b stopped reporting during the {what} (down after 45 s without a report)."
        )
        assert "%(what)s" not in down.template
        slow = _too_slow(what, node="b", seconds="600")
        assert slow == f"Node b did not finish the {what} within 600 s."
        assert "%(what)s" not in slow.template


# --------------------------------------------------------------------------- refusals


def test_incompatibility_is_a_message_stored_as_one(db: None, zh: None) -> None:
    said = incompatibility("0.9.1", hub="0.1.0")
    assert isinstance(said, Message)
    assert said == (
        "the node runs hub code 0.9.1, this hub runs 0.1.0: the major.minor versions must match; "
        "update the node"
    )
    not_a_version = incompatibility("abc", hub="0.1.0")
    assert not_a_version == "the node runs hub code version 'abc', which is not a version"
    Node.objects.create(name="b", refused_reason=said)
    summary = ops_nodes.summary_of("b")
    assert summary["refused_reason"] == said
    assert render("{{ n.refused_reason|translated }}", n=summary).startswith("ZH[the node runs")


def test_a_refused_report_is_stored_as_its_message(db: None) -> None:
    reason = ops_nodes.refusal({"protocol": 99})
    assert isinstance(reason, Message)
    error = ops_nodes.refuse("b", reason)
    assert Node.objects.get(name="b").refused_reason == reason
    assert "report protocol 99" in error.message


# --------------------------------------------------------------------------- devices, CANN


def test_npu_smi_reasons_and_warnings_are_texts() -> None:
    missing = read_devices(which=lambda name: None)
    assert missing["reason"] == "no Ascend NPU on this host (npu-smi not found)"
    assert isinstance(missing["reason"], Message)
    report = parse_npu_smi_info("")
    assert report.warnings == ["npu-smi printed nothing; no NPU table to read."]
    assert isinstance(report.warnings[0], Message)
    odd = parse_npu_smi_info("| weird |\nnot a table line")
    assert all(isinstance(w, Message) for w in odd.warnings)


def test_devices_cross_as_json_and_come_back_translatable(zh: None) -> None:
    found = {
        "available": True,
        "npus": [],
        "warnings": [say("npu-smi says: %(line)s", line="[WARNING] x"), "plain"],
    }
    stored = json.loads(json.dumps(as_json(found)))
    assert stored["warnings"][1] == "plain"
    back = restored(stored)
    assert back["warnings"] == found["warnings"]
    shown = render("{% for w in d.warnings %}{{ w|translated }}|{% endfor %}", d=back)
    assert shown == "ZH[npu-smi says: [WARNING] x]|plain|"
    missing = json.loads(json.dumps(as_json(read_devices(which=lambda name: None))))
    assert render("{{ d.reason|translated }}", d=restored(missing)) == (
        "ZH[no Ascend NPU on this host (npu-smi not found)]"
    )
    old = {"available": False, "reason": "old reason", "npus": []}
    assert restored(old) == old


def test_cann_status_reasons_and_layout_names_are_texts(tmp_path: Path) -> None:
    status = cann_status({"PATH": str(tmp_path)}, default_homes=[])
    assert isinstance(status.reason, Message)
    assert str(status.reason).startswith("ATC (CANN toolkit) is not installed here; set ATC_PATH")
    assert status.reason.template == "%(problem)s; %(hint)s."
    assert isinstance(LAYOUT_NAMES["cann"], Message)


def test_start_a_worker_and_the_ok_word_are_said_in_english_by_default(settings) -> None:  # type: ignore[no-untyped-def]
    settings.HOST_PROBE_SECONDS = 30
    with translation.override("en"):
        assert host_reports.start_a_worker().endswith("when it starts and every 30 s")
        assert str(STATE_LABELS["ok"]) == "OK"
    assert host_reports.not_reported_reason().params == {"seconds": 30}


# --------------------------------------------------------------------------- versions, tuning


def test_version_error_is_its_compile_jobs_message(db: None, zh: None) -> None:
    model = Model.objects.create(name="resnet")
    version = Version.objects.create(model=model, number=1, source_filename="m.onnx",
                                     source_sha256="0" * 64, source_size=1)  # fmt: skip
    job = Job.objects.create(kind="compile", model=model, version=version,
                             steps=initial_steps(COMPILE_STEPS))  # fmt: skip
    jobs.fail(job, say("ATC failed: %(why)s", why="x"), "atc_failed")
    version.refresh_from_db()
    assert version.error == "ATC failed: x" and isinstance(version.error, Message)
    assert render("{{ v.error|translated }}", v=version) == "ZH[ATC failed: x]"
    Version.objects.filter(pk=version.pk).update(error="typed by hand")
    version.refresh_from_db()
    assert render("{{ v.error|translated }}", v=version) == "typed by hand"


def test_tuning_notes_are_texts_kept_in_the_trial_record(zh: None) -> None:
    goal = Objective("throughput", p99_ms=50)
    assert goal.describe() == "highest throughput with p99 <= 50 ms"
    assert isinstance(goal.describe(), Message)
    assert Objective("latency", rate_rps=20).describe() == "lowest p99 at 20 requests/s"
    measured = Measurement(throughput_rps=10.0, p50_ms=20.0, p99_ms=80.0, load=4)
    why = _why_not(goal, measured)
    assert why == "p99 80.0 ms over the 50 ms budget at every load"
    trial = Trial(0, {}, _label({}), "measured", reason=why)
    row = trial.to_dict()
    assert row["label"] == _label({}).to_json() and row["reason"] == why.to_json()
    assert render("{{ t.reason|translated }}", t=json.loads(json.dumps(row))) == (f"ZH[{why!s}]")
    assert _said(RuntimeError(say("the trial failed"))).template == "the trial failed"
    assert _said(RuntimeError("plain")) == "plain"

"""Issue 22: the targets' findings, the config linter and the Ascend self-test say their
sentences as templates (model_store.text.say), keep the English as it was, store the templates
beside it, and the pages show them through the translation filters."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.template import Context, Template
from django.template.loader import render_to_string
from django.utils import translation

from model_store.ascend.selftest.runner import STAGES, run_selftest
from model_store.ascend.selftest.stage import Outcome, Stage, StageSpec
from model_store.config import DynamicBatching, ModelConfig, TensorSpec
from model_store.config_lint import lint
from model_store.onnx_info import OnnxInfo, TensorInfo
from model_store.targets.findings import Finding, error
from model_store.targets.npu_ge_checks import gear_findings
from model_store.targets.signature import signature_findings
from model_store.text import Message, say


def _info(*, inputs: list[TensorInfo], outputs: list[TensorInfo]) -> OnnxInfo:
    return OnnxInfo(
        inputs=inputs,
        outputs=outputs,
        ir_version=8,
        opset_imports={"": 17},
        default_opset=17,
        producer_name="test",
        producer_version="1",
        operators={"Relu": 1},
        node_count=1,
        parameter_count=0,
        file_size=100,
        sha256="0" * 64,
    )


def _fixed_batch_finding() -> Finding:
    info = _info(
        inputs=[TensorInfo("x", "FLOAT", "TYPE_FP32", "float32", [1, 3])],
        outputs=[TensorInfo("y", "FLOAT", "TYPE_FP32", "float32", ["batch", 3])],
    )
    (found,) = [f for f in signature_findings(info, 8) if f.code == "batch_axis_not_dynamic"]
    return found


# model_store: messages and their English ------------------------------------------------


def test_a_finding_keeps_its_english_and_its_template() -> None:
    found = _fixed_batch_finding()
    assert found.message == (
        "The input 'x' has shape [1, 3], whose first axis is fixed, but max_batch_size is 8, "
        "which makes Triton treat the first axis as the batch."
    )
    assert isinstance(found.message, Message) and isinstance(found.advice, Message)
    assert found.message.template.startswith("The input %(name)r has shape %(dims)s")
    assert found.message.params == {"name": "x", "dims": "[1, 3]", "max_batch_size": 8}


def test_finding_to_dict_stores_its_sentences_as_messages() -> None:
    found = _fixed_batch_finding()
    data = found.to_dict()
    assert set(data) == {"level", "code", "message", "advice"}
    assert data["message"] == found.message.to_json()  # type: ignore[union-attr]
    assert data["message"]["params"]["name"] == "x"
    assert json.loads(json.dumps(data)) == data


def test_a_finding_of_plain_strings_stores_the_strings() -> None:
    assert error("c", "plain", "words").to_dict() == {
        "level": "error",
        "code": "c",
        "message": "plain",
        "advice": "words",
    }


def test_nested_reasons_are_templates_too() -> None:
    found = gear_findings({"dynamic_dims": "1", "ge_input_shape": {"x": [-1, 3]}})
    assert [f.code for f in found] == ["too_few_gears"]
    assert found[0].message.template.startswith("Shape gears has %(count)s gear;")
    assert str(found[0].message).startswith("Shape gears has 1 gear; GE needs at least 2")


def test_config_lint_problems_are_templates_with_the_same_english() -> None:
    cfg = ModelConfig(
        name="m",
        backend="onnxruntime",
        max_batch_size=0,
        inputs=[TensorSpec("x", "TYPE_FP32", [3])],
        outputs=[],
        dynamic_batching=DynamicBatching(),
    )
    problems = lint(cfg)
    assert "The model has no outputs; list at least one." in problems
    assert "dynamic_batching needs max_batch_size > 0; set one or remove batching." in problems
    assert all(isinstance(p, Message) for p in problems)
    assert {p.template for p in problems} >= {"The model has no outputs; list at least one."}


# the self-test ---------------------------------------------------------------------------------


def test_selftest_titles_and_blocked_summaries_are_templates() -> None:
    assert all(isinstance(spec.title, Message) for spec in STAGES)

    def broken(_ctx: Any) -> Outcome:
        raise RuntimeError("boom")

    specs = (
        StageSpec("a", say("CANN environment and version"), (), broken),
        StageSpec("b", say("SoC"), ("a",), broken),
    )
    first, second = run_selftest(None, stages=specs)  # type: ignore[arg-type]
    assert first.summary == "the stage itself failed: RuntimeError: boom"
    assert second.summary == "skipped: needs CANN environment and version"
    assert isinstance(second.summary, Message)
    assert second.summary.template == "skipped: needs %(stage)s"


def test_stage_to_dict_is_english_for_the_report_attached_to_a_bug() -> None:
    stage = Stage(
        "soc",
        say("SoC"),
        "passed",
        say("SoC %(soc)s, from %(source)s.", soc="Ascend310P3", source=say("pyACL")),
    )
    data = stage.to_dict()
    assert data["summary"] == "SoC Ascend310P3, from pyACL." and type(data["summary"]) is str
    assert data["title"] == "SoC" and data["next_step"] == ""
    assert json.loads(json.dumps(data)) == data


# pages -----------------------------------------------------------------------------------------


@pytest.fixture
def pretend_chinese(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 'translation' that marks every template it is asked for, to see localize() at work
    before the catalogue has these entries."""
    monkeypatch.setattr("webapp.text.gettext", lambda template: f"ZH[{template}]")


def test_a_stored_finding_is_said_through_the_one_filter(pretend_chinese: None) -> None:
    stored = _fixed_batch_finding().to_dict()
    page = Template("{% load hub_i18n %}{{ f.message|translated }}").render(Context({"f": stored}))
    assert page.startswith("ZH[The input &#x27;x&#x27; has shape [1, 3]")


def test_a_finding_of_plain_words_shows_as_stored() -> None:
    old = {"level": "error", "code": "c", "message": "Old <english>.", "advice": ""}
    page = Template("{% load hub_i18n %}{{ f.message|translated }}").render(Context({"f": old}))
    assert page == "Old &lt;english&gt;."


def _preview(findings: list[dict[str, Any]], problems: list[str]) -> dict[str, Any]:
    plan = {
        "reuses_artifact": True,
        "rebuild": [],
        "changed": {},
        "findings": findings,
        "problems": problems,
        "ok": False,
    }
    return {"state": "planned", "plan": plan, "diff_lines": []}


def test_revision_preview_shows_findings_and_lint_problems_in_english() -> None:
    found = _fixed_batch_finding()
    problem = say("The model has no outputs; list at least one.")
    with translation.override("en"):
        page = render_to_string(
            "registry/_revision_preview.html",
            {"preview": _preview([found.to_dict()], [problem]), "version": {"number": 1}},
        )
    assert "The input &#x27;x&#x27; has shape [1, 3]" in page
    assert "Set max_batch_size to 0, or export the model" in page
    assert "The model has no outputs; list at least one." in page


def test_revision_preview_translates_findings_and_lint_problems(pretend_chinese: None) -> None:
    found = _fixed_batch_finding()
    problem = say("The model has no outputs; list at least one.")
    page = render_to_string(
        "registry/_revision_preview.html",
        {"preview": _preview([found.to_dict()], [problem]), "version": {"number": 1}},
    )
    assert "ZH[The input &#x27;x&#x27; has shape [1, 3]" in page
    assert "ZH[Set max_batch_size to 0" in page
    assert "ZH[The model has no outputs; list at least one.]" in page

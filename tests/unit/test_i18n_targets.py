"""Issue 22: the targets' labels, option labels and help, option refusals, copies notes, the
memory estimate's words, adopted lint problems and the API's findings are said from templates
(model_store.text.say), English unchanged, and the web layer says them in the reader's language."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.utils import translation

from model_store.memory_fit import copies_per_device, estimate_memory, fits
from model_store.targets import all_targets, get_target
from model_store.targets.findings import error
from model_store.targets.options import InvalidOptions, options_json_schema, parse_value
from model_store.targets.revise import normalize_changes
from model_store.text import Message, as_json, from_json, restored, say
from webapp.registry.build.option_forms import OptionsForm
from webapp.registry.catalogue.adopt import _finding
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.performance.actions.revisions import localized_preview
from webapp.registry.serving.memory import APPROXIMATION
from webapp.text import localize, localized


def _spec(target: str, name: str) -> Any:
    return next(s for s in get_target(target).option_specs() if s.name == name)


# model_store: messages and their English ------------------------------------------------


def test_target_labels_and_descriptions_are_texts_with_their_english() -> None:
    for target in all_targets():
        assert isinstance(target.label, Message) and isinstance(target.description, Message)
    assert get_target("onnxruntime").label == "CPU (ONNX Runtime)"
    assert get_target("onnxruntime").label.template == "CPU (ONNX Runtime)"


def test_every_option_label_and_help_is_a_text() -> None:
    for target in all_targets():
        for spec in target.option_specs():
            assert isinstance(spec.label, Message), (target.name, spec.name)
            assert isinstance(spec.help, Message), (target.name, spec.name)


def test_an_option_help_keeps_its_numbers_as_parameters() -> None:
    spec = _spec("onnxruntime", "max_batch_size")
    assert str(spec.help).startswith(
        "Largest batch Triton forms along the first axis. Automatic: 8 "
    )
    assert "%(default)s" in spec.help.template and spec.help.params == {"default": 8}
    gears = _spec("acl", "dynamic_batch_size").help
    assert "(2 to 100 different gears)" in gears and gears.params == {"low": 2, "high": 100}


def test_choice_labels_that_are_words_are_texts_and_codes_stay() -> None:
    labels = dict(_spec("onnxruntime", "ort_optimization_level").choices)
    assert isinstance(labels["basic"], Message)
    assert labels["basic"] == "Basic (constant folding, redundant nodes)"
    socs = dict(_spec("acl", "soc_version").choices)
    assert not isinstance(socs["Ascend910B1"], Message)


def test_a_refused_value_names_the_option_in_one_template() -> None:
    spec = _spec("onnxruntime", "max_batch_size")
    with pytest.raises(InvalidOptions) as caught:
        parse_value(spec, 5000)
    message = caught.value.message
    assert message == (
        "Option 'max_batch_size' (Max batch size): value 5000 is above the maximum 1024."
    )
    assert isinstance(message, Message)
    assert message.template == "Option '%(name)s' (%(label)s): %(problem)s"
    problem = message.params["problem"]
    assert problem.template == "%(what)s %(number)s is above the maximum %(maximum)s."
    assert problem.params["what"].template == "value"
    assert isinstance(message.params["label"], Message)


def test_shape_refusals_keep_the_names_as_data() -> None:
    spec = _spec("onnxruntime", "input_shapes")
    with pytest.raises(InvalidOptions) as caught:
        parse_value(spec, "x:1,0")
    message = caught.value.message
    assert str(message).endswith("dims of 'x' must be >= 1 (or -1 for dynamic), got [1, 0].")
    assert message.params["problem"].params == {"name": "'x'", "dims": "[1, 0]"}


@pytest.mark.parametrize(
    ("target", "options", "template_start"),
    [
        ("onnxruntime", {"nope": 1}, "Unknown option(s) for target %(target)s"),
        ("onnxruntime", {"dynamic_batching": True, "max_batch_size": 0}, "Option 'dynamic_b"),
        ("acl", {"soc_version": "Ascend310P3", "target_opset": 5}, "Option 'target_opset' is %"),
        ("npu_ge", {"static_model": True, "max_batch_size": 4}, "Option 'static_model' needs"),
    ],
)
def test_cross_option_refusals_are_texts(
    target: str, options: dict[str, Any], template_start: str
) -> None:
    with pytest.raises(InvalidOptions) as caught:
        get_target(target).parse_options(options)
    message = caught.value.message
    assert isinstance(message, Message) and message.template.startswith(template_start)
    assert "%(" not in str(message)


def test_revise_refusals_are_texts() -> None:
    with pytest.raises(InvalidOptions) as caught:
        normalize_changes({"dynamic_batching": {"bogus": 1}})
    assert caught.value.message == (
        "Unknown key(s) in 'dynamic_batching': bogus. It takes "
        "preferred_batch_size and max_queue_delay_microseconds, or true/false."
    )
    assert isinstance(caught.value.message, Message)


def test_the_json_schema_title_is_a_text() -> None:
    title = from_json(options_json_schema(get_target("onnxruntime"))["title"])
    assert isinstance(title, Message)
    assert title == "CPU (ONNX Runtime) build options"
    assert title.template == "%(target)s build options"


def test_copies_notes_are_texts() -> None:
    copies, note = copies_per_device("onnxruntime", 3)
    assert (copies, note) == (3, "each instance holds its own weights and buffers")
    assert isinstance(note, Message)
    copies, note = copies_per_device("npu_ge", 4, devices=2)
    assert copies == 2
    assert str(note).startswith(
        "npu_ge: ceil(4 instances x 1 / 2 device(s)) GE sessions per device"
    )
    assert note.params == {"instances": 4, "per_instance": 1, "devices": 2}
    _, explicit = copies_per_device("npu_ge", 4, parameters={"device_exec_blocks": "3"})
    assert explicit.template == "device_exec_blocks from config.pbtxt: one GE session per block"


# The web layer: said in the request's language ------------------------------------------------


def test_web_layer_says_option_texts_through_localize() -> None:
    spec = _spec("acl", "soc_version")
    with translation.override("en"):
        assert localize(spec.label) == "Ascend SoC"
        form = OptionsForm(get_target("acl"))
        assert form.fields["opt_soc_version"].label == "Ascend SoC"
        assert form.fields["opt_soc_version"].help_text == str(spec.help)
        assert localize(get_target("npu_ge").label) == "Ascend NPU (Triton GE backend)"


def test_approximation_keeps_its_percent_sign() -> None:
    assert "not counted: 10% of free memory is kept for them." in APPROXIMATION
    assert APPROXIMATION.params == {"headroom": 10}


def test_localized_estimate_says_every_text_and_keeps_data() -> None:
    estimate = estimate_memory(100 * 2**20, 2, 4, 2**20)
    verdict = fits(estimate, 2**30, device=say("this host's memory"))
    result = {
        "weights": {"bytes": 1, "source": say("packaged artifact")},
        "devices": {"reason": say("the onnxruntime target runs on the CPU"), "fit": []},
        "host": verdict.to_dict(),
        "copies_note": copies_per_device("onnxruntime", 2)[1],
        "approximation": APPROXIMATION,
        "instances": 2,
    }
    with translation.override("en"):
        said = localized(result)
    assert said == restored(as_json(result))  # each message compares equal to its English
    assert not isinstance(said["weights"]["source"], Message)
    assert not isinstance(said["host"]["message"], Message)
    assert not isinstance(said["approximation"], Message)
    assert said["instances"] == 2


def test_adopted_problems_are_stored_with_their_templates() -> None:
    problem_text = say("instance_group count %(count)s must be at least 1.", count=0)
    stored = _finding(SimpleNamespace(level="warning", code="lint", message=problem_text))
    assert stored["message"] == problem_text.to_json()
    assert stored["advice"] == ""
    plain = _finding(SimpleNamespace(level="error", code="empty_version", message="No files."))
    assert plain == {
        "level": "error",
        "code": "empty_version",
        "message": "No files.",
        "advice": "",
    }


def test_the_preview_answer_is_localized() -> None:
    found = error("x", say("Input %(name)s is odd.", name="a"), say("Fix it."))
    preview = {
        "findings": [found.to_dict()],
        "problems": [say("Problem %(n)s.", n=1), "plain"],
        "ok": False,
    }
    with translation.override("en"):
        said = localized_preview(preview)
    assert said["findings"] == [
        {"level": "error", "code": "x", "message": "Input a is odd.", "advice": "Fix it."}
    ]
    assert said["problems"] == ["Problem 1.", "plain"]
    assert said["ok"] is False
    assert preview["findings"][0]["message"]["template"] == "Input %(name)s is odd."


@pytest.mark.django_db
def test_version_api_findings_follow_the_language(operator) -> None:
    model = Model.objects.create(name="mlp", target="onnxruntime", created_by=operator)
    found = error("x", say("Input %(name)s is odd.", name="a"), say("Fix it."))
    old = {"level": "warning", "code": "old", "message": "Stored English.", "advice": ""}
    version = Version.objects.create(
        model=model,
        number=1,
        source_filename="model.onnx",
        source_sha256="0" * 64,
        source_size=1,
        findings=[found.to_dict(), old],
    )
    with translation.override("en"):
        data = Version.objects.get(pk=version.pk).to_dict(detail=True)
    assert data["findings"] == [
        {"level": "error", "code": "x", "message": "Input a is odd.", "advice": "Fix it."},
        old,
    ]
    assert version.findings[0]["message"]["template"] == "Input %(name)s is odd."

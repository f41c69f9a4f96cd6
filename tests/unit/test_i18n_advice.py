"""Issue 22: the Metrics tab's advice, ATC's error explanations, the memory estimate's verdicts
and the CANN version check are say() messages (English unchanged, template kept), and where they
are shown they go through webapp.text.localize.

The zh-Hans catalogue is merged later, so the rendering path is shown with a stand-in
translation (``webapp.text.gettext`` patched) and with ``translation.override("en")``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils import translation

from model_store.cann_versions import skew
from model_store.compile.atc import EXPLANATIONS, AtcResult, explain, parse_atc_line
from model_store.compile.atc.python import assess_probe
from model_store.memory_fit import (
    ActivationEstimate,
    activations_from_signature,
    estimate_memory,
    fits,
)
from model_store.runtime.advice import ServingConfig, advise
from model_store.runtime.series import Point
from model_store.targets.atc_build import _failure_message
from model_store.text import Message, from_json
from webapp.registry.catalogue.models import Model

MARK = "[zh] "


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """A translation that marks every sentence said through webapp.text.localize."""
    monkeypatch.setattr("webapp.text.gettext", lambda message: MARK + message)


def _point(**values: Any) -> Point:
    fields = {"model": "m", "version": "1", "start": 0.0, "seconds": 300.0} | values
    return Point(**fields)


# --------------------------------------------------------------------------- advice


def test_advice_is_said_with_templates_and_the_english_is_unchanged() -> None:
    total = _point(success=90, failures=10, seconds=100.0)
    (failed, few) = advise(
        target="onnxruntime", total=total, recent=None, config=None, range_label="the last hour"
    )
    assert isinstance(failed.message, Message) and failed.code == "failures"
    assert failed.message == (
        "10 requests failed in the last hour (10.0% of 100, 0.10/s). Triton's log and the "
        "Server page say why; Try it shows the error of a single request."
    )
    assert failed.message.template.startswith("%(failed)s requests failed in %(range)s")
    assert failed.message.params["failed"] == "10"
    assert isinstance(few.message, Message) and few.message.params == {"seen": 0, "needed": 20}
    assert failed.to_dict()["message"] == failed.message.to_json()


def test_capacity_advice_nests_its_parts_and_reads_as_before() -> None:
    busy = _point(success=100, inferences=100, executions=100, queue_us=3_000_000,
                  compute_infer_us=500_000, pending=7.0)  # fmt: skip
    config = ServingConfig(max_batch_size=8, instance_count=1)
    (advice,) = advise(
        target="onnxruntime", total=busy, recent=busy, config=config, range_label="x"
    )
    assert advice.code == "near_capacity"
    assert advice.message == (
        "Requests wait 30.0 ms in the queue against 5.00 ms of compute over the last 5 minutes; "
        "up to 7 requests were waiting: the model is near capacity. Add instances "
        "(instance_group count, now 1), or enable dynamic batching so one execution serves "
        "several requests."
    )
    assert isinstance(advice.message, Message)
    assert isinstance(advice.message.params["remedy"], Message)
    assert isinstance(advice.message.params["pending"], Message)
    assert advice.message.params["delay_note"] == ""
    # Through JSON and back, the same English.
    assert from_json(json.loads(json.dumps(advice.message.to_json()))) == advice.message


def test_range_labels_are_said_too() -> None:
    from webapp.ops.metrics_read import RANGES

    label = RANGES["24h"][2]
    assert isinstance(label, Message) and label == "the last 24 hours"


@pytest.mark.django_db
def test_the_metrics_tab_renders_the_advice_through_localize(
    operator_client, stand_in: None
) -> None:
    Model.objects.create(name="quiet", serving_version=1)
    page = operator_client.get("/models/quiet/metrics/").content.decode()
    assert MARK + "No requests in " + MARK + "the last hour." in page


@pytest.mark.django_db
def test_the_metrics_tab_in_english_is_unchanged(operator_client) -> None:
    Model.objects.create(name="quiet", serving_version=1)
    with translation.override("en"):
        page = operator_client.get("/models/quiet/metrics/").content.decode()
    assert "No requests in the last hour." in page


@pytest.mark.django_db
def test_the_api_says_the_advice_in_the_requests_language_and_keeps_the_codes(
    api, stand_in: None
) -> None:
    Model.objects.create(name="quiet", serving_version=1)
    body = api("get", "/api/v1/models/quiet/metrics", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    (advice,) = body["advice"]
    assert advice == {
        "level": "info",
        "code": "no_traffic",
        "message": MARK + "No requests in " + MARK + "the last hour.",
    }


@pytest.mark.django_db
def test_the_api_in_english_is_unchanged(api) -> None:
    Model.objects.create(name="quiet", serving_version=1)
    body = api("get", "/api/v1/models/quiet/metrics").json()
    assert body["advice"] == [
        {"level": "info", "code": "no_traffic", "message": "No requests in the last hour."}
    ]


# --------------------------------------------------------------------------- ATC


def test_atc_explanations_are_texts_and_unknown_codes_carry_the_code() -> None:
    assert all(isinstance(text, Message) for text in EXPLANATIONS.values())
    unsupported = explain("EZ3003")
    assert unsupported.template.endswith("cannot compile it. %(advice)s")
    assert isinstance(unsupported.params["advice"], Message)
    assert "npu_ge" in unsupported and "%(" not in unsupported
    unknown = explain("E12345")
    assert unknown.params == {"code": "E12345"} and str(unknown).startswith(
        "ATC reported error E12345."
    )
    message = parse_atc_line("E10001: Value [x] for parameter [soc_version] is invalid.")
    assert message is not None
    data = message.as_dict()
    assert data["explanation"] == EXPLANATIONS["E10001"].to_json()


def _failed(lines: list[str], returncode: int = 1) -> AtcResult:
    messages = [m for m in map(parse_atc_line, lines) if m is not None]
    return AtcResult(returncode=returncode, success=False, om_path=None, messages=messages,
                     duration_s=1.0, cancelled=False, timed_out=False)  # fmt: skip


def test_a_failed_atc_run_keeps_every_explanation_for_the_job_error() -> None:
    result = _failed(["E10001: bad soc", "EZ3003: no kernel for Foo"])
    said = _failure_message(result)
    assert said == (
        f"ATC failed (exit status 1). E10001: bad soc -> {EXPLANATIONS['E10001']!s} "
        f"EZ3003: no kernel for Foo -> {EXPLANATIONS['EZ3003']!s}"
    )
    stored = json.loads(json.dumps(said.to_json()))
    assert from_json(stored) == said
    assert result.summary() == f"ATC failed with E10001: bad soc — {EXPLANATIONS['E10001']!s}"
    assert isinstance(result.summary().params["explanation"], Message)
    no_code = _failure_message(_failed([], returncode=2))
    assert no_code == (
        "ATC failed (exit status 2). ATC failed with exit status 2 and no error code; see the log."
    )


def test_atc_python_verdicts_are_texts_with_the_same_english() -> None:
    report = {"version": [3, 6, 9], "executable": "/usr/bin/python3", "packages": {},
              "libpython": {"name": "libpython3.6m.so.1.0", "loaded": None}}  # fmt: skip
    verdict = assess_probe(report, "8.0.0", "PATH")
    assert isinstance(verdict.summary, Message) and isinstance(verdict.advice, Message)
    assert str(verdict.summary).startswith(
        "ATC's Python is /usr/bin/python3 (PATH), Python 3.6.9: Python 3.6.9 is older than 3.7, "
        "which ATC refuses (E40002); numpy, protobuf,"
    )
    assert all(isinstance(problem, Message) for problem in verdict.problems)
    assert from_json(json.loads(json.dumps(verdict.summary.to_json()))) == verdict.summary


# --------------------------------------------------------------------------- memory, CANN


def test_memory_verdicts_and_notes_are_texts() -> None:
    estimate = estimate_memory(100 << 20, instances=2, max_batch=8,
                               activation_bytes_per_sample=4 << 20)  # fmt: skip
    verdict = fits(estimate, 200 << 20, device="NPU 0")
    assert isinstance(verdict.message, Message)
    assert verdict.message == (
        "Does not fit NPU 0: needs about 264.0 MiB, 200.0 MiB free. Lower the instance count or "
        "the batch size, or free the device."
    )
    assert verdict.to_dict()["message"]["template"] == verdict.message.template
    assert estimate.describe() == (
        "weights 100.0 MiB x 2 + activations at batch 8 32.0 MiB x 2 = 264.0 MiB"
    )
    note = activations_from_signature(
        {"inputs": [{"name": "x", "numpy": "float32", "dims": [-1, 4]}], "outputs": []}
    )
    assert isinstance(note.note, Message) and note.note.params["bytes"] == 16
    stored = json.loads(json.dumps(note.to_dict()))
    assert stored["note"] == note.note.to_json()
    again = ActivationEstimate.from_dict(stored)
    assert again == note and again is not None and isinstance(again.note, Message)
    # A note stored before translation existed reads as stored.
    old = ActivationEstimate.from_dict({"bytes_per_sample": 1, "method": "io_factor", "note": "x"})
    assert old is not None and old.note == "x" and not isinstance(old.note, Message)


def test_cann_skew_messages_are_texts_with_the_same_english() -> None:
    too_new = skew("8.0.0", "8.0.RC3")
    assert isinstance(too_new.message, Message)
    assert too_new.message == (
        "built with CANN 8.0.0, the serving host runs 8.0.RC3; an OM must not run on an older "
        "CANN: rebuild on a host with CANN <= 8.0.RC3 or upgrade the serving host"
    )
    unknown = skew(None, None)
    assert unknown.message == (
        "Cannot compare CANN versions: the building CANN (not recorded) and the serving host's "
        "CANN (not reported) unknown. Make sure the serving host runs a CANN at least as new as "
        "the one that built this OM."
    )
    assert isinstance(unknown.message.params["which"], Message)


@pytest.mark.django_db
def test_the_version_page_renders_the_cann_check_through_localize(
    operator, client, settings, tmp_path, stand_in: None
) -> None:
    from webapp.registry.catalogue.models import Version

    settings.MODEL_STORE_ROOT = tmp_path / "store"
    model = Model.objects.create(name="om", target="acl", created_by=operator)
    Version.objects.create(
        model=model, number=1, status="ready", source_filename="m.onnx", source_sha256="1" * 64,
        source_size=10, verification={"status": "passed"}, artifact_name="model.om",
        cann_version="8.0.RC3",
    )  # fmt: skip
    client.force_login(operator)
    page = client.get("/models/om/versions/1/").content.decode()
    assert MARK + "Cannot compare CANN versions: " in page
    with translation.override("en"):
        from webapp.registry.serving.cann_check import cann_skew

        found = cann_skew(Version.objects.get(model=model, number=1))
        assert found is not None and isinstance(found.message, Message)

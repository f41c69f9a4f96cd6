"""Issue 22: the diagnostics checks say their title, what they found and what to do as templates
(model_store.text.say), keep the English as it was, keep the templates beside it in a host
report's JSON, and the page and the API say them in the reader's language.

The zh-Hans catalogue is merged later, so the language is played by a stand-in ``gettext``
(:func:`_speak`): what it changes shows that the page and the API translate the template.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.utils import translation

from model_store.diagnostics.checklist import summary_line
from model_store.diagnostics.context import Check, DiagnosticsContext
from model_store.diagnostics.host_checks import reported_checks
from model_store.diagnostics.triton_checks import check_triton_reachable
from model_store.host_report import build_host_report
from model_store.text import Message, from_json
from tests.fixtures.users import token_for
from webapp.nodes import host_reports

NOT_REACHABLE = "Triton at %(url)s is not reachable (no answer on /v2/health/live)."
NO_CANN = (
    "No CANN toolkit on this host; Ascend targets cannot compile or serve here. "
    "CPU (onnxruntime) models are unaffected."
)
NO_NPUS = {"available": False, "npus": [], "reason": "npu-smi not found on PATH"}


def _unreachable() -> Check:
    ctx = DiagnosticsContext(
        env={}, triton_url="127.0.0.1:9", is_live=lambda: False, is_ready=lambda: False
    )
    return check_triton_reachable(ctx)


def test_a_checks_found_keeps_its_template_through_to_dict_and_json() -> None:
    check = _unreachable()
    assert isinstance(check.found, Message) and check.found.template == NOT_REACHABLE
    assert (
        check.found
        == "Triton at http://127.0.0.1:9 is not reachable (no answer on /v2/health/live)."
    )
    assert check.title == "Triton reachable" and isinstance(check.title, Message)

    sent = json.loads(json.dumps(check.to_dict()))  # as a node's report crosses the network
    assert sent["found"] == {"template": NOT_REACHABLE, "params": {"url": "http://127.0.0.1:9"}}
    assert sent["title"]["template"] == "Triton reachable"
    said = from_json(sent["advice"])
    assert isinstance(said, Message) and said == check.advice


def test_a_reported_check_gets_its_templates_back_and_plain_english_stays_plain() -> None:
    sent = json.loads(json.dumps(_unreachable().to_dict()))
    [check] = reported_checks({"diagnostics": [sent]})
    assert isinstance(check.found, Message) and check.found.template == NOT_REACHABLE
    assert check.to_dict()["found"]["template"] == NOT_REACHABLE

    plain = {**sent, "found": "Plain words of a node."}
    [check] = reported_checks({"diagnostics": [plain]})
    assert check.found == "Plain words of a node." and not isinstance(check.found, Message)

    broken = {**sent, "found": {"template": "%(x)s", "params": [1]}}  # not what to_json writes
    [check] = reported_checks({"diagnostics": [broken]})
    assert check.found == "%(x)s" and not isinstance(check.found, Message)
    wide = {**sent, "found": {"template": "%(x)999999999s", "params": {"x": 1}}}
    [check] = reported_checks({"diagnostics": [wide]})
    assert check.found == "%(x)999999999s"


def test_the_summary_line_is_one_sentence_with_its_counts() -> None:
    checks = [Check("a", "A", "ok", "fine"), Check("b", "B", "failing", "bad")]
    line = summary_line(checks)
    assert line == "2 checks: 1 ok, 1 failing"
    assert isinstance(line, Message) and line.template == "%(count)s check: %(counts)s"
    assert line.plural == "%(count)s checks: %(counts)s" and line.count == 2
    assert summary_line([]) == "0 checks"
    assert summary_line([{"state": "warning"}]) == "1 check: 1 warning"


# --------------------------------------------------------------------------- page and API

ZH = {
    "Triton reachable": "Triton 可达性",
    "NPU device nodes": "NPU 设备节点",
    NOT_REACHABLE: "无法连接 %(url)s 上的 Triton。",
    NO_CANN: "此主机上没有 CANN 工具包。",
    "%(count)s not applicable": "%(count)s 项不适用",
    "%(first)s, %(then)s": "%(first)s / %(then)s",
}


def _speak(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in catalogue for the templates above (webapp.text translates through it)."""
    monkeypatch.setattr("webapp.text.gettext", lambda s: ZH.get(s, s))
    monkeypatch.setattr(
        "webapp.text.ngettext",
        lambda s, p, n: {"%(count)s check: %(counts)s": "%(count)s 项检查 -%(counts)s"}.get(
            s, s if n == 1 else p
        ),
    )


@pytest.fixture
def no_triton(settings) -> None:
    settings.TRITON_URL = "127.0.0.1:9"  # discard port: nothing listens


def _api(viewer, **headers: Any) -> dict:
    response = Client().get(
        "/api/v1/diagnostics", HTTP_AUTHORIZATION=f"Token {token_for(viewer)}", **headers
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_the_page_and_the_api_say_the_checks_from_their_templates(
    viewer, viewer_client: Client, no_triton, monkeypatch: pytest.MonkeyPatch
) -> None:
    host_reports.record(build_host_report({"PATH": "/nonexistent"}, devices=lambda: NO_NPUS))
    _speak(monkeypatch)

    page = viewer_client.get("/diagnostics/").content.decode()
    assert "无法连接 http://127.0.0.1:9 上的 Triton。" in page  # a hub check, live
    assert "此主机上没有 CANN 工具包。" in page  # a host check, from the stored report
    assert "<strong>Triton 可达性</strong>" in page and "NPU 设备节点" in page
    assert "项检查 -" in page  # the summary lines

    body = _api(viewer, HTTP_ACCEPT_LANGUAGE="zh-hans")
    checks = {c["id"]: c for c in body["checks"]}
    assert checks["triton_reachable"]["found"] == "无法连接 http://127.0.0.1:9 上的 Triton。"
    assert checks["triton_reachable"]["title"] == "Triton 可达性"
    assert checks["triton_reachable"]["state"] == "failing"  # codes never change
    assert checks["cann_env"]["found"] == "此主机上没有 CANN 工具包。"
    assert all(isinstance(c["found"], str) for c in body["checks"])
    assert "项检查 -" in body["summary_line"]


def test_in_english_the_page_and_the_api_read_as_before(
    viewer, viewer_client: Client, no_triton
) -> None:
    host_reports.record(build_host_report({"PATH": "/nonexistent"}, devices=lambda: NO_NPUS))
    english = "Triton at http://127.0.0.1:9 is not reachable (no answer on /v2/health/live)."
    with translation.override("en"):
        page = viewer_client.get("/diagnostics/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
        body = _api(viewer, HTTP_ACCEPT_LANGUAGE="en")
    assert english in page and NO_CANN in page and "<strong>CANN environment</strong>" in page
    checks = {c["id"]: c for c in body["checks"]}
    assert checks["triton_reachable"]["found"] == english
    assert checks["cann_env"]["found"] == NO_CANN
    assert set(checks["cann_env"]) == {
        "id",
        "title",
        "state",
        "found",
        "advice",
        "details",
        "ran_on",
    }
    assert body["summary_line"].startswith("12 checks: ")


def test_a_stored_report_of_plain_words_shows_as_stored(
    viewer, viewer_client: Client, no_triton, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = build_host_report({"PATH": "/nonexistent"}, devices=lambda: NO_NPUS)
    report["diagnostics"] = [
        {"id": "davinci_devices", "title": "NPU device nodes", "state": "not_applicable",
         "found": "Stored words of an older worker.", "advice": "", "details": []},
    ]  # fmt: skip
    host_reports.record(json.loads(json.dumps(report)))
    _speak(monkeypatch)

    page = viewer_client.get("/diagnostics/").content.decode()
    assert "Stored words of an older worker." in page
    body = _api(viewer, HTTP_ACCEPT_LANGUAGE="zh-hans")
    [stored] = [c for c in body["checks"] if c["id"] == "davinci_devices"]
    assert stored["found"] == "Stored words of an older worker."
    assert stored["title"] == "NPU 设备节点"  # titles are the hub's own, so they are said

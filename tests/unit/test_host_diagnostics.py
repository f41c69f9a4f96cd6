"""The checklist split by where it must run: host checks in the worker's report, hub checks here.

The host report is made here as a worker on the host makes it (``build_host_report`` with this
process's environment, or ``worker_probes_host``); the page and the API are then asked with a
``PATH`` on which ``npu-smi`` and ``atc`` would leave a trace if the web process ran them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from django.test import Client

from model_store.diagnostics.checklist import CHECKS, HOST_CHECKS, HUB_CHECKS
from model_store.diagnostics.host_checks import reported_checks
from model_store.host_report import build_host_report
from model_store.text import from_json
from tests.fakes.toolkit import FAKE_CANN_VERSION, make_fake_toolkit
from tests.fixtures.hosts import npu_tools_that_leave_a_trace, worker_probes_host
from tests.fixtures.users import token_for
from webapp.nodes import host_reports

HOST_IDS = ["cann_env", "atc", "atc_python", "npu_ge_backend", "davinci_devices", "npu_smi"]
HUB_IDS = [
    "triton_reachable",
    "triton_access",
    "stuck_loading",
    "load_failures",
    "oidc_discovery",
    "ldap_bind",
]
NO_NPUS = {"available": False, "npus": [], "reason": "npu-smi not found on PATH"}


def test_every_check_is_either_host_bound_or_hub_side_in_checklist_order() -> None:
    assert [cid for cid, _ in HOST_CHECKS] == HOST_IDS
    assert [cid for cid, _ in HUB_CHECKS] == HUB_IDS
    assert [cid for cid, _ in CHECKS] == HOST_IDS + HUB_IDS


def test_the_report_carries_cann_and_the_host_checks_as_plain_json(tmp_path: Path) -> None:
    env = {**make_fake_toolkit(tmp_path / "Ascend", layout="cann", version="8.5.0"), "HOME": "/x"}
    report = build_host_report(env, devices=lambda: NO_NPUS, now=lambda: 5.0)

    assert json.loads(json.dumps(report)) == report  # what a node worker could send as it is
    cann = report["cann"]
    assert cann["available"] is True and cann["version"] == "8.5.0"
    assert cann["ops_version"] == "8.5.0" and cann["layout"] == "cann"
    assert cann["toolkit_home"] == str(tmp_path / "Ascend" / "cann")
    assert cann["atc_path"].endswith("/cann/bin/atc") and "ATC found" in from_json(cann["reason"])
    assert [c["id"] for c in report["diagnostics"]] == HOST_IDS
    for check in report["diagnostics"]:
        assert set(check) == {"id", "title", "state", "found", "advice", "details"}
        assert check["found"]["template"]  # a message, said in the reader's language
    checks = {c["id"]: c for c in report["diagnostics"]}
    assert checks["atc"]["state"] == "ok", checks["atc"]
    assert checks["npu_smi"]["state"] == "not_applicable"


def test_the_default_install_is_found_under_ascend_root(tmp_path: Path) -> None:
    root = tmp_path / "opt-ascend"
    make_fake_toolkit(root, layout="ascend-toolkit")
    env = {"ASCEND_ROOT": str(root), "PATH": "/usr/bin:/bin"}  # no variable points at it
    cann = build_host_report(env, devices=lambda: NO_NPUS)["cann"]
    assert cann["available"] is True and cann["version"] == FAKE_CANN_VERSION
    assert cann["layout"] == "ascend-toolkit" and cann["ascend_root"] == str(root)
    assert build_host_report(env, devices=lambda: NO_NPUS)["targets"]["acl"]["available"]


def test_without_cann_the_report_says_why() -> None:
    report = build_host_report({"PATH": "/nonexistent"}, devices=lambda: NO_NPUS)
    assert report["cann"]["available"] is False and report["cann"]["version"] is None
    assert "not installed" in from_json(report["cann"]["reason"])
    assert {c["state"] for c in report["diagnostics"]} == {"not_applicable"}


def test_reported_checks_refuse_what_they_cannot_read() -> None:
    assert reported_checks({"host": "h"}) is None  # a worker from before the diagnostics key
    checks = reported_checks(
        {
            "diagnostics": [
                {"id": "npu_smi", "state": "ok", "found": "2 chips", "advice": "", "details": []},
                {"id": "atc", "state": "on fire", "found": "?"},
                "not a check",
            ]
        }
    )
    assert checks is not None
    assert [(c.id, c.state) for c in checks] == [
        ("npu_smi", "ok"),
        ("atc", "failing"),
        ("malformed", "failing"),
    ]
    assert checks[0].title == "NPUs (npu-smi)"
    assert "cannot read" in checks[1].found and "on fire" in checks[1].found


# --- the web side ------------------------------------------------------------------------------


@pytest.fixture
def web_path_traps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``npu-smi`` and ``atc`` on the web's PATH that record being run; returns the trace file."""
    return npu_tools_that_leave_a_trace(tmp_path, monkeypatch)


@pytest.fixture
def no_triton(settings) -> None:
    settings.TRITON_URL = "127.0.0.1:9"  # discard port: nothing listens


def _api(viewer) -> dict:
    response = Client().get("/api/v1/diagnostics", HTTP_AUTHORIZATION=f"Token {token_for(viewer)}")
    assert response.status_code == 200, response.content
    return response.json()


def test_before_any_report_the_page_says_to_start_a_worker_and_probes_nothing(
    viewer, viewer_client: Client, no_triton, web_path_traps: Path
) -> None:
    body = _api(viewer)
    assert [c["id"] for c in body["checks"]] == HUB_IDS
    assert {c["ran_on"] for c in body["checks"]} == {"hub"}
    assert body["host_report"] is None
    assert body["host_checks_reason"].startswith("no worker has reported from the host yet")
    assert "start a worker" in body["summary_line"]

    page = viewer_client.get("/diagnostics/").content.decode()
    assert 'id="host-checks-missing"' in page
    assert "no worker has reported from the host yet: start a worker" in page
    assert 'id="check-cann_env"' not in page and 'id="check-triton_reachable"' in page
    assert not web_path_traps.exists(), web_path_traps.read_text()


def test_host_checks_come_from_the_stored_report_with_its_age(
    viewer, viewer_client: Client, no_triton, web_path_traps: Path, tmp_path: Path
) -> None:
    env = make_fake_toolkit(tmp_path / "Ascend", layout="cann", version="8.5.0")
    host_reports.record(build_host_report(env, devices=lambda: NO_NPUS), node="local")

    body = _api(viewer)
    assert [c["id"] for c in body["checks"]] == HOST_IDS + HUB_IDS
    ran_on = {c["id"]: c["ran_on"] for c in body["checks"]}
    assert {ran_on[cid] for cid in HOST_IDS} == {"host"}
    assert {ran_on[cid] for cid in HUB_IDS} == {"hub"}
    assert body["host_report"]["host"] and body["host_report"]["age_s"] < 60
    assert body["host_report"]["stale"] is False and body["host_checks_reason"] == ""
    assert sum(body["summary"].values()) == len(HOST_IDS) + len(HUB_IDS)
    atc = next(c for c in body["checks"] if c["id"] == "atc")
    assert atc["state"] == "ok" and str(tmp_path) in atc["found"]

    page = viewer_client.get("/diagnostics/").content.decode()
    host_section = page.split('id="host-checks"', 1)[1].split('id="hub-checks"', 1)[0]
    assert "Reported by a worker on <code>" in host_section and "s ago" in host_section
    assert 'id="check-atc" data-state="ok" data-ran-on="host"' in host_section
    assert 'id="check-triton_reachable"' in page.split('id="hub-checks"', 1)[1]
    assert not web_path_traps.exists(), web_path_traps.read_text()


def test_an_old_report_is_shown_as_old(
    viewer_client: Client, no_triton, settings, web_path_traps: Path
) -> None:
    settings.HOST_PROBE_SECONDS = 10
    report = build_host_report({"PATH": "/nonexistent"}, devices=lambda: NO_NPUS)
    report["made_at"] = time.time() - 3600
    host_reports.record(report)
    page = viewer_client.get("/diagnostics/").content.decode()
    assert "that is old; is the worker running?" in page
    assert 'id="check-npu_smi"' in page


def test_a_report_from_an_older_worker_says_to_restart_it(viewer, no_triton) -> None:
    host_reports.record({"made_at": time.time(), "host": "npu-host", "devices": NO_NPUS})
    body = _api(viewer)
    assert [c["id"] for c in body["checks"]] == HUB_IDS
    assert body["host_report"]["host"] == "npu-host"
    assert "restart the workers" in body["host_checks_reason"]


def test_server_page_shows_the_reported_cann(
    viewer_client: Client, no_triton, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_fake_toolkit(tmp_path / "Ascend", layout="cann", version="8.5.0")
    for key, value in env.items():
        monkeypatch.setenv(key, value)  # the fake npu-smi is on PATH too, as on an NPU host
    worker_probes_host()
    page = viewer_client.get("/server/").content.decode()
    cann = page.split('id="host-cann"', 1)[1].split("</dl>", 1)[0]
    assert "8.5.0" in cann and "<code>cann</code> layout (8.5+)" in cann
    assert str(tmp_path / "Ascend" / "cann") in cann
    assert "310P" in page  # the NPUs of the same report


def test_server_page_says_when_the_host_has_no_cann(viewer_client: Client, no_triton) -> None:
    host_reports.record(build_host_report({"PATH": "/nonexistent"}, devices=lambda: NO_NPUS))
    cann = viewer_client.get("/server/").content.decode().split('id="host-cann"', 1)[1]
    assert "not found on the host" in cann.split("</dl>", 1)[0]


def test_schema_documents_where_each_check_runs(viewer_client: Client) -> None:
    from tests.fixtures.openapi import inline

    schema = viewer_client.get("/api/v1/schema").json()
    operation = schema["paths"]["/api/v1/diagnostics"]["get"]
    documented = inline(
        schema, operation["responses"]["200"]["content"]["application/json"]["schema"]
    )
    check = documented["properties"]["checks"]["items"]["properties"]
    for cid in HOST_IDS + HUB_IDS:
        assert cid in check["id"]["description"]
    assert "ran_on" in check
    assert {"host_report", "host_checks_reason", "ran_at", "host"} <= set(documented["properties"])

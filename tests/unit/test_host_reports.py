"""Pages show what a worker on the host reported, with its age; the web never probes itself."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from model_store.host_report import PROTOCOL, build_host_report
from model_store.text import from_json
from webapp.nodes import host_reports
from webapp.nodes.models import HostReport
from workers.tasks.server import probe_host

SAMPLES = Path(__file__).parent / "npu_smi"


def test_a_report_says_what_this_host_has_without_django(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no npu-smi, no atc
    report = build_host_report(dict(os.environ), now=lambda: 1000.0)

    assert report["protocol"] == PROTOCOL and report["made_at"] == 1000.0
    assert report["devices"]["available"] is False
    assert report["targets"]["onnxruntime"]["available"] is True
    assert report["targets"]["acl"]["available"] is False
    assert "needs CANN" in from_json(report["targets"]["acl"]["reason"])


@pytest.mark.django_db
def test_before_any_worker_reported_the_pages_say_so(settings) -> None:
    settings.HOST_PROBE_SECONDS = 30
    devices = host_reports.devices()
    assert devices["available"] is False and devices["npus"] == []
    assert "no worker has reported this host yet" in devices["reason"]
    assert "every 30 s" in devices["reason"]
    # The CPU target needs nothing a report could tell; an Ascend one waits for the report.
    assert host_reports.target_status("onnxruntime")["available"] is True
    acl = host_reports.target_status("acl")
    assert acl["available"] is False and "no worker has reported" in acl["reason"]


@pytest.mark.django_db
def test_the_worker_task_records_the_npus_it_sees(monkeypatch, tmp_path: Path) -> None:
    table = SAMPLES / "310p3.txt"
    script = tmp_path / "npu-smi"
    script.write_text(f'#!/bin/sh\n[ "$2" = "-t" ] && exit 1\ncat \'{table}\'\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")

    probe_host()  # what beat and a starting worker ask for

    devices = host_reports.devices()
    assert devices["available"] is True
    assert devices["npus"][0]["name"].startswith("310P")
    assert devices["age_s"] is not None and devices["age_s"] < 30 and not devices["stale"]
    assert HostReport.objects.get(node="local").data["host"] == devices["host"]


@pytest.mark.django_db
def test_an_old_report_is_marked_stale(settings) -> None:
    settings.HOST_PROBE_SECONDS = 10
    report = build_host_report({}, devices=lambda: {"available": False, "npus": [], "reason": "x"})
    report["made_at"] = time.time() - 3600
    host_reports.record(report)

    devices = host_reports.devices()
    assert devices["stale"] is True and devices["age_s"] >= 3600 - 1

"""The devices panel and API against a fake `npu-smi` on PATH (no Ascend NPU on these machines)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from django.test import Client

from tests.fixtures.hosts import worker_probes_host
from tests.fixtures.users import token_for

SAMPLES = Path(__file__).parent / "npu_smi"


@pytest.fixture
def fake_npu_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    table = next(p for p in sorted(SAMPLES.iterdir()) if "310" in p.name)
    script = tmp_path / "npu-smi"
    script.write_text(f"#!/bin/sh\ncat '{table}'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    worker_probes_host()
    return script


def test_devices_api_reports_the_npus_npu_smi_shows(viewer, fake_npu_smi, settings) -> None:
    settings.TRITON_URL = "127.0.0.1:9"
    body = Client().get("/api/v1/devices", HTTP_AUTHORIZATION=f"Token {token_for(viewer)}").json()
    assert body["available"] is True
    assert body["npus"] and body["npus"][0]["name"].startswith("310P")
    assert body["npus"][0]["health"] == "OK"


def test_server_page_shows_the_npu_table(viewer_client: Client, fake_npu_smi, settings) -> None:
    settings.TRITON_URL = "127.0.0.1:9"
    page = viewer_client.get("/server/").content.decode()
    assert "310P" in page and "npu-smi info" in page


def test_without_npu_smi_the_page_says_there_is_no_npu(
    viewer_client: Client, settings, monkeypatch
) -> None:
    settings.TRITON_URL = "127.0.0.1:9"
    monkeypatch.setenv("PATH", "/nonexistent")
    worker_probes_host()
    assert "no Ascend NPU on this host" in viewer_client.get("/server/").content.decode()


@pytest.mark.django_db
def test_the_serving_tritons_device_count_is_given_when_it_differs(viewer) -> None:
    """Eight chips on the host, one NPU mapped into Triton's container (pyACL counts 1)."""
    import time

    from webapp.nodes import host_reports

    npus = [{"npu_id": i, "chip_id": 0, "device_id": i, "name": "910B4-1"} for i in range(8)]
    report = {"made_at": time.time(), "host": "atlas", "devices": {"available": True, "npus": npus}}
    host_reports.record(report | {"serving": {"available": True, "pyacl": {"device_count": 1}}})
    token = token_for(viewer)

    def ask() -> dict:  # type: ignore[type-arg]
        return Client().get("/api/v1/devices", HTTP_AUTHORIZATION=f"Token {token}").json()

    assert len(ask()["npus"]) == 8 and ask()["pyacl_device_count"] == 1
    host_reports.record(report | {"serving": {"available": True, "pyacl": {"device_count": 8}}})
    assert "pyacl_device_count" not in ask()

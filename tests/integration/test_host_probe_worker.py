"""A real worker on the "NPU host" reports it; the web, which has no NPU, shows that report.

The worker gets a fake CANN 8.5 install and the fake ``npu-smi`` on its PATH
(tests/fakes/toolkit.py); the test process, which plays the web, gets neither: its PATH holds
an ``npu-smi`` and an ``atc`` that only leave a trace when run. The pages must list the NPUs,
CANN and the host checks from the worker's report, and the trace must stay empty.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from tests.fakes.toolkit import make_fake_toolkit
from tests.fixtures.hosts import npu_tools_that_leave_a_trace
from tests.fixtures.users import token_for
from tests.fixtures.waiting import wait_until
from webapp.nodes.models import HostReport

pytestmark = pytest.mark.integration

HOST_IDS = ["cann_env", "atc", "atc_python", "npu_ge_backend", "davinci_devices", "npu_smi"]


@pytest.fixture
def worker_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The NPU host: a CANN 8.5 install under its root and the driver's npu-smi on PATH."""
    return make_fake_toolkit(tmp_path_factory.mktemp("host") / "Ascend", layout="cann")


@pytest.fixture
def web_without_npu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings) -> Path:
    """The web process: no Triton, and an npu-smi/atc on PATH that record being run."""
    settings.TRITON_URL = "127.0.0.1:9"
    trace = npu_tools_that_leave_a_trace(tmp_path, monkeypatch)
    for name in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ATC_PATH", "ATC_PYTHON"):
        monkeypatch.delenv(name, raising=False)
    return trace


def test_the_web_shows_what_the_worker_on_the_npu_host_reported(
    celery_worker, viewer, web_without_npu: Path
) -> None:
    # A starting worker probes its host at once (workers/celery.py, worker_ready).
    wait_until(
        lambda: HostReport.objects.filter(node="local").exists(),
        timeout=90,
        message=f"the worker's first host report; worker log:\n{celery_worker.log_text()[-3000:]}",
    )
    client = Client()
    client.force_login(viewer)

    server = client.get("/server/").content.decode()
    assert "310P" in server, "the NPUs of the worker's npu-smi"
    cann = server.split('id="host-cann"', 1)[1].split("</dl>", 1)[0]
    assert "<code>cann</code> layout (8.5+)" in cann
    assert "Reported by a worker on <code>" in server

    body = client.get("/api/v1/diagnostics", HTTP_AUTHORIZATION=f"Token {token_for(viewer)}").json()
    host_checks = [c for c in body["checks"] if c["ran_on"] == "host"]
    assert [c["id"] for c in host_checks] == HOST_IDS
    by_id = {c["id"]: c for c in host_checks}
    assert by_id["npu_smi"]["state"] == "ok", by_id["npu_smi"]
    assert by_id["atc"]["state"] == "ok", by_id["atc"]
    assert "/cann/bin/atc" in by_id["atc"]["found"]
    assert body["host_report"]["host"] and body["host_checks_reason"] == ""

    page = client.get("/diagnostics/").content.decode()
    assert 'id="check-npu_smi" data-state="ok" data-ran-on="host"' in page
    assert "Reported by a worker on <code>" in page

    assert not web_without_npu.exists(), f"the web ran {web_without_npu.read_text()}"

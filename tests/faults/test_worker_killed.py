"""The Celery worker SIGKILLed in the middle of a compile (the OOM killer, a crash).

The fake ATC "compiles" for ``conftest.ATC_SECONDS``; the worker's main process is killed while
it runs. The launcher restarts the worker; the new worker's reconcile finds the job's step
"running" in a process that is gone and fails the job with that reason. ATC does not outlive
its worker, the job's scratch files are removed and no half-built version is left; the same
file uploaded again builds.
"""

from __future__ import annotations

import time

import psutil
import pytest

from tests.faults.conftest import ACL_OPTIONS, Hub, moment_when, report
from tests.fixtures.triton import mlp_onnx_bytes

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def _atc_processes() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "tests/fakes/atc" in cmdline and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


def test_worker_killed_mid_compile(healthy_hub: Hub) -> None:
    """Time budget: 60 s (the compile broken 1 s into ATC, then built again)."""
    hub = healthy_hub
    hub.ensure_model("kill-compile", "acl")
    payload = mlp_onnx_bytes(seed=41)
    created = hub.add_version("kill-compile", payload, ACL_OPTIONS)
    job_id, number = created["job"], created["version"]
    hub.wait_step(job_id, "compile")
    moment_when("ATC running", _atc_processes, 30)
    time.sleep(1.0)
    atc = _atc_processes()
    before = hub.kill("worker")
    killed = time.monotonic()
    back = hub.wait_restarted("worker", before)
    job = hub.wait_job(job_id, timeout=120)
    ended = time.monotonic()
    assert job["state"] == "failed", job
    assert job["error_code"] == "interrupted" and "worker stopped" in job["error"], job
    _, alive = psutil.wait_procs(atc, timeout=10)
    assert not alive, f"ATC outlived its worker: {alive}"

    # Nothing half-built: no scratch files, no package, no repository version.
    work = hub.store / "work"
    assert not work.exists() or not any(work.iterdir()), list(work.iterdir())
    assert not (hub.store / "sources" / "kill-compile" / str(number) / "package").exists()
    assert not (hub.store / "repository" / "kill-compile" / str(number)).exists()
    assert hub.versions("kill-compile")[number]["status"] == "failed"

    # The same file again is no duplicate of a failed version, and builds.
    retry = hub.add_version("kill-compile", payload, ACL_OPTIONS)
    assert hub.wait_job(retry["job"], timeout=120)["state"] == "succeeded"
    assert hub.running_jobs() == []
    report(
        "worker SIGKILLed mid-compile: the job failed (interrupted), ATC stopped with it",
        [
            ("the worker back after the kill", back - killed),
            ("the job marked failed after the kill", ended - killed),
        ],
    )

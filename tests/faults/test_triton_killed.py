"""Triton SIGKILLed in the middle of a switch (Triton loading the new version).

(Triton killed under inference traffic is tests/faults/test_stack_heals.py's first row.) Here
``v1`` serves and a switch to ``v2`` is running when Triton dies. The switch must fail with
Triton's absence as its reason; once the launcher has restarted Triton, reconcile must bring
back what the database says serves (``v1``); asking again then switches.
"""

from __future__ import annotations

import time

import pytest

from tests.faults.conftest import Hub, moment_when, report
from tests.fixtures.triton import mlp_onnx_bytes

pytestmark = [pytest.mark.integration, pytest.mark.faults]


def test_triton_killed_during_a_switch(healthy_hub: Hub) -> None:
    """Time budget: 60 s (two small versions built, one switch broken, one retried)."""
    hub = healthy_hub
    hub.ensure_model("triton-switch")
    numbers = []
    for seed in (51, 52):
        created = hub.add_version("triton-switch", mlp_onnx_bytes(seed=seed))
        assert hub.wait_job(created["job"])["state"] == "succeeded"
        numbers.append(created["version"])
    first, second = numbers
    served = hub.ok("POST", "/api/v1/models/triton-switch/serve?wait=true", {"version": first})
    assert served["state"] == "succeeded", served

    job_id = hub.ok("POST", "/api/v1/models/triton-switch/serve", {"version": second})["job"]

    def loading() -> bool:  # the new config is written: Triton is loading v2 now
        job = hub.job(job_id)
        assert job["state"] not in ("succeeded", "failed"), job
        return any("Wrote config.pbtxt" in line["text"] for line in job["log"])

    moment_when("the switch loading", loading, 60)
    before = hub.kill("triton")
    killed = time.monotonic()
    job = hub.wait_job(job_id, timeout=120)
    failed = time.monotonic()
    assert job["state"] == "failed", job
    assert job["error_code"] == "switch_failed", job
    assert f"v{second} did not become ready" in job["error"], job

    back = hub.wait_restarted("triton", before)
    restored = moment_when(
        f"v{first} answering again", lambda: hub.triton_ready("triton-switch", first), 90
    )
    assert hub.model("triton-switch")["serving_version"] == first
    assert not hub.triton_ready("triton-switch", second)

    def kinds() -> list[str]:
        history = hub.ok("GET", "/api/v1/models/triton-switch/history")["events"]
        return [e["kind"] for e in history]

    # The outage's own reload says when it answered again; on a loaded machine that reload can
    # come too early and fail, and the next reconcile's reload says it instead.
    moment_when(
        "the history records the outage and the reload",
        lambda: "triton.outage" in kinds() and "triton.reloaded" in kinds(),
        90,
    )

    again = hub.ok("POST", "/api/v1/models/triton-switch/serve?wait=true", {"version": second})
    assert again["state"] == "succeeded", again
    assert hub.triton_ready("triton-switch", second)
    assert hub.running_jobs() == []
    report(
        "Triton SIGKILLed during a switch: the switch failed, v1 served again",
        [
            ("the switch failed after the kill", failed - killed),
            ("Triton back after the kill", back - killed),
            ("the serving version answers again after the kill", restored - killed),
        ],
    )

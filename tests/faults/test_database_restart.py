"""PostgreSQL restarted under a running compile and a running switch.

The hub runs on a private PostgreSQL (``conftest.PrivatePostgres``). Each test stops it with
``pg_ctl -m fast`` (as a service restart does: every session is ended), keeps it down for
:data:`DOWN_S`, and starts it again, while a job is in the middle of its work. Web and
workers must reconnect by themselves; the job must end (succeeded, or failed with the reason)
and never stay "running"; a failed one can be tried again and then succeeds.
"""

from __future__ import annotations

import time

import pytest

from tests.faults.conftest import ACL_OPTIONS, Hub, PrivatePostgres, moment_when, report
from tests.fixtures.triton import mlp_onnx_bytes

pytestmark = [pytest.mark.integration, pytest.mark.faults]

#: How long the database stays down (a restart of a busy server takes seconds).
DOWN_S = 3.0


def _restart(postgres: PrivatePostgres, hub: Hub) -> dict[str, float]:
    """Stop, wait, start; what the API answered meanwhile; when it answered again."""
    stopped = time.monotonic()
    postgres.stop()
    time.sleep(0.5)
    during = hub.call("GET", "/api/v1/models", timeout=30)
    assert during.status == 503, (during.status, during.body)
    assert "database" in during.error.lower(), during.body
    time.sleep(max(0.0, DOWN_S - (time.monotonic() - stopped)))
    postgres.start()
    up = time.monotonic()
    answers = moment_when("the API answering again", hub.answers, timeout=60)
    return {"stopped": stopped, "up": up, "answers": answers}


def _assert_nothing_left_running(hub: Hub) -> None:
    assert hub.running_jobs() == []
    work = hub.store / "work"
    assert not work.exists() or not any(work.iterdir()), list(work.iterdir())


def test_database_restart_during_a_compile(healthy_hub: Hub, private_postgres) -> None:
    """Time budget: 60 s (an 8 s fake ATC run, the database down 3 s in its middle)."""
    hub = healthy_hub
    hub.ensure_model("pg-compile", "acl")
    payload = mlp_onnx_bytes(seed=11)
    job_id = hub.add_version("pg-compile", payload, ACL_OPTIONS)["job"]
    hub.wait_step(job_id, "compile")
    time.sleep(1.0)  # ATC is running
    moments = _restart(private_postgres, hub)
    job = hub.wait_job(job_id, timeout=120)
    ended = time.monotonic()
    if job["state"] == "failed":
        assert "database" in job["error"].lower(), job
        # The same file again: a failed version is no duplicate, and this build succeeds.
        retry = hub.add_version("pg-compile", payload, ACL_OPTIONS)["job"]
        assert hub.wait_job(retry, timeout=120)["state"] == "succeeded"
    else:
        assert job["state"] == "succeeded", job
    _assert_nothing_left_running(hub)
    report(
        f"PostgreSQL down {DOWN_S:.0f} s during a compile: the job {job['state']}"
        + (f" ({job['error_code']})" if job["error_code"] else ""),
        [
            ("API answers again after the database is back", moments["answers"] - moments["up"]),
            ("the job ended after the database is back", ended - moments["up"]),
        ],
    )


def test_database_restart_during_a_switch(healthy_hub: Hub, private_postgres) -> None:
    """Time budget: 60 s (two small versions built, then one switch broken)."""
    hub = healthy_hub
    hub.ensure_model("pg-switch")
    for seed in (21, 22):
        job = hub.add_version("pg-switch", mlp_onnx_bytes(seed=seed))["job"]
        assert hub.wait_job(job)["state"] == "succeeded"
    numbers = sorted(hub.versions("pg-switch"))[-2:]
    served = hub.ok("POST", "/api/v1/models/pg-switch/serve?wait=true", {"version": numbers[0]})
    assert served["state"] == "succeeded", served
    job_id = hub.ok("POST", "/api/v1/models/pg-switch/serve", {"version": numbers[1]})["job"]
    moment_when("the switch running", lambda: hub.job(job_id)["state"] == "running", 60)
    moments = _restart(private_postgres, hub)
    job = hub.wait_job(job_id, timeout=120)
    ended = time.monotonic()
    if job["state"] == "failed":
        assert "database" in job["error"].lower(), job
        # The lock is free again: the same switch, asked again, succeeds.
        again = hub.ok("POST", "/api/v1/models/pg-switch/serve?wait=true", {"version": numbers[1]})
        assert again["state"] == "succeeded", again
    else:
        assert job["state"] == "succeeded", job
    model = hub.model("pg-switch")
    assert model["serving_version"] == numbers[1], model
    moment_when(
        "Triton serving what the database records",
        lambda: hub.triton_ready("pg-switch", numbers[1]),
        60,
    )
    _assert_nothing_left_running(hub)
    report(
        f"PostgreSQL down {DOWN_S:.0f} s during a switch: the job {job['state']}"
        + (f" ({job['error_code']})" if job["error_code"] else ""),
        [
            ("API answers again after the database is back", moments["answers"] - moments["up"]),
            ("the switch ended after the database is back", ended - moments["up"]),
        ],
    )

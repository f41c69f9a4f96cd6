"""An external Redis (``REDIS_URL``: the Celery broker and the live-updates layer) restarted
while a compile runs and a switch is asked for.

Redis is ``conftest.PrivateRedis``, persisted like compose's (append-only file); it is stopped
with SIGTERM (a service restart), kept down for :data:`DOWN_S`, and started again. While it is
down the health API and every page say so; the work goes on or waits, and nothing stays
"running" or "queued" once it is back.
"""

from __future__ import annotations

import time

import pytest

from tests.faults.conftest import ACL_OPTIONS, Hub, PrivateRedis, moment_when, report
from tests.fixtures.triton import mlp_onnx_bytes

pytestmark = [pytest.mark.integration, pytest.mark.faults]

#: Long enough for the compile step to end, and the next step to be queued, while it is down.
DOWN_S = 10.0


def _broker(hub: Hub) -> dict:
    return hub.call("GET", "/api/v1/health", timeout=30).body["checks"]["broker"]


def test_redis_restart_during_a_compile_and_a_switch_request(
    healthy_hub: Hub, private_redis: PrivateRedis
) -> None:
    """Time budget: 90 s (a switch set up, an 8 s fake ATC run, Redis down 10 s across its end)."""
    hub = healthy_hub
    hub.ensure_model("redis-serve")
    built = hub.add_version("redis-serve", mlp_onnx_bytes(seed=31))
    assert hub.wait_job(built["job"])["state"] == "succeeded"
    served = hub.ok("POST", "/api/v1/models/redis-serve/serve?wait=true",
                    {"version": built["version"]})  # fmt: skip
    assert served["state"] == "succeeded", served

    hub.ensure_model("redis-compile", "acl")
    job_id = hub.add_version("redis-compile", mlp_onnx_bytes(seed=32), ACL_OPTIONS)["job"]
    hub.wait_step(job_id, "compile")
    time.sleep(1.0)  # ATC is running
    stopped = time.monotonic()
    private_redis.stop()

    # While it is down: the health API and the pages say so.
    said = moment_when("the health API saying Redis is down", lambda: not _broker(hub)["ok"], 20)
    health = hub.call("GET", "/api/v1/health")
    assert health.status == 503 and "does not answer" in health.body["checks"]["broker"]["detail"]
    page = hub.call("GET", "/models/")
    assert page.status == 200 and "does not answer" in page.body, page.body[:2000]
    # A switch asked for meanwhile is accepted, or refused with the reason; never a 500.
    asked = hub.call("POST", "/api/v1/models/redis-serve/load", {"reason": "during the outage"})
    assert asked.status in (202, 503), (asked.status, asked.body)

    time.sleep(max(0.0, DOWN_S - (time.monotonic() - stopped)))
    private_redis.start()
    up = time.monotonic()
    healthy = moment_when("the health API saying Redis answers", lambda: _broker(hub)["ok"], 30)
    page = hub.call("GET", "/models/")
    assert "does not answer" not in page.body

    job = hub.wait_job(job_id, timeout=120)
    compiled = time.monotonic()
    assert job["state"] == "succeeded", job
    if asked.status == 202:
        load = hub.wait_job(asked.body["job"], timeout=120)
        assert load["state"] == "succeeded", load
    loaded = time.monotonic()
    moment_when("no job left queued or running", lambda: hub.running_jobs() == [], 60)
    work = hub.store / "work"
    assert not work.exists() or not any(work.iterdir()), list(work.iterdir())
    report(
        f"Redis down {DOWN_S:.0f} s during a compile (and a load asked for meanwhile: "
        f"{asked.status})",
        [
            ("the health API said so after the stop", said - stopped),
            ("the health API says it answers after it is back", healthy - up),
            ("the compile job ended after Redis is back", compiled - up),
            ("the load asked for during the outage ended after Redis is back", loaded - up),
        ],
    )

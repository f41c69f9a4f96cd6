"""Serving through the whole product: API -> job -> a real worker -> a real Triton.

Clients send inference the whole time while versions are served, switched and rolled back;
not one request may fail, and each response must come from the version expected."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import time_machine

from model_store.runtime.client import TritonRuntime
from tests.fixtures.pipeline import add_version, create_model, mlp_traffic
from tests.fixtures.waiting import wait_until
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.models import Event, Job

pytestmark = pytest.mark.integration


def test_serve_switch_and_roll_back_under_load_without_a_failed_request(
    api, celery_worker, triton
) -> None:
    create_model(api, "mlp")
    assert add_version(api, celery_worker, 1) == 1
    first = api(
        "post", "/api/v1/models/mlp/serve?wait=true", {"version": 1, "reason": "first release"}
    )
    assert first.status_code == 200, first.json()
    assert first.json()["serving_version"] == 1
    add_version(api, celery_worker, 2)

    with mlp_traffic(triton.urls["http"]) as traffic:
        traffic.wait_for(20)
        switched = api(
            "post", "/api/v1/models/mlp/serve?wait=true", {"version": 2, "reason": "better"}
        )
        after_switch = time.monotonic()
        assert switched.status_code == 200, switched.json()
        traffic.wait_for(20, after=after_switch)
        rolled = api("post", "/api/v1/models/mlp/rollback?wait=true", {"reason": "regression"})
        after_rollback = time.monotonic()
        assert rolled.status_code == 200, rolled.json()
        traffic.wait_for(20, after=after_rollback)
    assert len(traffic.outcomes) > 50
    assert traffic.failures() == []
    assert 2 in traffic.versions_between(after_switch, after_rollback)
    assert traffic.versions_between(after_rollback) == {1}

    model = Model.objects.get(name="mlp")
    assert (model.serving_version, model.previous_version) == (1, 2)
    kinds = list(
        Event.objects.filter(model=model).order_by("created").values_list("kind", flat=True)
    )
    assert kinds.count("serve") == 2 and kinds.count("rollback") == 1
    switch = Event.objects.filter(kind="serve", data__to=2).get()
    assert switch.data["duration_s"] > 0 and switch.data["verification"] == "passed"
    assert switch.actor.username == "otto" and switch.data["reason"] == "better"
    history = api("get", "/api/v1/models/mlp/history").json()["events"]
    assert history[0]["kind"] == "rollback"


def test_a_version_that_cannot_load_leaves_the_old_one_serving(api, celery_worker, triton) -> None:
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    add_version(api, celery_worker, 2)
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1}).status_code == 200
    # Corrupt v2's files after packaging, as a disk fault would.
    for path in [
        celery_worker.store / "repository" / "mlp" / "2" / "model.onnx",
        celery_worker.store / "sources" / "mlp" / "2" / "package" / "2" / "model.onnx",
    ]:
        path.unlink()
        path.write_bytes(b"not a model any more")
    with mlp_traffic(triton.urls["http"], threads=2) as traffic:
        traffic.wait_for(10)
        response = api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 2})
        traffic.wait_for(10, after=time.monotonic())
    assert response.status_code == 409
    assert response.json()["code"] == "switch_failed"
    assert "did not become ready" in response.json()["error"]
    assert traffic.failures() == []
    assert traffic.versions_between(0) == {1}
    assert Model.objects.get(name="mlp").serving_version == 1


def test_two_switch_requests_at_once_are_serialised(api, celery_worker, triton) -> None:
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    add_version(api, celery_worker, 2)
    outcomes: list[int] = []

    def serve(version: int) -> None:
        outcomes.append(
            api("post", "/api/v1/models/mlp/serve?wait=true", {"version": version}).status_code
        )

    threads = [threading.Thread(target=serve, args=(v,)) for v in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(outcomes) == [200, 409]  # one ran, the other was told a switch is in progress
    model = Model.objects.get(name="mlp")
    ready = {row["version"] for row in triton.runtime().repository_index()
             if row["name"] == "mlp" and row["state"] == "READY"}  # fmt: skip
    assert ready == {str(model.serving_version)}
    assert model.lock_holder == ""


def test_reconcile_brings_serving_models_back_after_a_triton_restart(
    api, celery_worker, triton
) -> None:
    from django.core.management import call_command

    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1}).status_code == 200
    triton.stop()
    triton.start()
    triton.wait_ready(60)
    runtime = TritonRuntime(triton.urls["http"])
    assert not runtime.model_ready("mlp")  # explicit mode: a restarted Triton forgot it
    call_command("reconcile")
    assert runtime.model_ready("mlp")
    assert Event.objects.filter(kind="reconcile").exists()


@pytest.fixture
def short_lock(settings, worker_env) -> None:
    settings.SWITCH_LOCK_TTL_SECONDS = 3
    worker_env["SWITCH_LOCK_TTL_SECONDS"] = "3"


def test_a_worker_killed_mid_switch_does_not_hold_the_lock_and_reconcile_repairs(
    short_lock, api, celery_worker, triton
) -> None:
    import os
    import signal

    from django.core.management import call_command

    from webapp.registry.serving import switch as serving
    from webapp.registry.serving.actions.switch import request_switch

    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    add_version(api, celery_worker, 2)
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1}).status_code == 200
    model = Model.objects.get(name="mlp")
    job = request_switch(model=model, number=2, user=model.created_by)
    wait_until(
        lambda: Job.objects.get(pk=job.pk).state == Job.State.RUNNING, 30, interval=0.02,
        message="the switch never started",
    )  # fmt: skip
    runtime = triton.runtime()
    wait_until(  # inside the switch: Triton is loading (or has loaded) v2
        lambda: any(row["name"] == "mlp" and row["version"] == "2"
                    and row["state"] in ("LOADING", "READY")
                    for row in runtime.repository_index()),
        30, interval=0.02, message="the switch never asked Triton for v2",
    )  # fmt: skip
    os.kill(celery_worker.proc.pid, signal.SIGKILL)
    celery_worker.proc.wait(10)

    # The lock's time to live (3 s) passes: this process's clock, where reconcile runs.
    with time_machine.travel(timedelta(seconds=4)):
        call_command("reconcile")
        model.refresh_from_db()
        assert model.lock_holder == ""
        assert serving.acquire_lock(model, "next-operator")
        serving.release_lock(model, "next-operator")
    assert Job.objects.get(pk=job.pk).state == Job.State.FAILED
    ready = {row["version"] for row in triton.runtime().repository_index()
             if row["name"] == "mlp" and row["state"] == "READY"}  # fmt: skip
    assert ready == {str(model.serving_version)}

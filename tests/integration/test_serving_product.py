"""Serving through the whole product: API -> job -> a real worker -> a real Triton.

Clients send inference the whole time while versions are served, switched and rolled back;
not one request may fail, and each response must come from the version expected."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
from django.test import Client

from model_store.runtime.access import new_api_key
from model_store.runtime.client import TritonRuntime
from model_store.runtime.embedded import EmbeddedTriton, free_ports
from tests.fixtures.triton import mlp_onnx_bytes, reference_outputs
from tests.fixtures.users import token_for
from tests.integration.test_compile_pipeline import create_model, upload, wait_for_job
from webapp.registry.models import Event, Job, Model

pytestmark = pytest.mark.integration


@pytest.fixture
def triton_ports() -> list[int]:
    return free_ports(3)


@pytest.fixture
def worker_env(triton_ports, settings) -> dict[str, str]:
    http, grpc, metrics = (f"127.0.0.1:{p}" for p in triton_ports)
    settings.TRITON_URL, settings.TRITON_GRPC_URL, settings.TRITON_METRICS_URL = http, grpc, metrics
    # Triton's repository-API key is chosen here: the worker starts before Triton does.
    settings.TRITON_API_KEY = key = new_api_key()
    return {
        "TRITON_URL": http,
        "TRITON_GRPC_URL": grpc,
        "TRITON_METRICS_URL": metrics,
        "TRITON_API_KEY": key,
    }


@pytest.fixture
def triton(celery_worker, worker_env, triton_ports, tmp_path):
    """A Triton on the worker's own repository (started after the worker knows its ports)."""
    repository = celery_worker.store / "repository"
    repository.mkdir(parents=True, exist_ok=True)
    server = EmbeddedTriton(
        repository, celery_worker.store / "backends", http_port=triton_ports[0],
        grpc_port=triton_ports[1], metrics_port=triton_ports[2], log_path=tmp_path / "triton.log",
        workdir=tmp_path / "triton-work", api_key=worker_env["TRITON_API_KEY"],
    )  # fmt: skip
    server.start()
    server.wait_ready(60)
    yield server
    server.stop()


@pytest.fixture
def api(operator):
    key = token_for(operator)
    client = Client()

    def call(method: str, path: str, body: dict | None = None, **kwargs):
        if body is not None:
            kwargs |= {"data": json.dumps(body), "content_type": "application/json"}
        return getattr(client, method)(path, HTTP_AUTHORIZATION=f"Token {key}", **kwargs)

    return call


PAYLOADS = {v: mlp_onnx_bytes(in_features=8, out_features=4, seed=v) for v in (1, 2, 3)}


def add_version(api, worker, seed: int) -> int:
    response = upload(api, "mlp", PAYLOADS[seed])
    assert response.status_code == 201, response.content
    job = wait_for_job(response.json()["job"], worker)
    assert job.state == Job.State.SUCCEEDED, job.error
    return response.json()["version"]


class Traffic:
    """Client threads that infer without pause and record every outcome (bounded in time)."""

    def __init__(self, url: str, threads: int = 4, limit_s: float = 120) -> None:
        self.url = url
        self.x = np.random.default_rng(7).standard_normal((1, 8)).astype(np.float32)
        self.expected = {v: reference_outputs(p, self.x) for v, p in PAYLOADS.items()}
        self.results: list[tuple[float, int | None, str]] = []  # (time, version, error)
        self.stop = threading.Event()
        self.limit_s = limit_s
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def __enter__(self) -> Traffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def _run(self) -> None:
        runtime = TritonRuntime(self.url, timeout=30)  # no key: inference is open to clients
        started = time.monotonic()
        while not self.stop.is_set() and time.monotonic() - started < self.limit_s:
            try:
                y = runtime.infer("mlp", {"x": self.x})["y"]
            except Exception as exc:
                self.results.append((time.monotonic(), None, str(exc)))
                continue
            version = next(
                (v for v, ref in self.expected.items() if np.allclose(y, ref, atol=1e-5)), -1
            )
            self.results.append((time.monotonic(), version, ""))
        runtime.close()

    def failures(self) -> list[str]:
        return [error for _, version, error in self.results if error or version == -1]

    def versions_after(self, moment: float) -> set[int | None]:
        return {version for t, version, _ in self.results if t > moment + 0.2}


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

    with Traffic(triton.urls["http"]) as traffic:
        time.sleep(1.0)
        switched = api(
            "post", "/api/v1/models/mlp/serve?wait=true", {"version": 2, "reason": "better"}
        )
        after_switch = time.monotonic()
        assert switched.status_code == 200, switched.json()
        time.sleep(1.5)
        rolled = api("post", "/api/v1/models/mlp/rollback?wait=true", {"reason": "regression"})
        after_rollback = time.monotonic()
        assert rolled.status_code == 200, rolled.json()
        time.sleep(1.5)
    assert len(traffic.results) > 50
    assert traffic.failures() == []
    assert 2 in {v for t, v, _ in traffic.results if after_switch < t < after_rollback}
    assert traffic.versions_after(after_rollback) == {1}

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
    with Traffic(triton.urls["http"], threads=2) as traffic:
        time.sleep(0.5)
        response = api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 2})
        time.sleep(0.5)
    assert response.status_code == 409
    assert response.json()["code"] == "switch_failed"
    assert "did not become ready" in response.json()["error"]
    assert traffic.failures() == []
    assert traffic.versions_after(0) == {1}
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

    from webapp.registry import serving

    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    add_version(api, celery_worker, 2)
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1}).status_code == 200
    model = Model.objects.get(name="mlp")
    job = serving.request_switch(model=model, number=2, user=model.created_by)
    deadline = time.monotonic() + 30
    while Job.objects.get(pk=job.pk).state != Job.State.RUNNING:
        assert time.monotonic() < deadline, "the switch never started"
        time.sleep(0.02)
    time.sleep(0.3)  # inside the switch: Triton is loading v2
    os.kill(celery_worker.proc.pid, signal.SIGKILL)
    celery_worker.proc.wait(10)

    time.sleep(3.5)  # the lock's time to live
    call_command("reconcile")
    model.refresh_from_db()
    assert model.lock_holder == ""
    assert serving.acquire_lock(model, "next-operator")
    serving.release_lock(model, "next-operator")
    assert Job.objects.get(pk=job.pk).state == Job.State.FAILED
    ready = {row["version"] for row in triton.runtime().repository_index()
             if row["name"] == "mlp" and row["state"] == "READY"}  # fmt: skip
    assert ready == {str(model.serving_version)}

"""``make node NAME=b`` beside a running hub (docs/nodes.md#running-a-node): the node joins with
its own Triton, repository and queue, a version placed on it through the broker is fetched
over HTTP and served by its Triton, and Ctrl-C stops that node and nothing else."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
import tritonclient.http as httpclient
from celery import Celery

from model_store import spawn
from tests.fixtures.multipart import multipart_file
from tests.fixtures.pipeline import mlp_payload
from tests.fixtures.stack import ROOT, fresh_machine_env, interrupt, wait_for_line
from tests.fixtures.triton import reference_outputs
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.nodes]


class Hub:
    """A running ``python -m webapp.stack`` and its API with one token."""

    def __init__(self, port: int, token: str) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1"
        self.token = token

    def call(self, method: str, path: str, body: bytes | None = None, **headers: str) -> Any:
        request = urllib.request.Request(
            self.base + path, data=body, method=method,
            headers={"Authorization": f"Token {self.token}", **headers},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=120) as response:
            payload = response.read()
            # HEAD: the headers (looked up case-insensitively).
            return json.loads(payload) if payload else response.headers


def _manage(env: dict[str, str], *args: str) -> str:
    """The last word ``manage.py`` prints (a token)."""
    return spawn.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env,
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.split()[-1]  # fmt: skip


def _packaged_version(hub: Hub) -> str:
    """Model "mlp" v1 created and packaged on the hub; its package tar's SHA-256."""
    hub.call("POST", "/models", json.dumps({"name": "mlp"}).encode(),
             **{"Content-Type": "application/json"})  # fmt: skip
    body, content_type = multipart_file(mlp_payload(1))
    job_id = hub.call("POST", "/models/mlp/versions", body, **{"Content-Type": content_type})["job"]

    def finished() -> dict[str, Any] | None:
        job: dict[str, Any] = hub.call("GET", f"/jobs/{job_id}")
        return job if job["state"] in ("succeeded", "failed") else None

    job = wait_until(finished, 120, interval=0.5, message=f"job {job_id} did not finish")
    assert job is not None and job["state"] == "succeeded", job
    headers = hub.call("HEAD", "/models/mlp/versions/1/package.tar")
    return str(headers.get("X-Content-SHA256"))


def test_a_node_joins_serves_a_version_fetched_over_http_and_stops_alone(tmp_path: Path) -> None:
    env = fresh_machine_env(tmp_path / "var")
    var = Path(env["HUB_VAR_DIR"])
    stack_log = tmp_path / "stack.log"
    stack = spawn.start(
        [sys.executable, "-m", "webapp.stack"], cwd=ROOT, env=env,
        stdout=stack_log.open("wb"), stderr=subprocess.STDOUT, new_session=True,
    )  # fmt: skip
    node: subprocess.Popen[bytes] | None = None
    try:
        wait_for_line(stack_log, "Triton Model Hub is ready", stack, timeout=240)
        hub = Hub(int(env["HUB_PORT"]), _manage(env, "apitoken", "ops", "--role", "operator"))
        sha256 = _packaged_version(hub)

        # Nothing but the name: the node finds the hub through the running stack and mints
        # its token with `manage.py nodetoken b`.
        node_log = tmp_path / "node.log"
        node_env = {**env, "NODE_REPORT_EVERY_SECONDS": "2"}
        node = spawn.start(
            ["make", "node", "NAME=b"], cwd=ROOT, env=node_env,
            stdout=node_log.open("wb"), stderr=subprocess.STDOUT, new_session=True,
        )  # fmt: skip
        text = wait_for_line(node_log, "ready (Ctrl-C stops this node only)", node, timeout=120)
        node_triton = re.search(r"Triton: ready in .* at (\S+)", text)[1]  # type: ignore[index]
        hub_triton = f"127.0.0.1:{env['HUB_TRITON_HTTP_PORT']}"
        assert node_triton != hub_triton

        broker = json.loads((var / "run" / "connections.json").read_text())["settings"]
        app = Celery(broker=broker["REDIS_URL"], backend=broker["REDIS_URL"])
        placed = app.send_task("node.place", args=["mlp", 1, sha256], queue="node.b")
        result = placed.get(timeout=120)
        assert result["ok"] and result["fetched"], result
        assert result["bytes"] > 0 and result["timings"]["switch_s"] > 0

        x = np.random.default_rng(3).standard_normal((1, 8)).astype(np.float32)
        client = httpclient.InferenceServerClient(node_triton)
        inputs = [httpclient.InferInput("x", [1, 8], "FP32")]
        inputs[0].set_data_from_numpy(x)
        answer = client.infer("mlp", inputs, model_version="1").as_numpy("y")
        np.testing.assert_allclose(answer, reference_outputs(mlp_payload(1), x), rtol=1e-5)
        # The hub's Triton was never asked to serve it: the node's own Triton answered.
        assert not httpclient.InferenceServerClient(hub_triton).is_model_ready("mlp")

        # The files came over HTTP into the node's own repository, not by path.
        node_file = var / "nodes" / "b" / "store" / "repository" / "mlp" / "1" / "model.onnx"
        hub_file = var / "store" / "repository" / "mlp" / "1" / "model.onnx"
        assert node_file.read_bytes() == hub_file.read_bytes()
        assert node_file.stat().st_ino != hub_file.stat().st_ino
        assert "/api/v1/models/mlp/versions/1/package.tar" in (var / "log" / "web.log").read_text()

        # A repeated place with the same hash fetches nothing; unload empties the node's Triton.
        again = app.send_task("node.place", args=["mlp", 1, sha256], queue="node.b").get(60)
        assert again["ok"] and not again["fetched"], again
        bad = app.send_task("node.place", args=["../mlp", 1, sha256], queue="node.b").get(60)
        assert not bad["ok"] and bad["code"] == "placement_refused", bad
        # A hash other than the tar's: refused after the download, before anything is written.
        other = app.send_task("node.place", args=["mlp", 1, "0" * 64], queue="node.b").get(60)
        assert not other["ok"] and other["code"] == "sha256_mismatch", other
        assert client.is_model_ready("mlp", "1")
        unloaded = app.send_task("node.unload", args=["mlp"], queue="node.b").get(60)
        assert unloaded["ok"], unloaded
        assert not client.is_model_ready("mlp")

        # The node joined: its report was accepted and the hub lists it, up, with its Triton.
        worker_log = var / "nodes" / "b" / "log" / "worker.log"
        assert "node b: report accepted" in worker_log.read_text(), worker_log.read_text()
        nodes = {n["name"]: n for n in hub.call("GET", "/nodes")["nodes"]}
        assert nodes["b"]["state"] == "up", nodes["b"]
        assert nodes["b"]["triton"]["http"] == node_triton, nodes["b"]
        token = (var / "nodes" / "b" / "run" / "token").read_text().strip()
        assert token not in worker_log.read_text() + node_log.read_text()

        # Ctrl-C stops the node's processes, and the hub keeps running.
        node_children = psutil.Process(node.pid).children(recursive=True)
        assert any("tritonserver" in " ".join(c.cmdline()) for c in node_children)
        os.killpg(node.pid, signal.SIGINT)
        node.wait(60)
        _, alive = psutil.wait_procs(node_children, timeout=10)
        assert not alive, [p.pid for p in alive]
        assert "stopped." in node_log.read_text()
        assert stack.poll() is None
        health = hub.call("GET", "/health")
        assert health["checks"]["triton"]["ok"] and health["checks"]["workers"]["ok"], health
    finally:
        interrupt(node)
        interrupt(stack)

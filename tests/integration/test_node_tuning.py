"""Tuning trials on another node (docs/tuning.md): the hub's search sends each trial to node b
through its queue; b fetches the package over HTTP, loads the trial in its own Triton next to
nothing the hub serves, measures it and removes it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tritonclient.http as httpclient

from model_store import spawn
from tests.fixtures.multipart import multipart_file
from tests.fixtures.pipeline import mlp_payload
from tests.fixtures.stack import ROOT, fresh_machine_env, interrupt, wait_for_line
from tests.fixtures.waiting import wait_until
from tests.integration.test_node import Hub

pytestmark = [pytest.mark.integration, pytest.mark.nodes]


def _token(env: dict[str, str]) -> str:
    return spawn.run(
        [sys.executable, "manage.py", "apitoken", "ops", "--role", "operator"], cwd=ROOT,
        env=env, capture_output=True, text=True, check=True, timeout=120,
    ).stdout.split()[-1]  # fmt: skip


def _json(hub: Hub, method: str, path: str, body: dict[str, Any]) -> Any:
    return hub.call(method, path, json.dumps(body).encode(), **{"Content-Type": "application/json"})


def _wait_job(hub: Hub, job_id: str, timeout: float) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        job: dict[str, Any] = hub.call("GET", f"/jobs/{job_id}")
        return job if job["state"] in ("succeeded", "failed", "cancelled") else None

    job = wait_until(finished, timeout, interval=0.5, message=f"job {job_id} did not finish")
    assert job is not None
    return job


def test_trials_run_on_the_node_the_operator_picks(tmp_path: Path) -> None:
    # Each load level measured for 1 s, not 2: where the trials run is under test here.
    env = fresh_machine_env(tmp_path / "var") | {"TUNE_STEP_SECONDS": "1"}
    var = Path(env["HUB_VAR_DIR"])
    stack_log = tmp_path / "stack.log"
    stack = spawn.start(
        [sys.executable, "-m", "webapp.stack"], cwd=ROOT, env=env,
        stdout=stack_log.open("wb"), stderr=subprocess.STDOUT, new_session=True,
    )  # fmt: skip
    node: subprocess.Popen[bytes] | None = None
    try:
        wait_for_line(stack_log, "Triton Model Hub is ready", stack, timeout=240)
        hub = Hub(int(env["HUB_PORT"]), _token(env))
        _json(hub, "POST", "/models", {"name": "mlp"})
        body, content_type = multipart_file(mlp_payload(1))
        built = hub.call("POST", "/models/mlp/versions", body, **{"Content-Type": content_type})
        assert _wait_job(hub, built["job"], 120)["state"] == "succeeded"
        served = _json(hub, "POST", "/models/mlp/serve?wait=true", {"version": 1})
        assert served["serving_version"] == 1, served

        node_log = tmp_path / "node.log"
        node = spawn.start(
            ["make", "node", "NAME=b"], cwd=ROOT, env={**env, "NODE_REPORT_EVERY_SECONDS": "2"},
            stdout=node_log.open("wb"), stderr=subprocess.STDOUT, new_session=True,
        )  # fmt: skip
        text = wait_for_line(node_log, "ready (Ctrl-C stops this node only)", node, timeout=120)
        node_triton = re.search(r"Triton: ready in .* at (\S+)", text)[1]  # type: ignore[index]
        wait_until(
            lambda: {n["name"]: n["state"] for n in hub.call("GET", "/nodes")["nodes"]}.get("b")
            == "up", 60, interval=0.5, message="node b did not come up",
        )  # fmt: skip

        started = _json(
            hub, "POST", "/models/mlp/tune",
            {"objective": "throughput", "p99_ms": 1000, "budget_s": 30, "node": "b",
             "max_concurrency": 2},
        )  # fmt: skip
        assert started["node"] == "b"
        job = _wait_job(hub, started["job"], 180)
        assert job["state"] == "succeeded", job
        run = hub.call("GET", f"/models/mlp/tune/{started['id']}")
        measured = [t for t in run["trials"] if t["state"] == "measured"]
        assert measured and all(t["throughput_rps"] > 0 for t in measured), run["trials"]

        # The trials ran on b: its worker fetched the package and its Triton loaded them; the
        # node's repository and Triton hold none afterwards.
        worker_log = (var / "nodes" / "b" / "log" / "worker.log").read_text()
        assert "node.trial" in worker_log, worker_log[-3000:]
        node_repository = var / "nodes" / "b" / "store" / "repository"
        assert not [p for p in node_repository.iterdir() if p.name.startswith("_trial")]
        stats = httpclient.InferenceServerClient(node_triton).get_inference_statistics()
        loaded = [m["name"] for m in stats["model_stats"]]
        assert not [name for name in loaded if name.startswith("_trial")], loaded
        hub_repository = var / "store" / "repository"
        assert not [p for p in hub_repository.iterdir() if p.name.startswith("_trial")]

        refused = None
        try:
            _json(hub, "POST", "/models/mlp/tune", {"objective": "throughput", "p99_ms": 50,
                                                    "node": "nowhere"})  # fmt: skip
        except Exception as exc:  # urllib raises on 404
            refused = exc
        assert refused is not None and "404" in str(refused)
    finally:
        interrupt(node)
        interrupt(stack)

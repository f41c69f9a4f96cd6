"""Nodes, part 2 on one machine (docs/nodes.md#placement-and-rollouts): the hub's stack (node
``local``) and ``make node NAME=b``, each with its own Triton. A model placed on every node
reaches b when b joins late; serve and roll back roll out node by node while clients of both
Tritons see no failed request; with b's Triton killed, the rollout stops at b and says what
each node serves, and local keeps serving.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.fixtures.multipart import multipart_file
from tests.fixtures.pipeline import mlp_payload, mlp_traffic
from tests.fixtures.stack import (
    fresh_machine_env,
    interrupt,
    manage_token,
    start_node,
    start_stack,
)
from tests.fixtures.waiting import wait_until
from tests.integration.test_acl_first_contact import Hub

pytestmark = [pytest.mark.integration, pytest.mark.nodes]


def _job(hub: Hub, job_id: str, timeout: float = 180) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        job: dict[str, Any] = hub.ok("GET", f"/jobs/{job_id}")
        return job if job["state"] in ("succeeded", "failed") else None

    found = wait_until(finished, timeout, interval=0.3, message=f"job {job_id} did not finish")
    assert found is not None
    return found


def _add_version(hub: Hub, seed: int) -> None:
    body, content_type = multipart_file(mlp_payload(seed))
    answer = hub.ok("POST", "/models/mlp/versions", raw=body, content_type=content_type)
    assert _job(hub, answer["job"])["state"] == "succeeded"


def _per_node(hub: Hub) -> dict[str, dict[str, Any]]:
    return {n["node"]: n for n in hub.ok("GET", "/models/mlp")["nodes"]}


def test_place_on_every_node_then_roll_out_and_back_without_a_failed_request(
    tmp_path: Path,
) -> None:
    env = fresh_machine_env(tmp_path / "var") | {
        "HOST_PROBE_SECONDS": "5", "RECONCILE_SECONDS": "5", "NODE_REPORT_EVERY_SECONDS": "5",
    }  # fmt: skip
    stack = start_stack(env, tmp_path / "stack.log")
    node = None
    try:
        token = manage_token(env, "apitoken", "ops", "--role", "operator")
        hub = Hub(int(env["HUB_PORT"]), token, "")
        hub.ok("POST", "/models", {"name": "mlp"})
        _add_version(hub, 1)
        _add_version(hub, 2)
        assert hub.ok("POST", "/models/mlp/serve?wait=true", {"version": 1})["state"] == "succeeded"

        # Every node, before b exists: only local now; b gets v1 when it joins (reconcile).
        placed = hub.ok("PUT", "/models/mlp/placement?wait=true", {"labels": {}})
        assert placed["state"] == "succeeded", placed
        assert hub.ok("GET", "/models/mlp")["placement"] == {"labels": {}}
        node, b_triton = start_node(env, "b", tmp_path / "node.log")
        joined_at = time.monotonic()
        wait_until(lambda: _per_node(hub).get("b", {}).get("state") == "serving", 60,
                   interval=0.5, message="b never got mlp")  # fmt: skip
        print(f"b served mlp v1 {time.monotonic() - joined_at:.1f} s after it was ready")
        assert _per_node(hub)["b"]["version"] == 1

        # Serve v2 and roll back, node by node, with clients on both Tritons.
        local_triton = f"127.0.0.1:{env['HUB_TRITON_HTTP_PORT']}"
        with mlp_traffic(local_triton, threads=2) as on_local, \
                mlp_traffic(b_triton, threads=2) as on_b:  # fmt: skip
            on_local.wait_for(10)
            on_b.wait_for(10)
            served = hub.ok("POST", "/models/mlp/serve?wait=true", {"version": 2})
            assert served["state"] == "succeeded", served
            after = time.monotonic()
            on_local.wait_for(10, after=after)
            on_b.wait_for(10, after=after)
            assert {n: s["version"] for n, s in _per_node(hub).items()} == {"local": 2, "b": 2}
            rolled = hub.ok("POST", "/models/mlp/rollback?wait=true", {})
            assert rolled["state"] == "succeeded", rolled
            after = time.monotonic()
            on_local.wait_for(10, after=after)
            on_b.wait_for(10, after=after)
        for traffic in (on_local, on_b):
            assert traffic.failed == 0, traffic.failures()
            assert {o.version for o in traffic.outcomes} == {1, 2}
        assert {n: s["version"] for n, s in _per_node(hub).items()} == {"local": 1, "b": 1}
        # The hub's infer API spreads calls over the nodes that serve the version.
        x = [[0.5] * 8]
        answered = {
            hub.ok("POST", "/models/mlp/infer", {"inputs": {"x": x}})["node"] for _ in range(4)
        }
        assert answered == {"local", "b"}, answered
        job = hub.ok("GET", f"/jobs/{rolled['job']}")
        lines = " ".join(line["text"] for line in job["log"])
        assert "Node b: v2 -> v1" in lines, lines

        # b's Triton killed: the rollout stops at b, says what serves where; local serves on.
        tritons = [
            p for p in psutil.Process(node.pid).children(recursive=True)
            if "tritonserver" in " ".join(p.cmdline())
        ]  # fmt: skip
        assert tritons
        for proc in tritons:
            os.kill(proc.pid, signal.SIGKILL)
        with mlp_traffic(local_triton, threads=2) as on_local:
            on_local.wait_for(5)
            answer = hub.call("POST", "/models/mlp/serve?wait=true", {"version": 2})
            on_local.wait_for(5, after=time.monotonic())
        status, body = answer
        assert status == 409 and body["code"] == "rollout_stopped", answer
        assert "stopped at node b" in body["error"] and "local v2" in body["error"], body
        assert on_local.failed == 0, on_local.failures()
        nodes_now = _per_node(hub)
        assert nodes_now["local"]["version"] == 2 and nodes_now["b"]["state"] == "failed"

        # b comes back (its Triton empty): its report shows the drift, reconcile places v2.
        node.wait(60)  # the node stopped itself when its Triton died
        node, _ = start_node(env, "b", tmp_path / "node-again.log")
        wait_until(
            lambda: (_per_node(hub)["b"]["state"], _per_node(hub)["b"]["version"])
            == ("serving", 2),
            60, interval=0.5, message="b did not get v2 back after it came back",
        )  # fmt: skip
    finally:
        interrupt(node)
        interrupt(stack)

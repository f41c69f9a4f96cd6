"""Nodes, part 2 on one machine (docs/nodes.md#placement-and-rollouts): the hub's stack (node
``local``) and ``make node NAME=b``, each with its own Triton. A model placed on every node
reaches b when b joins late; serve and roll back roll out node by node while clients of both
Tritons see no failed request; with b's Triton killed, the rollout stops at b and says what
each node serves, and local keeps serving.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

from tests.fixtures.gateway_clients import Clients
from tests.fixtures.multipart import multipart_file
from tests.fixtures.pipeline import mlp_payload, mlp_traffic
from tests.fixtures.stack import (
    fresh_machine_env,
    interrupt,
    manage_token,
    start_node,
    start_stack,
)
from tests.fixtures.triton import reference_outputs
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

        # Serve v2 and roll back, node by node, with clients on both Tritons and through the
        # hub's /v2 (which names the version it forwards each call to).
        local_triton = f"127.0.0.1:{env['HUB_TRITON_HTTP_PORT']}"
        gateway = Gateway.for_stack(env)
        with mlp_traffic(local_triton, threads=2) as on_local, \
                mlp_traffic(b_triton, threads=2) as on_b, \
                gateway.clients(threads=2) as on_v2:  # fmt: skip
            on_local.wait_for(10)
            on_b.wait_for(10)
            wait_until(lambda: len(on_v2.answers) > 10, 60, message="no answers through /v2")
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
        assert on_v2.failures() == [], on_v2.failures()[:5]
        assert {version for _, version, _ in on_v2.answers} == {1, 2}
        assert {n: s["version"] for n, s in _per_node(hub).items()} == {"local": 1, "b": 1}
        # The hub's infer API spreads calls over the nodes that serve the version.
        x = [[0.5] * 8]
        answered = {
            hub.ok("POST", "/models/mlp/infer", {"inputs": {"x": x}})["node"] for _ in range(4)
        }
        assert answered == {"local", "b"}, answered
        job = hub.ok("GET", f"/jobs/{rolled['job']}")
        lines = " ".join(line["text"] for line in job["log"])
        assert "Node b: v1 loaded beside v2" in lines and "Node b: v2 -> v1" in lines, lines

        # b's Triton killed: the rollout stops at b before anything moved, says what serves
        # where; local serves on.
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
        assert "stopped at node b" in body["error"] and "local v1" in body["error"], body
        assert on_local.failed == 0, on_local.failures()
        assert {o.version for o in on_local.outcomes} == {1}
        assert _per_node(hub)["local"]["version"] == 1

        # b comes back (its Triton empty): its report shows the drift, reconcile places v1.
        node.wait(60)  # the node stopped itself when its Triton died
        node, b_triton = start_node(env, "b", tmp_path / "node-again.log")
        wait_until(
            lambda: (_per_node(hub)["b"]["state"], _per_node(hub)["b"]["version"])
            == ("serving", 1),
            60, interval=0.5, message="b did not get v1 back after it came back",
        )  # fmt: skip
        _canary_across_both_nodes(hub, gateway, local_triton, b_triton)
        _on_other_nodes_alone(hub, gateway)
    finally:
        interrupt(node)
        interrupt(stack)


def _served_by(triton: str, version: int) -> int:
    """How many calls ``triton`` answered with ``version`` of mlp (its own statistics)."""
    url = f"http://{triton}/v2/models/mlp/versions/{version}/stats"
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            stats = json.loads(answer.read())["model_stats"]
    except urllib.error.HTTPError as exc:
        if exc.code == 400:  # not loaded (yet): Triton answers 400 for an unknown version
            return 0
        raise
    return sum(int(s["inference_stats"]["success"]["count"]) for s in stats)


def _canary_ended(hub: Hub) -> Callable[[], dict[str, Any] | None]:
    def ended() -> dict[str, Any] | None:
        shown: dict[str, Any] = hub.ok("GET", "/models/mlp/canary")
        return shown if shown["phase"] in ("promoted", "rolled_back", "aborted", "failed") else None

    return ended


@dataclass
class Gateway:
    """Clients of the hub's ``/v2`` with a service's token (no per-minute limit of its own:
    production traffic), telling versions 1-3 apart by their numbers."""

    address: str
    key: str
    x: np.ndarray
    references: dict[int, np.ndarray]

    @classmethod
    def for_stack(cls, env: dict[str, str]) -> Gateway:
        key = manage_token(env, "apitoken", "svc", "--role", "operator", "--rate-per-minute", "0")
        x = np.random.default_rng(5).standard_normal((1, 8)).astype(np.float32)
        references = {v: reference_outputs(mlp_payload(v), x) for v in (1, 2, 3)}
        return cls(f"127.0.0.1:{env['HUB_PORT']}", key, x, references)

    def clients(self, threads: int = 4) -> Clients:
        return Clients(self.address, self.key, self.references, self.x, threads=threads)


def _canary_across_both_nodes(hub: Hub, gateway: Gateway, local_triton: str, b_triton: str) -> None:
    """v3 is loaded beside v1 on local and on b; half the unpinned calls through the hub's
    ``/v2`` go to it, and both Tritons answer some of them; it is promoted on both, with no
    failed call. Then a canary of v1 is aborted: it leaves both nodes."""
    _add_version(hub, 3)
    plan = {"version": 3, "steps": [50, 100], "step_seconds": 5, "max_error_rate": 0.05,
            "max_p99_ratio": 50, "min_requests": 20}  # fmt: skip
    with gateway.clients() as clients:
        wait_until(lambda: len(clients.answers) > 20, 60, message="no answers through /v2")
        assert hub.call("POST", "/models/mlp/canary", plan)[0] == 202
        wait_until(lambda: all(_served_by(t, 3) > 0 for t in (local_triton, b_triton)), 60,
                   interval=0.5, message="the candidate did not answer on both nodes")  # fmt: skip
        beside = {n: s.get("beside") for n, s in _per_node(hub).items()}
        ended = wait_until(_canary_ended(hub), 120, interval=0.5, message="it did not end")
    assert ended["state"] == "promoted", ended
    (passed,) = [d for d in ended["decisions"] if d["verdict"] == "pass"]
    ours, theirs = passed["candidate"]["requests"], passed["serving"]["requests"]
    assert abs(100 * ours / (ours + theirs) - 50) <= 10, passed  # the share across both nodes
    assert beside == {"local": 3, "b": 3}, beside
    assert clients.failures() == [], clients.failures()[:5]
    print(f"{len(clients.answers)} calls through /v2 during the canary, none failed")
    assert {n: (s["version"], s["beside"]) for n, s in _per_node(hub).items()} == {
        "local": (3, None), "b": (3, None),
    }  # fmt: skip

    aborted = dict(plan, version=1, step_seconds=600)
    assert hub.call("POST", "/models/mlp/canary", aborted)[0] == 202
    wait_until(lambda: _per_node(hub)["b"]["beside"] == 1, 60, interval=0.5,
               message="v1 was not loaded beside on b")  # fmt: skip
    assert hub.call("POST", "/models/mlp/canary/abort")[0] == 202
    ended = wait_until(_canary_ended(hub), 60, interval=0.5, message="the abort did not end it")
    assert ended["state"] == "aborted", ended
    wait_until(lambda: {s["beside"] for s in _per_node(hub).values()} == {None}, 60,
               interval=0.5, message="v1 stayed beside after the abort")  # fmt: skip


def _on_other_nodes_alone(hub: Hub, gateway: Gateway) -> None:
    """Placed on b alone (the hub's host serves none of it): serve v2 and roll back to v3
    with clients through ``/v2``. b holds both versions while the route moves, so no call
    names a version b has already unloaded."""
    placed = hub.ok("PUT", "/models/mlp/placement?wait=true", {"nodes": ["b"]})
    assert placed["state"] == "succeeded", placed
    assert {n: s["version"] for n, s in _per_node(hub).items() if n == "b"} == {"b": 3}
    with gateway.clients() as clients:
        wait_until(lambda: len(clients.answers) > 20, 60, message="no answers through /v2")
        served = hub.ok("POST", "/models/mlp/serve?wait=true", {"version": 2})
        assert served["state"] == "succeeded", served
        moved = time.monotonic()
        wait_until(lambda: 2 in clients.versions_after(moved), 30, message="v2 never answered")
        rolled = hub.ok("POST", "/models/mlp/rollback?wait=true", {})
        assert rolled["state"] == "succeeded", rolled
        moved = time.monotonic()
        wait_until(lambda: clients.versions_after(moved) == {3}, 30, message="v3 not back")
    assert clients.failures() == [], clients.failures()[:5]
    assert {version for _, version, _ in clients.answers} == {2, 3}
    lines = " ".join(line["text"] for line in hub.ok("GET", f"/jobs/{served['job']}")["log"])
    assert "Node b: v2 loaded beside v3" in lines and "Calls now go to version 2" in lines, lines
    print(f"{len(clients.answers)} calls through /v2 while b alone switched twice, none failed")

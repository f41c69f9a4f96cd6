"""Two nodes on one machine (docs/nodes.md): the hub's stack (node ``local``, no CANN, no NPU)
and ``make node NAME=b`` with the CANN stand-ins installed the way CANN is (a fake ``npu-smi``
on b only). The acl build needs CANN, so the hub sends it to b: b fetches the source over HTTP,
compiles with its ATC, verifies on its NPU and sends the artifact back. Then b is stopped
(marked down within three report intervals), started again (up again), and its token revoked
(refused; down again).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from model_store import spawn
from tests.fakes.toolkit import make_fake_toolkit
from tests.fixtures.multipart import multipart_file
from tests.fixtures.stack import (
    ROOT,
    fresh_machine_env,
    interrupt,
    manage_token,
    start_node,
    start_stack,
)
from tests.fixtures.waiting import wait_until
from tests.integration.test_acl_first_contact import NOT_A_REAL_HOSTS, Hub

pytestmark = [pytest.mark.integration, pytest.mark.nodes]

DEMO = ROOT / "demo"
#: The hub's report interval here (its minimum); a node is down 3 intervals after its last.
PROBE_S = 5
DOWN_WITHIN_S = 3 * PROBE_S + 2 * PROBE_S  # three intervals, plus a beat and a page's read


def _start_node(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return start_node(env, "b", log)[0]


def _node(hub: Hub, name: str) -> dict[str, Any]:
    return dict(hub.ok("GET", f"/nodes/{name}"))


def _until_state(hub: Hub, name: str, state: str, within: float) -> float:
    started = time.monotonic()
    wait_until(lambda: _node(hub, name)["state"] == state, within, interval=0.5,
               message=f"node {name} is not {state} within {within} s")  # fmt: skip
    return time.monotonic() - started


def test_a_build_needing_cann_runs_on_the_node_that_has_it(tmp_path: Path) -> None:
    env = {
        key: value
        for key, value in fresh_machine_env(tmp_path / "var").items()
        if not key.startswith(NOT_A_REAL_HOSTS)
    } | {"HOST_PROBE_SECONDS": str(PROBE_S)}
    node_env = env | make_fake_toolkit(tmp_path / "Ascend", layout="cann", path=env["PATH"])
    node_log = tmp_path / "node.log"
    stack = start_stack(env, tmp_path / "stack.log")
    node = None
    try:
        token = manage_token(env, "apitoken", "ops", "--role", "operator")
        hub = Hub(int(env["HUB_PORT"]), token, node_env["ASCEND_TOOLKIT_HOME"])
        node = _start_node(node_env, node_log)

        # b joins with its NPUs (its npu-smi); local has none and no CANN.
        _until_state(hub, "b", "up", 30)
        b = _node(hub, "b")
        assert b["soc"] == "Ascend310P3" and len(b["devices"]) == 2, b
        assert b["cann_version"], b
        local = _node(hub, "local")
        assert local["devices"] == [] and not local["cann_version"], local

        hub.ok("POST", "/models", {"name": "demo-acl", "target": "acl"})
        options = {"soc_version": "Ascend310P3", "input_shape": "input:1,3,224,224"}
        body, content_type = multipart_file(
            (DEMO / "efficientnet-lite0" / "model.onnx").read_bytes(),
            fields={"options": json.dumps(options)},
        )
        job_id = hub.ok("POST", "/models/demo-acl/versions", raw=body,
                        content_type=content_type)["job"]  # fmt: skip
        job = wait_until(
            lambda: (j := hub.ok("GET", f"/jobs/{job_id}"))["state"] in ("succeeded", "failed")
            and j, 180, interval=0.5, message=f"job {job_id} did not finish",
        )  # fmt: skip
        assert job["state"] == "succeeded", job["error"]
        lines = [line["text"] for line in job["log"]]
        assert any("Building on node b" in line for line in lines), lines
        assert job["commands"][0].startswith(f"{hub.toolkit_home}/bin/atc --model="), job
        version = hub.ok("GET", "/models/demo-acl/versions/1")
        report = version["verification_report"]
        assert report["status"] == "passed" and report["via"] == "worker_npu", report
        assert report["node"] == "b", report
        assert version["built_with"]["cann_version"], version
        # Moved over HTTP with b's token, never by path.
        web_log = (Path(env["HUB_VAR_DIR"]) / "log" / "web.log").read_text()
        assert f"/api/v1/nodes/b/builds/{job_id.replace('-', '')}/source.tar" in web_log
        assert f"/api/v1/nodes/b/builds/{job_id.replace('-', '')}/artifact.tar" in web_log

        # Stopped: down within three report intervals; started again: up.
        interrupt(node)
        took = _until_state(hub, "b", "down", DOWN_WITHIN_S)
        node = _start_node(node_env, tmp_path / "node-again.log")
        _until_state(hub, "b", "up", 2 * PROBE_S)

        # Its token revoked: its next report is refused, and it goes down.
        spawn.run(
            [sys.executable, "manage.py", "nodetoken", "b", "--revoke"],
            cwd=ROOT, env=env, capture_output=True, check=True, timeout=120,
        )  # fmt: skip
        _until_state(hub, "b", "down", DOWN_WITHIN_S)
        worker_log = Path(env["HUB_VAR_DIR"]) / "nodes" / "b" / "log" / "worker.log"
        assert "report not accepted" in worker_log.read_text()
        print(f"node b marked down {took:.1f} s after it stopped (limit {DOWN_WITHIN_S} s)")
    finally:
        interrupt(node)
        interrupt(stack)

"""The one-command stack heals itself: each part SIGKILLed under traffic comes back.

One ``python -m webapp.stack`` (what ``make run`` runs) on free ports with everything
embedded serves a small model while a client thread sends inference straight to Triton the
whole time. Then, one after the other, Triton, Redis, the worker, beat and the web process are
SIGKILLed (as the OOM killer or a crashing backend would). For each: the launcher restarts it,
nothing else is restarted, and the figures are printed (``-s`` shows them; docs/running.md's table
comes from this test): seconds until the part is back, until the served model answers again.
A switch job queued just before Redis dies still finishes (Redis keeps an append-only file).

Heavy (marked ``faults``; CI runs it once), about 90 s on 2 cores.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

from model_store import spawn
from tests.fixtures.multipart import multipart_file
from tests.fixtures.stack import ROOT, fresh_machine_env, wait_for_line
from tests.fixtures.traffic import Traffic
from tests.fixtures.triton import mlp_onnx_bytes
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.faults]

PARTS = {
    "triton": lambda cmd: "tritonserver" in cmd,
    "redis": lambda cmd: "redis-server" in cmd,
    "worker": lambda cmd: "celery" in cmd and " worker" in cmd,
    "beat": lambda cmd: "celery" in cmd and " beat" in cmd,
    "web": lambda cmd: "uvicorn" in cmd,
}


class Stack:
    def __init__(self, tmp_path: Path) -> None:
        self.env = fresh_machine_env(tmp_path / "var")
        self.env |= {"HUB_RESTART_BACKOFF_MAX_SECONDS": "2", "SERVER_STATE_PUSH_SECONDS": "2"}
        self.var = Path(self.env["HUB_VAR_DIR"])
        self.base = f"http://127.0.0.1:{self.env['HUB_PORT']}"
        self.triton_url = f"127.0.0.1:{self.env['HUB_TRITON_HTTP_PORT']}"
        self.log = tmp_path / "stack.log"
        self.proc = spawn.start(
            [sys.executable, "-m", "webapp.stack"], cwd=ROOT, env=self.env,
            stdout=self.log.open("wb"), stderr=-2, new_session=True,
        )  # fmt: skip
        wait_for_line(self.log, "Triton Model Hub is ready", self.proc, timeout=240)
        token = spawn.run(
            [sys.executable, "manage.py", "apitoken", "faults", "--role", "operator"],
            cwd=ROOT, env=self.env, capture_output=True, text=True, check=True, timeout=120,
        ).stdout.split()[-1]  # fmt: skip
        self.headers = {"Authorization": f"Token {token}"}

    def api(self, method: str, path: str, body: object = None, raw: bytes | None = None,
            content_type: str = "application/json") -> dict:  # fmt: skip
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(
            self.base + path, data=data, method=method,
            headers={**self.headers, "Content-Type": content_type},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=240) as response:
            return json.loads(response.read() or b"{}")

    def status(self) -> dict:
        return json.loads((self.var / "run" / "stack.json").read_text())["parts"]

    def pid_of(self, part: str) -> int:
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                cmd = " ".join(child.cmdline())
            except psutil.Error:
                continue
            if PARTS[part](cmd) and child.parent() and child.parent().pid == self.proc.pid:
                return child.pid
            if part == "triton" and PARTS[part](cmd):
                return child.pid
        raise AssertionError(f"no {part} process under the stack")

    def stop(self) -> None:
        import os

        os.killpg(self.proc.pid, signal.SIGINT)
        self.proc.wait(90)


def client_traffic(triton_url: str) -> Traffic:
    """Inference straight to Triton, as clients do: one client, a request every 20 ms and 70 ms
    after a failure (paced on purpose: a steady client, not a load test)."""
    x = np.random.default_rng(1).standard_normal((1, 4)).astype(np.float32)
    return Traffic(
        triton_url, "mlp", {"x": x}, threads=1, limit_s=600, pause_s=0.02,
        pause_after_failure_s=0.07, timeout_s=5,
    )  # fmt: skip


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = Stack(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _wait(what: str, check, timeout: float = 120) -> float:  # type: ignore[no-untyped-def]
    """Wait for ``check``; the moment it held."""
    wait_until(check, timeout, interval=0.1, message=f"{what} did not happen")
    return time.monotonic()


def test_every_part_killed_under_traffic_comes_back_alone(stack: Stack) -> None:
    stack.api("POST", "/api/v1/models", {"name": "mlp", "target": "onnxruntime"})
    body, content_type = multipart_file(mlp_onnx_bytes(), "m.onnx")
    job = stack.api("POST", "/api/v1/models/mlp/versions", raw=body,
                    content_type=content_type)["job"]  # fmt: skip
    _wait(
        "the compile job", lambda: stack.api("GET", f"/api/v1/jobs/{job}")["state"] == "succeeded"
    )
    assert stack.api("POST", "/api/v1/models/mlp/serve?wait=true", {"version": 1})["state"] == (
        "succeeded"
    )
    figures = []
    with client_traffic(stack.triton_url) as traffic:
        _wait("traffic", lambda: traffic.answering_since(0) is not None)
        for part in ("triton", "redis", "worker", "beat", "web"):
            before = {name: s["restarts"] for name, s in stack.status().items()}
            queued = None
            if part == "redis":  # a job queued just before Redis dies must still run
                queued = stack.api("POST", "/api/v1/models/mlp/load", {"reason": "fault test"})
            killed = time.monotonic()
            psutil.Process(stack.pid_of(part)).kill()
            back = _wait(
                f"{part} back",
                lambda p=part, b=before: (
                    stack.status()[p]["restarts"] == b[p] + 1 and stack.status()[p]["state"] == "up"
                ),
            )
            answering = _wait(
                "the model answering", lambda b=back: traffic.answering_since(b) is not None
            )
            after = {name: s["restarts"] for name, s in stack.status().items()}
            assert {n: after[n] - before[n] for n in after} == {n: int(n == part) for n in after}, (
                "only the killed part restarts"
            )
            if queued is not None:
                _wait("the queued job", lambda j=queued["job"]: stack.api(
                    "GET", f"/api/v1/jobs/{j}")["state"] == "succeeded")  # fmt: skip
            failed = sum(1 for o in traffic.snapshot() if killed <= o.end <= answering and not o.ok)
            figures.append((part, back - killed, answering - killed, failed))
        history = stack.api("GET", "/api/v1/models/mlp/history")["events"]
        kinds = [e["kind"] for e in history]
        assert "triton.outage" in kinds and "triton.reloaded" in kinds
        health = stack.api("GET", "/api/v1/health")
        assert health["checks"]["parts"]["ok"] is True
    print("\npart killed | back after (s) | model answers after (s) | failed client requests")
    for part, back_s, answer_s, failed in figures:
        print(f"{part} | {back_s:.1f} | {answer_s:.1f} | {failed}")

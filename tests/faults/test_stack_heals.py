"""The one-command stack heals itself: each part SIGKILLed under traffic comes back.

One ``python -m webapp.stack`` (what ``make run`` runs) on free ports with everything
embedded serves a small model while a client thread sends inference straight to Triton the
whole time. Then, one after the other, Triton, Redis, the worker, beat and the web process are
SIGKILLed (as the OOM killer or a crashing backend would). For each: the launcher restarts it,
nothing else is restarted, and the figures are printed (``-s`` shows them; the README's table
comes from this test): seconds until the part is back, until the served model answers again.
A switch job queued just before Redis dies still finishes (Redis keeps an append-only file).

Heavy (marked ``faults``; CI runs it once), about 90 s on 2 cores.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
import tritonclient.http as httpclient

from model_store import spawn
from tests.fixtures.triton import mlp_onnx_bytes
from tests.integration.test_make_run import ROOT, _fresh_machine_env, _wait_for_line

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
        self.env = _fresh_machine_env(tmp_path / "var")
        self.env |= {"HUB_RESTART_BACKOFF_MAX_SECONDS": "2", "SERVER_STATE_PUSH_SECONDS": "2"}
        self.var = Path(self.env["HUB_VAR_DIR"])
        self.base = f"http://127.0.0.1:{self.env['HUB_PORT']}"
        self.triton_url = f"127.0.0.1:{self.env['HUB_TRITON_HTTP_PORT']}"
        self.log = tmp_path / "stack.log"
        self.proc = spawn.start(
            [sys.executable, "-m", "webapp.stack"], cwd=ROOT, env=self.env,
            stdout=self.log.open("wb"), stderr=-2, new_session=True,
        )  # fmt: skip
        _wait_for_line(self.log, "Triton Model Hub is ready", self.proc, timeout=240)
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


class Traffic:
    """Inference straight to Triton, as clients do; records (time, ok)."""

    def __init__(self, url: str) -> None:
        self.url, self.results, self.stop = url, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        x = np.random.default_rng(1).standard_normal((1, 4)).astype(np.float32)
        deadline = time.monotonic() + 600
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                client = httpclient.InferenceServerClient(self.url, connection_timeout=2,
                                                          network_timeout=5)  # fmt: skip
                tensor = httpclient.InferInput("x", [1, 4], "FP32")
                tensor.set_data_from_numpy(x)
                client.infer("mlp", [tensor])
                self.results.append((time.monotonic(), True))
            except Exception:
                self.results.append((time.monotonic(), False))
                time.sleep(0.05)
            time.sleep(0.02)

    def answering_since(self, moment: float) -> float | None:
        """The first success after ``moment``, if any."""
        return next((t for t, ok in self.results if t > moment and ok), None)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    running = Stack(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def _wait(what: str, check, timeout: float = 120) -> float:  # type: ignore[no-untyped-def]
    started = time.monotonic()
    while not check():
        assert time.monotonic() - started < timeout, f"{what} did not happen in {timeout} s"
        time.sleep(0.1)
    return time.monotonic()


def test_every_part_killed_under_traffic_comes_back_alone(stack: Stack) -> None:
    stack.api("POST", "/api/v1/models", {"name": "mlp", "target": "onnxruntime"})
    boundary = "hub-fault-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="m.onnx"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + mlp_onnx_bytes()
        + f"\r\n--{boundary}--\r\n".encode()
    )
    job = stack.api("POST", "/api/v1/models/mlp/versions", raw=body,
                    content_type=f"multipart/form-data; boundary={boundary}")["job"]  # fmt: skip
    _wait(
        "the compile job", lambda: stack.api("GET", f"/api/v1/jobs/{job}")["state"] == "succeeded"
    )
    assert stack.api("POST", "/api/v1/models/mlp/serve?wait=true", {"version": 1})["state"] == (
        "succeeded"
    )
    traffic = Traffic(stack.triton_url)
    _wait("traffic", lambda: traffic.answering_since(0) is not None)
    figures = []
    try:
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
            failed = sum(1 for t, ok in traffic.results if killed <= t <= answering and not ok)
            figures.append((part, back - killed, answering - killed, failed))
        history = stack.api("GET", "/api/v1/models/mlp/history")["events"]
        kinds = [e["kind"] for e in history]
        assert "triton.outage" in kinds and "triton.reloaded" in kinds
        health = stack.api("GET", "/api/v1/health")
        assert health["checks"]["parts"]["ok"] is True
    finally:
        traffic.stop.set()
    print("\npart killed | back after (s) | model answers after (s) | failed client requests")
    for part, back_s, answer_s, failed in figures:
        print(f"{part} | {back_s:.1f} | {answer_s:.1f} | {failed}")

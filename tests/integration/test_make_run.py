"""`make run` as a user runs it: the stack comes up healthy, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from model_store import spawn

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SERVICE_VARS = (
    "DATABASE_URL",
    "REDIS_URL",
    "TRITON_URL",
    "TRITON_GRPC_URL",
    "TRITON_METRICS_URL",
    "TRITON_API_KEY",
)


def _free_ports(count: int) -> list[int]:
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()


def _fresh_machine_env(var_dir: Path) -> dict[str, str]:
    """The environment of a machine with no services: every part is embedded."""
    env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS}
    web, http, grpc, metrics = _free_ports(4)
    env |= {
        "HUB_VAR_DIR": str(var_dir),
        "HUB_PORT": str(web),
        "HUB_TRITON_HTTP_PORT": str(http),
        "HUB_TRITON_GRPC_PORT": str(grpc),
        "HUB_TRITON_METRICS_PORT": str(metrics),
        "HUB_ADMIN_PASSWORD": "make-run-test-password",
        "HUB_WORKER_CONCURRENCY": "1",
    }
    return env


def _wait_for_line(log: Path, needle: str, proc: subprocess.Popen[bytes], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if needle in text:
            return text
        if proc.poll() is not None:
            pytest.fail(f"the stack exited with {proc.returncode}:\n{text}")
        time.sleep(0.25)
    pytest.fail(f"no {needle!r} after {timeout} s:\n{log.read_text(errors='replace')}")


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def test_make_run_serves_a_healthy_stack_and_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    env = _fresh_machine_env(tmp_path / "var")
    log = tmp_path / "make-run.log"
    with log.open("wb") as out:
        # A session of its own, like a terminal: Ctrl-C goes to the whole foreground group.
        proc = spawn.start(
            ["make", "run"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            new_session=True,
        )  # fmt: skip
    try:
        _wait_for_line(log, "Triton Model Hub is ready", proc, timeout=240)
        children = _descendants(proc.pid)
        names = " ".join(" ".join(c.cmdline()) for c in children)
        for part in ("redis-server", "tritonserver", "celery", "worker", "beat", "uvicorn"):
            assert part in names, f"{part} is not running under make run"

        token = spawn.run(
            [sys.executable, "manage.py", "apitoken", "probe", "--role", "viewer"],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120,
        ).stdout.split()[-1]  # fmt: skip
        request = urllib.request.Request(
            f"http://127.0.0.1:{env['HUB_PORT']}/api/v1/health",
            headers={"Authorization": f"Token {token}"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            health = json.load(response)
        assert health["status"] == "ok", health
        assert set(health["checks"]) == {"web", "database", "broker", "workers", "triton", "parts"}
        assert all(check["ok"] for check in health["checks"].values()), health
        _assert_triton_is_locked_to_the_hub(env, token, children, tmp_path)
    finally:
        if proc.poll() is None:
            children = _descendants(proc.pid)
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(90)
    output = log.read_text(errors="replace")
    # make itself receives the SIGINT too and reports it after its child exited cleanly.
    assert proc.returncode in (0, -signal.SIGINT, 128 + signal.SIGINT), output
    assert "stopped every process" in output
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, f"left behind: {[p.info for p in alive]}"


def _assert_triton_is_locked_to_the_hub(
    env: dict[str, str], token: str, children: list[psutil.Process], tmp_path: Path
) -> None:
    """The embedded Triton got a key, the web process holds it, and no log shows it."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{env['HUB_PORT']}/api/v1/diagnostics",
        headers={"Authorization": f"Token {token}"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        checks = {c["id"]: c for c in json.load(response)["checks"]}
    assert checks["triton_access"]["state"] == "ok", checks["triton_access"]
    triton = next(c for c in children if "tritonserver" in " ".join(c.cmdline()))
    option = next(a for a in triton.cmdline() if a.startswith("--http-restricted-api="))
    key = option.rsplit("=", 1)[1]
    assert len(key) >= 32
    logs = [*(tmp_path / "var" / "log").glob("*.log"), tmp_path / "make-run.log"]
    for path in logs:
        assert key not in path.read_text(errors="replace"), f"{path} shows Triton's key"


def test_a_part_that_fails_to_start_is_named_and_the_others_are_stopped(tmp_path: Path) -> None:
    env = _fresh_machine_env(tmp_path / "var")
    # Nothing listens on port 1: the database step fails after Redis has started.
    env["DATABASE_URL"] = "postgres://hub@127.0.0.1:1/hub"
    proc = spawn.start(
        [sys.executable, "-m", "webapp.stack"], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, new_session=True,
    )  # fmt: skip
    seen: set[int] = set()
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            seen.update(c.pid for c in _descendants(proc.pid))
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    output, _ = proc.communicate(timeout=60)
    text = output.decode(errors="replace")
    assert proc.returncode == 1, text
    assert "could not start: manage.py migrate failed" in text
    assert "stopped every process" in text
    assert not [
        pid for pid in seen if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
    ]


def test_busy_ports_are_reported_before_anything_starts(tmp_path: Path) -> None:
    env = _fresh_machine_env(tmp_path / "var")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        env["HUB_PORT"] = str(holder.getsockname()[1])
        result = spawn.run(
            [sys.executable, "-m", "webapp.stack"], cwd=ROOT, env=env,
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 1
    assert f"web port {env['HUB_PORT']}" in result.stdout
    assert "redis: ready" not in result.stdout

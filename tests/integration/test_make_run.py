"""`make run` as a user runs it: the stack comes up healthy, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest

from model_store import spawn
from tests.fixtures.stack import ROOT, fresh_machine_env, wait_for_line
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.stack]
# The names tests/faults/conftest.py still imports from here.
_fresh_machine_env, _wait_for_line = fresh_machine_env, wait_for_line


def _descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def test_make_run_serves_a_healthy_stack_and_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    env = fresh_machine_env(tmp_path / "var")
    log = tmp_path / "make-run.log"
    with log.open("wb") as out:
        # A session of its own, like a terminal: Ctrl-C goes to the whole foreground group.
        proc = spawn.start(
            ["make", "run"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            new_session=True,
        )  # fmt: skip
    try:
        wait_for_line(log, "Triton Model Hub is ready", proc, timeout=240)
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
        _assert_the_limits_have_a_redis_without_fsync(tmp_path / "var")
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
    env = fresh_machine_env(tmp_path / "var")
    # Nothing listens on port 1: the database step fails after Redis has started.
    env["DATABASE_URL"] = "postgres://hub@127.0.0.1:1/hub"
    proc = spawn.start(
        [sys.executable, "-m", "webapp.stack"], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, new_session=True,
    )  # fmt: skip
    seen: set[int] = set()

    def exited_watching_its_children() -> bool:
        try:
            seen.update(c.pid for c in _descendants(proc.pid))
        except psutil.NoSuchProcess:
            return True
        return proc.poll() is not None

    wait_until(exited_watching_its_children, 60, message="the stack did not exit")
    output, _ = proc.communicate(timeout=60)
    text = output.decode(errors="replace")
    assert proc.returncode == 1, text
    assert "could not start: manage.py migrate failed" in text
    assert "stopped every process" in text
    assert not [
        pid for pid in seen if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
    ]


def test_busy_ports_are_reported_before_anything_starts(tmp_path: Path) -> None:
    env = fresh_machine_env(tmp_path / "var")
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


def _assert_the_limits_have_a_redis_without_fsync(var_dir: Path) -> None:
    """Per-call counters live apart from the broker, whose every write is fsynced."""
    import redis

    shared = json.loads((var_dir / "run" / "connections.json").read_text())["settings"]
    broker = redis.Redis.from_url(shared["REDIS_URL"])
    limits = redis.Redis.from_url(shared["LIMITS_REDIS_URL"])
    assert shared["LIMITS_REDIS_URL"] != shared["REDIS_URL"]
    assert broker.config_get("appendfsync")["appendfsync"] == "always"
    assert limits.config_get("appendonly")["appendonly"] == "no"

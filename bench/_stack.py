"""Shared plumbing for the benchmarks: a private stack, a keep-alive API client, results.

Not a test helper: nothing here asserts timings. Everything talks to 127.0.0.1 only.

* :class:`LocalStack` starts ``python -m webapp.stack`` (what ``make run`` runs) in a temporary
  ``HUB_VAR_DIR`` on free ports, with every part embedded (no ``DATABASE_URL``/``REDIS_URL``/
  ``TRITON_URL``), issues an operator API token, and stops the whole stack with SIGINT to its
  process group, like Ctrl-C in a terminal.
* :class:`Api` is one ``http.client`` connection, kept alive across requests; it counts how
  many TCP connections it had to open (a benchmark of "one keep-alive connection" checks it
  stayed 1).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}

if str(ROOT) not in sys.path:  # the benchmarks import model_store, like the workers do
    sys.path.insert(0, str(ROOT))

from model_store import spawn  # noqa: E402
from model_store.runtime.access import new_api_key  # noqa: E402

# The stack's environment is the one the tests build for `make run` (one place for both);
# FOREIGN_VARS is re-exported for metrics_scrape.
from tests.fixtures.stack import FOREIGN_VARS as FOREIGN_VARS  # noqa: E402
from tests.fixtures.stack import fresh_machine_env  # noqa: E402


def tell(text: str) -> None:
    print(f"[bench] {text}", flush=True)


# --------------------------------------------------------------------------- sizes and stats


def parse_size(text: str) -> int:
    """``"1G"`` -> 1073741824: K/M/G/T are binary (as in UPLOAD_MAX_BYTES); no suffix is bytes."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    factor = 1
    for suffix, power in (("K", 1), ("M", 2), ("G", 3), ("T", 4)):
        if text.endswith(suffix):
            factor, text = 1024**power, text[:-1]
            break
    value = int(float(text) * factor)
    if value <= 0:
        raise argparse.ArgumentTypeError("the size must be positive")
    return value


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


MIB = 1024 * 1024


# --------------------------------------------------------------------------- the stack


@dataclass
class LocalStack:
    """``python -m webapp.stack`` in ``var_dir`` on free ports; use as a context manager."""

    var_dir: Path
    worker_concurrency: int = 1
    start_timeout: float = 240.0
    #: Settings for this stack on top of a fresh machine's (e.g. a higher limit to measure).
    extra_env: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    token: str = ""
    log_path: Path = Path()
    _known: dict[int, psutil.Process] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LocalStack:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.var_dir.mkdir(parents=True, exist_ok=True)
        env = fresh_machine_env(self.var_dir, worker_concurrency=self.worker_concurrency)
        web = int(env["HUB_PORT"])
        env |= {
            "HUB_HOST": "127.0.0.1",
            "HUB_ADMIN_PASSWORD": "bench-admin-password",  # bench/load.py's --password default
            "PYTHONUNBUFFERED": "1",
            # Chosen here, not by the stack, so that a benchmark can load and unload too.
            "TRITON_API_KEY": new_api_key(),
            **self.extra_env,
        }
        self.env, self.port = env, web
        self.log_path = self.var_dir.parent / "stack.log"
        tell(f"starting the stack on 127.0.0.1:{web} (var dir {self.var_dir}) …")
        started = time.monotonic()
        with self.log_path.open("wb") as out:
            # Its own session, like a terminal: SIGINT to the group is Ctrl-C.
            self.proc = spawn.start(
                [sys.executable, "-m", "webapp.stack"],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                new_session=True,
            )
        deadline = time.monotonic() + self.start_timeout
        while True:
            self._remember_descendants()
            text = self.log_path.read_text(errors="replace")
            if "Triton Model Hub is ready" in text:
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"the stack exited with {self.proc.returncode}:\n{text}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the stack was not ready in {self.start_timeout} s:\n{text}")
            time.sleep(0.25)
        self._remember_descendants()
        tell(f"stack ready in {time.monotonic() - started:.1f} s")
        result = spawn.run(
            [sys.executable, "manage.py", "apitoken", "bench", "--role", "operator"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        self.token = result.stdout.split()[-1]

    def _remember_descendants(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(self.proc.pid).children(recursive=True):
                self._known.setdefault(child.pid, child)

    def web_process(self) -> psutil.Process:
        """The web server child (Uvicorn; the process that receives uploads)."""
        assert self.proc is not None
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if "webapp.edge.asgi:application" in child.cmdline():
                    return child
        raise RuntimeError("no web server process (webapp.edge.asgi:application) under the stack")

    def stop(self) -> None:
        """SIGINT to the stack's group, wait; then make sure none of its children survived."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        self._known_from(proc)
        if proc.poll() is None:
            tell("stopping the stack (SIGINT) …")
        # Only processes this stack started (remembered by pid and start time via psutil).
        stop_group(proc, list(self._known.values()), "the stack", wait_s=120)
        tell(f"stack stopped (exit code {proc.returncode})")

    def _known_from(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            with contextlib.suppress(psutil.NoSuchProcess):
                for child in psutil.Process(proc.pid).children(recursive=True):
                    self._known.setdefault(child.pid, child)


def stop_group(
    proc: subprocess.Popen[bytes], known: list[psutil.Process], what: str, *, wait_s: float
) -> None:
    """SIGINT to ``proc``'s process group (if it still runs), SIGKILL after ``wait_s``; then
    kill any of ``known`` (its children, remembered while alive) that outlived it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            tell(f"{what} did not stop in {wait_s:.0f} s; sending SIGKILL to its group")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    _, alive = psutil.wait_procs(known, timeout=15)
    for left in alive:
        tell(f"{what}: killing a left-over child {left.pid}")
        with contextlib.suppress(psutil.Error):
            left.kill()
    psutil.wait_procs(alive, timeout=10)


def listening_process(port: int) -> psutil.Process | None:
    """The process listening on 127.0.0.1:``port`` (for ``--url`` mode), if visible to us."""
    with contextlib.suppress(psutil.Error):
        for conn in psutil.net_connections(kind="tcp"):
            listening = conn.status == psutil.CONN_LISTEN and conn.laddr
            if listening and conn.laddr.port == port and conn.pid:
                return psutil.Process(conn.pid)
    return None


# --------------------------------------------------------------------------- API client


class _CountingConnection(http.client.HTTPConnection):
    """Counts the TCP connections it opens (1 means every request reused the first)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connects = 0

    def connect(self) -> None:
        super().connect()
        self.connects += 1
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class ApiError(RuntimeError):
    pass


class Api:
    """One keep-alive HTTP/1.1 connection to the hub's API, authenticated with a token."""

    def __init__(self, url: str, token: str, timeout: float = 300.0) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or parts.hostname not in LOOPBACK_HOSTS:
            raise SystemExit(f"--url must be http://127.0.0.1:PORT (loopback only), not {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.token = token
        self.timeout = timeout
        self.conn = _CountingConnection(self.host, self.port, timeout=timeout)

    @property
    def connections_opened(self) -> int:
        return self.conn.connects

    def raw(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        all_headers = {"Authorization": f"Token {self.token}", **(headers or {})}
        try:
            self.conn.request(method, path, body=body, headers=all_headers)
            response = self.conn.getresponse()
            data = response.read()
        except (http.client.HTTPException, OSError):
            self.conn.close()  # the next request reconnects (and is counted)
            raise
        if response.will_close:
            self.conn.close()
        return response.status, dict(response.getheaders()), data

    def call(self, method: str, path: str, payload: Any = None, expect: int = 200) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"} if body is not None else {}
        status, _, data = self.raw(method, path, body, headers)
        if status != expect:
            raise ApiError(f"{method} {path} -> {status}: {data[:500]!r}")
        return json.loads(data) if data else None

    def close(self) -> None:
        self.conn.close()


def loopback_url(text: str) -> str:
    """An argparse type: ``http://127.0.0.1:PORT`` (or localhost/[::1]); nothing else."""
    parts = urllib.parse.urlsplit(text)
    if parts.scheme != "http" or parts.hostname not in LOOPBACK_HOSTS:
        raise argparse.ArgumentTypeError(f"must be http://127.0.0.1:PORT (loopback), not {text!r}")
    return text.rstrip("/")


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        type=loopback_url,
        help="use an already running stack at this loopback URL (e.g. http://127.0.0.1:8080) "
        "instead of starting a private one; needs --token",
    )
    parser.add_argument("--token", help="an operator API token for --url")
    parser.add_argument(
        "--worker-concurrency",
        type=int,
        default=1,
        help="Celery worker processes of the private stack (default 1)",
    )
    parser.add_argument(
        "--keep-temp", action="store_true", help="keep the temp dir (stack logs, var dir)"
    )


@contextlib.contextmanager
def stack_from_args(
    args: argparse.Namespace, workdir: Path, env: dict[str, str] | None = None
) -> Iterator[tuple[str, str, LocalStack | None]]:
    """Yields (url, token, the private stack or None for --url); ``env``: extra settings of
    the private stack."""
    if args.url:
        if not args.token:
            raise SystemExit("--url needs --token (manage.py apitoken NAME --role operator)")
        yield args.url.rstrip("/"), args.token, None
        return
    stack = LocalStack(
        workdir / "var", worker_concurrency=args.worker_concurrency, extra_env=dict(env or {})
    )
    with stack:
        yield stack.url, stack.token, stack


@contextlib.contextmanager
def temp_workdir(prefix: str, keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        if keep:
            tell(f"kept {path}")
        else:
            import shutil

            shutil.rmtree(path, ignore_errors=True)


# --------------------------------------------------------------------------- results


def machine() -> dict[str, Any]:
    os_name = platform.platform()
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    git: dict[str, Any] = {}
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        run = {"cwd": ROOT, "capture_output": True, "text": True, "timeout": 10}
        git["commit"] = spawn.run(["git", "rev-parse", "HEAD"], **run).stdout.strip()  # type: ignore[call-overload]
        status = spawn.run(["git", "status", "--porcelain"], **run).stdout  # type: ignore[call-overload]
        git["changed_files"] = len(status.splitlines())
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git,
        "os": os_name,
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def write_results(name: str, data: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(exist_ok=True)
    ignore = RESULTS_DIR / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n!.gitignore\n")
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)

"""Launch a real ``tritonserver`` from the ``nvidia-pytriton`` wheel, without Docker.

The wheel ships Triton 2.51 with the Python backend, one Python backend stub per
CPython minor version and the shared libraries the stub needs. Three things have
to be arranged before Python-based models load
(docs/triton.md#embedded-triton-from-the-nvidia-pytriton-wheel):

* a backend directory holding ``python/`` (``libtriton_python.so``,
  ``triton_python_backend_utils.py`` and the stub for *this* interpreter) and our
  Python-based backends as ``<name>/model.py`` (``prepare_backend_dir``, in
  :mod:`model_store.runtime.triton_wheel` with the rest of locating the wheel's files);
* ``PATH`` starting with the virtualenv's ``bin`` so that the stub, which embeds
  Python, finds the virtualenv's site-packages;
* ``LD_LIBRARY_PATH`` containing ``nvidia_pytriton.libs`` (the stub has no RPATH
  to it and otherwise fails to find ``libcudart``).

``EmbeddedTriton`` runs the server in its own process group so that stopping it
also ends every stub process it spawned.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING

from model_store import spawn
from model_store.runtime import access
from model_store.runtime.errors import TritonStartError
from model_store.runtime.triton_wheel import (  # re-exported: callers import them from here
    find_tritonserver,
    prepare_backend_dir,
    triton_libs_dir,
)

if TYPE_CHECKING:
    from model_store.runtime.client import TritonRuntime

_LOG_TAIL_LINES = 40


# --------------------------------------------------------------------------- ports


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it). For tests."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free ports (sockets held open together so they differ)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.bind((host, 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR: a port left in TIME_WAIT by a previous run is not "in use";
        # a port with a listening socket still fails to bind.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def _client_host(host: str) -> str:
    """Address a client on this machine uses to reach a server bound to ``host``."""
    return "127.0.0.1" if host in ("", "0.0.0.0") else host


# --------------------------------------------------------------------------- the server


# Log phrases that name a start failure's cause better than the exit status does.
_START_FAILURE_CAUSES: tuple[tuple[str, str], ...] = (
    (
        "epoll_wait error: Bad file descriptor",
        "it aborted between fork and exec, in gRPC's fork handler of the process that "
        "launched it (a launcher bug: please report it with this log)",
    ),
    ("Address already in use", "one of its ports is already in use by another program"),
    ("cannot open shared object file", "a shared library it needs is missing"),
    ("failed to stat file", "a path on its command line does not exist"),
)
_TRITON_ERROR_LINE = re.compile(r"^E\d{4} [\d:.]+\s+\d+ [^\]]+\] (?P<message>.+)$")


def exit_headline(returncode: int, log_text: str) -> str:
    """One line saying why ``tritonserver`` ended before it was ready."""
    how = spawn.describe_exit(returncode)
    for phrase, cause in _START_FAILURE_CAUSES:
        if phrase in log_text:
            return f"tritonserver ended ({how}) before it was ready: {cause}."
    errors = [m["message"] for m in map(_TRITON_ERROR_LINE.match, log_text.splitlines()) if m]
    if errors:
        return f"tritonserver ended ({how}) before it was ready: {errors[-1].strip()}"
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    last = f": {lines[-1]}" if lines else " and wrote nothing to its log"
    return f"tritonserver ended ({how}) before it was ready{last}"


class EmbeddedTriton:
    """One ``tritonserver`` process serving ``repository`` in explicit control mode.

    Usage::

        with EmbeddedTriton(repo, backends) as triton:   # start() + wait_ready()
            runtime = triton.runtime()
            runtime.load("my_model")

    Flags chosen and why:

    * ``--model-control-mode=explicit``: the dashboard decides what is loaded.
    * ``--exit-on-error=false``: one model that fails to load must not take
      the server down with it.
    * ``--strict-readiness`` defaults to false here: server readiness then means
      "the server can take requests", while per-model state comes from the
      repository index. With true, one failed model would mark the whole server
      unready and the health page would blame Triton for a model's fault.
    * ``--pinned-memory-pool-byte-size=0``: no CUDA here; skips a doomed
      pinned-memory allocation and its warning.
    * ``--backend-config=python,shm-region-prefix-name=<unique>``: the Python
      backend names its shared-memory regions with a fixed prefix by default,
      so two Tritons on one host (a developer's ``make run`` and the test
      suite) would otherwise trample each other's regions.
    * ``--http-restricted-api`` / ``--grpc-restricted-protocol`` with ``api_key``:
      only callers holding the key may list, load or unload models (and change
      trace or log settings); see ``model_store.runtime.access``. Without a
      given key each launcher makes a random one, so each ``make run`` and each
      test session has its own; ``runtime()`` carries it, and ``api_key`` is
      there for the stack to hand to the web and worker processes. The log's
      command line shows ``***`` in its place.

    ``env`` adds (or overrides) variables in the server's environment, which
    its Python stubs inherit: e.g. ``PYTHONPATH`` for a module a backend
    imports, such as pyACL's ``acl``.

    ``kill_with_parent`` sets PR_SET_PDEATHSIG so the server dies with us. Linux
    fires it when the *thread* that started the process exits, so call
    ``start()`` from a long-lived thread (the main thread) or pass False.
    """

    def __init__(
        self,
        repository: Path,
        backends_dir: Path,
        http_port: int = 8000,
        grpc_port: int = 8001,
        metrics_port: int = 8002,
        host: str = "127.0.0.1",
        log_path: Path | None = None,
        extra_args: Sequence[str] = (),
        *,
        model_load_thread_count: int = 2,
        strict_readiness: bool = False,
        exit_timeout_secs: int = 10,
        log_verbose: int = 0,
        workdir: Path | None = None,
        prepare_backends: bool = True,
        kill_with_parent: bool = True,
        tritonserver: Path | None = None,
        env: Mapping[str, str] | None = None,
        api_key: str | None = None,
    ) -> None:
        self.repository = Path(repository).resolve()
        self.backends_dir = Path(backends_dir).resolve()
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.metrics_port = metrics_port
        self.host = host
        self._configured_log_path = Path(log_path).resolve() if log_path is not None else None
        #: The log file of the current (or last) run; chosen by ``start()``.
        self.log_path = self._configured_log_path
        self.extra_args = tuple(extra_args)
        self.model_load_thread_count = model_load_thread_count
        self.strict_readiness = strict_readiness
        self.exit_timeout_secs = exit_timeout_secs
        self.log_verbose = log_verbose
        self.workdir = Path(workdir).resolve() if workdir is not None else None
        self.prepare_backends = prepare_backends
        self.kill_with_parent = kill_with_parent
        self.tritonserver = tritonserver
        #: Extra variables for the server and its Python stubs (set last, so they win).
        self.extra_env = dict(env or {})
        #: The key Triton's restricted APIs expect; secret, never logged or shown in repr.
        self.api_key = self._checked_key(api_key) if api_key else access.new_api_key()
        self.started_at: float | None = None
        self.ready_after: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._own_workdir: Path | None = None
        self._log_offset = 0
        self._shm_prefix = f"tmh_{os.getpid()}_{uuid.uuid4().hex[:8]}_"

    @staticmethod
    def _checked_key(api_key: str) -> str:
        try:
            return access.validate_api_key(api_key)
        except ValueError as exc:
            raise TritonStartError(str(exc)) from None

    # ----------------------------------------------------------------- addresses

    @property
    def urls(self) -> dict[str, str]:
        """``host:port`` for each endpoint, as tritonclient wants them (no scheme)."""
        host = _client_host(self.host)
        return {
            "http": f"{host}:{self.http_port}",
            "grpc": f"{host}:{self.grpc_port}",
            "metrics": f"{host}:{self.metrics_port}",
        }

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def exit_status(self) -> int | None:
        """The server's exit status once it has ended; None while it runs (or before start)."""
        return self._proc.poll() if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def runtime(self, timeout: float = 30.0) -> TritonRuntime:
        """A ``TritonRuntime`` client pointed at this server."""
        from model_store.runtime.client import TritonRuntime

        urls = self.urls
        return TritonRuntime(
            http_url=urls["http"],
            grpc_url=urls["grpc"],
            metrics_url=urls["metrics"],
            timeout=timeout,
            api_key=self.api_key,
        )

    # ----------------------------------------------------------------- command line

    def command(self) -> list[str]:
        """The full ``tritonserver`` argument list; it holds the key: log ``redact_args(...)``."""
        binary = self.tritonserver or find_tritonserver()
        return [
            str(binary),
            f"--model-repository={self.repository}",
            f"--backend-directory={self.backends_dir}",
            "--model-control-mode=explicit",
            f"--http-address={self.host}",
            f"--http-port={self.http_port}",
            f"--grpc-address={self.host}",
            f"--grpc-port={self.grpc_port}",
            "--allow-metrics=true",
            "--allow-gpu-metrics=false",
            "--allow-cpu-metrics=true",
            f"--metrics-address={self.host}",
            f"--metrics-port={self.metrics_port}",
            f"--strict-readiness={str(self.strict_readiness).lower()}",
            "--exit-on-error=false",
            f"--model-load-thread-count={self.model_load_thread_count}",
            f"--exit-timeout-secs={self.exit_timeout_secs}",
            "--pinned-memory-pool-byte-size=0",
            f"--backend-config=python,shm-region-prefix-name={self._shm_prefix}",
            f"--log-verbose={self.log_verbose}",
            *access.restricted_api_args(self.api_key),
            *self.extra_args,
        ]

    def environment(self) -> dict[str, str]:
        """Environment for the server: venv ``bin`` first on PATH, wheel libs on LD_LIBRARY_PATH."""
        env = dict(os.environ)
        venv_bin = str(Path(sys.executable).parent)
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin]
        env["PATH"] = os.pathsep.join([venv_bin, *path])
        libs = str(triton_libs_dir())
        ld = [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p and p != libs]
        env["LD_LIBRARY_PATH"] = os.pathsep.join([libs, *ld])
        # Output of our backends' print() should reach the log promptly.
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(self.extra_env)
        return env

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Launch the server and return at once; see ``wait_ready``."""
        if self.is_running():
            raise TritonStartError(f"tritonserver already running (pid {self.pid})")
        if not self.repository.is_dir():
            raise TritonStartError(f"model repository {self.repository} is not a directory")
        for name, port in (
            ("HTTP", self.http_port),
            ("gRPC", self.grpc_port),
            ("metrics", self.metrics_port),
        ):
            # Checked up front because wait_ready could otherwise find *another*
            # server on that port healthy before ours fails to bind.
            if _port_in_use(self.host, port):
                raise TritonStartError(f"{name} port {self.host}:{port} is already in use")
        if self.prepare_backends:
            prepare_backend_dir(self.backends_dir)
        workdir = self._make_workdir()
        self.log_path = self._configured_log_path or workdir / "tritonserver.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log_path.open("ab")
        cmd = self.command()
        shown = " ".join(access.redact_args(cmd))  # the key stays out of the log
        self._log_file.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} $ {shown}\n".encode())
        self._log_file.flush()
        self._log_offset = self._log_file.tell()
        self.started_at = time.monotonic()
        self.ready_after = None
        try:
            self._proc = spawn.start(
                cmd,
                cwd=workdir,
                env=self.environment(),
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                # Own session = own process group: stop() signals the whole group,
                # which includes the Python backend stubs Triton forks.
                new_session=True,
                # Without it a crashed or SIGKILLed dashboard would leave tritonserver
                # holding the ports, and the next start would fail "address in use".
                die_with_parent=signal.SIGKILL if self.kill_with_parent else None,
            )
        except OSError as exc:
            self._close_log()
            self._remove_own_workdir()
            raise TritonStartError(f"could not execute tritonserver: {exc}") from exc

    def _make_workdir(self) -> Path:
        # The server's CWD must not be inside the repository: some backends (GE)
        # write files into the CWD, which Triton would then read as model files.
        if self.workdir is None:
            self._own_workdir = Path(tempfile.mkdtemp(prefix="tritonserver-"))
            return self._own_workdir
        workdir = self.workdir
        if workdir == self.repository or self.repository in workdir.parents:
            raise TritonStartError(
                f"working directory {workdir} is inside the model repository {self.repository}"
            )
        workdir.mkdir(parents=True, exist_ok=True)
        return workdir

    def _remove_own_workdir(self) -> None:
        if self._own_workdir is not None:
            shutil.rmtree(self._own_workdir, ignore_errors=True)
            self._own_workdir = None

    def wait_ready(self, timeout: float = 60.0, interval: float = 0.1) -> float:
        """Poll ``/v2/health/ready`` until 200; return seconds since ``start()``.

        Fails fast with ``TritonStartError`` (carrying the log tail) when the
        process exits, and on timeout.
        """
        if self._proc is None:
            raise TritonStartError("tritonserver was not started")
        url = f"http://{self.urls['http']}/v2/health/ready"
        deadline = time.monotonic() + timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                summary = self._failure_summary()
                raise TritonStartError(
                    f"{exit_headline(code, summary)}\n{summary}",
                    headline=exit_headline(code, summary),
                )
            if self._probe(url):
                # Re-check: a stray server on our port must not pass for ours.
                if self._proc.poll() is None:
                    assert self.started_at is not None
                    self.ready_after = time.monotonic() - self.started_at
                    return self.ready_after
                continue
            if time.monotonic() >= deadline:
                raise TritonStartError(
                    f"tritonserver not ready after {timeout:.0f} s; "
                    f"last log lines:\n{self.log_tail()}"
                )
            time.sleep(interval)

    @staticmethod
    def _probe(url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=1.0) as resp:  # noqa: S310 - fixed http URL
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, timeout: float = 15.0) -> int | None:
        """Stop the server and everything it spawned; return its exit status.

        SIGTERM goes to tritonserver alone first, so it can unload models and
        shut its stubs down in order (signalling the stubs at the same moment
        would make it log spurious stub failures). Whatever remains of the
        process group after that, or after ``timeout``, gets SIGKILL.
        """
        proc = self._proc
        if proc is None:
            return None
        pgid = proc.pid  # start_new_session made the server its group leader
        try:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
                # Past the timeout, the SIGKILL below finishes the job.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=timeout)
            self._kill_group(pgid)
            returncode = proc.wait(timeout=10)
        finally:
            self._proc = None
            self._close_log()
            self._remove_own_workdir()
        return returncode

    @staticmethod
    def _kill_group(pgid: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def _failure_summary(self) -> str:
        """What to show when the server died: the log of this run, minus the usage text.

        On a bad command line tritonserver prints one line naming the problem
        followed by ~200 lines of usage; the tail alone would hide the cause.
        """
        if self.log_path is None or not self.log_path.is_file():
            return "(no log)"
        with self.log_path.open("rb") as fh:
            fh.seek(self._log_offset)
            text = fh.read().decode("utf-8", "replace")
        head, usage, _ = text.partition("Usage: tritonserver")
        if usage:
            return head.strip() or "(invalid command line)"
        return "\n".join(text.splitlines()[-_LOG_TAIL_LINES:])

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the server log (empty if there is none)."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        with self.log_path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read()
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])

    # ----------------------------------------------------------------- context manager

    def __enter__(self) -> EmbeddedTriton:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running() else "stopped"
        return f"<EmbeddedTriton {self.urls['http']} repo={self.repository} {state}>"

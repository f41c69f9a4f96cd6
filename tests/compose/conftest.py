"""The compose stack for real: images from ``make compose-images``, docker-compose, HTTPS.

Each test module brings up its own compose project (a unique ``-p`` name, its own env file with
fresh secrets and free loopback ports) from the checkout's compose files, and takes it down
with ``down -v``. The stack is reached only through the ports it publishes on 127.0.0.1 (the
proxy's HTTPS, with Caddy's internal CA trusted for this client only) and through
``docker-compose exec``. Needs a Docker engine and docker-compose (or `docker compose`);
without them the suite is skipped with the reason. docs/testing.md gives its budget.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import secrets
import shutil
import ssl
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from model_store import spawn
from tests.fakes.toolkit import make_fake_toolkit
from tests.fixtures.ports import free_ports
from tests.fixtures.stack import ROOT

DEMO = ROOT / "demo"
#: The stand-in NPU driver's group (any id the host does not use for something else will do).
DRIVER_GID = 4711
#: The device nodes of a one-chip Ascend host.
NPU_NODES = ("davinci0", "davinci_manager", "devmm_svm", "hisi_hdc")
COFFEE = DEMO / "images" / "coffee.png"


def _load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "hub_image_build", ROOT / "deploy/images/build.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


builder = _load_builder()


def compose_command() -> list[str] | None:
    """docker-compose 1.x, else `docker compose` v2, else None."""
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        done = spawn.run(["docker", "compose", "version"], capture_output=True, timeout=60)
        if done.returncode == 0:
            return ["docker", "compose"]
    return None


def _engine_problem() -> str | None:
    if shutil.which("docker") is None:
        return "no docker command"
    if compose_command() is None:
        return "neither docker-compose nor `docker compose`"
    done = spawn.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return f"the Docker engine does not answer: {done.stderr.strip()[:200]}"
    return None


def wait_for(what: str, check: Callable[[], Any], timeout: float, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (OSError, urllib.error.URLError, ValueError) as exc:
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"{what} did not happen within {timeout:.0f} s (last: {last!r})")


@pytest.fixture(scope="session")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every image the compose files use, built (or found in the engine's cache) once."""
    problem = _engine_problem()
    if problem:
        # CI installs and starts the engine (.ci/run): there a missing one is a failure.
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"compose suite: {problem}")
    scratch = tmp_path_factory.mktemp("compose-images")
    started = time.monotonic()
    spawn.run(
        [sys.executable, str(ROOT / "deploy/images/build.py"),
         "--env-file", str(scratch / "first.env")],
        check=True, cwd=ROOT, timeout=1800,
    )  # fmt: skip
    print(f"compose images ready in {time.monotonic() - started:.0f} s")
    first = (scratch / "first.env").read_text()
    assert (scratch / "first.env").stat().st_mode & 0o777 == 0o600
    assert "HUB_IMAGE=" in first and "SECRET_KEY=" in first
    return {name: os.environ.get(name) or tag for name, tag in builder.LOCAL_IMAGES.items()}


def shared_tmp(prefix: str) -> Path:
    """A folder the containers' users (uid 10001) may read: pytest's own are 0700."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def host(images: dict[str, str]) -> Iterator[dict[str, str]]:
    """An "Atlas host" on this machine: device nodes, the CANN tree, the driver's files."""
    folder = shared_tmp("hub-compose-ascend-")
    dev = folder / "dev"
    dev.mkdir(mode=0o755)
    for name in NPU_NODES:
        node = dev / name
        os.mknod(node, 0o660 | stat.S_IFCHR, os.makedev(1, 3))
        os.chown(node, 0, DRIVER_GID)
        node.chmod(0o660)
    root = folder / "Ascend"
    make_fake_toolkit(root, copy=True, python="/opt/venv/bin/python")
    info = folder / "ascend_install.info"
    info.write_text(f"Driver_Install_Path_Param={root}\n")
    (folder / "dcmi").mkdir()
    for path in (folder, *folder.rglob("*")):
        if not path.is_char_device():
            path.chmod(
                path.stat().st_mode | 0o055 if path.is_dir() else path.stat().st_mode | 0o044
            )
    yield {
        "folder": str(folder),
        "ASCEND_ROOT": str(root),
        "ASCEND_DEVICE": str(dev / "davinci0"),
        "ASCEND_DEV_DIR": str(dev),
        "NPU_SMI_PATH": str(root / "driver" / "tools" / "npu-smi"),
        "ASCEND_INSTALL_INFO": str(info),
        "ASCEND_DCMI_DIR": str(folder / "dcmi"),
    }
    shutil.rmtree(folder, ignore_errors=True)


class Stack:
    """One compose project from the checkout's files, with its own env file."""

    def __init__(
        self,
        name: str,
        files: list[str],
        settings: dict[str, str],
        folder: Path,
        project_dir: Path = ROOT,
    ) -> None:
        self.name = name
        self.folder = folder
        self.env_file = folder / "stack.env"
        self.settings = {**settings, "HUB_ENV_FILE": str(self.env_file)}
        builder.write_env(self.env_file, self.settings)
        self.command = [*(compose_command() or []), "-p", name, "--project-directory",
                        str(project_dir), "--env-file", str(self.env_file)]  # fmt: skip
        for file in files:
            self.command += ["-f", str(ROOT / file)]
        self.https_port = int(self.settings.get("HUB_HTTPS_PORT", 0))  # a node has none
        self._ssl: ssl.SSLContext | None = None

    def compose(self, *args: str, check: bool = True, timeout: float = 600,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
        # Only the env file decides: a developer's shell must not leak settings in.
        clean = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DOCKER_HOST")}
        done = spawn.run(
            [*self.command, *args], capture_output=True, text=True, timeout=timeout,
            cwd=ROOT, env={**clean, **(env or {})}, check=False,
        )  # fmt: skip
        if check and done.returncode != 0:
            output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            raise AssertionError(f"{' '.join(args)} failed ({done.returncode}):\n{output}")
        return done

    def exec(self, service: str, *command: str, timeout: float = 300) -> str:
        return self.compose("exec", "-T", service, *command, timeout=timeout).stdout

    def container(self, service: str) -> str:
        return self.compose("ps", "-q", service).stdout.strip()

    def health(self, service: str) -> str:
        """The engine's verdict of the service's healthcheck (``healthy``, ``starting``, ...)."""
        return spawn.run(
            ["docker", "inspect", "-f", "{{.State.Health.Status}}", self.container(service)],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()  # fmt: skip

    def wait_all_healthy(self, timeout: float = 240) -> None:
        """Every long-running service's own healthcheck passes."""
        services = self.compose("config", "--services").stdout.split()
        running = [s for s in services if s not in ("prepare", "migrate") and self.container(s)]

        def all_healthy() -> bool:
            return all(self.health(s) == "healthy" for s in running)

        wait_for(f"{', '.join(running)} healthy", all_healthy, timeout, interval=3)

    def logs(self, *services: str) -> str:
        return self.compose("logs", "--no-color", "--tail=200", *services, check=False).stdout

    def up(self) -> None:
        self.compose("up", "-d", timeout=900)

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", check=False, timeout=300)

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, networks and volumes of this project that the engine still has."""
        label = f"label=com.docker.compose.project={self.name}"
        found = {}
        for kind, command in (("containers", ["ps", "-aq"]), ("networks", ["network", "ls", "-q"]),
                              ("volumes", ["volume", "ls", "-q"])):  # fmt: skip
            out = spawn.run(["docker", *command, "--filter", label], capture_output=True,
                            text=True, check=True, timeout=60).stdout.split()  # fmt: skip
            found[kind] = out
        return found

    # --- HTTPS through the proxy --------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        """Trusts this stack's Caddy internal CA, and nothing else."""
        if self._ssl is None:
            root = self.exec("proxy", "cat", "/data/caddy/pki/authorities/local/root.crt")
            context = ssl.create_default_context(cadata=root)
            self._ssl = context
        return self._ssl

    def url(self, path: str) -> str:
        return f"https://localhost:{self.https_port}{path}"

    def request(self, method: str, path: str, body: Any = None, *, token: str | None = None,
                raw: bytes | None = None, content_type: str = "application/json",
                timeout: float = 120) -> tuple[int, Any]:  # fmt: skip
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type}
        if token:
            headers["Authorization"] = f"Token {token}"
        request = urllib.request.Request(self.url(path), data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self.ssl_context()) as r:
                status, payload = r.status, r.read()
        except urllib.error.HTTPError as error:
            status, payload = error.code, error.read()
        try:
            return status, json.loads(payload) if payload else {}
        except ValueError:
            return status, payload.decode(errors="replace")

    def wait_healthy(self, timeout: float = 300) -> None:
        def live() -> bool:
            return self.request("GET", "/api/v1/health/live", timeout=10)[0] == 200

        try:
            wait_for("the hub answering through the proxy", live, timeout, interval=2)
            self.wait_all_healthy(timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.logs()}") from exc


class Api:
    """The hub's API through the proxy, with one token."""

    def __init__(self, stack: Stack, token: str) -> None:
        self.stack = stack
        self.token = token

    def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
        return self.stack.request(method, "/api/v1" + path, body, token=self.token, **kwargs)

    def ok(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        status, answer = self.call(method, path, body, **kwargs)
        assert 200 <= status < 300, f"{method} {path}: {status} {answer}"
        return answer

    def wait_job(self, job_id: str, timeout: float = 300) -> dict[str, Any]:
        def ended() -> dict[str, Any] | None:
            job = self.ok("GET", f"/jobs/{job_id}")
            return job if job["state"] in ("succeeded", "failed", "cancelled") else None

        job: dict[str, Any] = wait_for(f"job {job_id} ending", ended, timeout)
        return job

    def infer_photo(self, model: str, timeout: float = 60) -> dict[str, Any]:
        """Try it with the coffee photo: the whole answer."""
        photo = base64.b64encode(COFFEE.read_bytes()).decode()
        answer: dict[str, Any] = self.ok("POST", f"/models/{model}/infer",
                                         {"inputs": {"input": {"image_b64": photo}}},
                                         timeout=timeout)  # fmt: skip
        return answer

    def classify(self, model: str, timeout: float = 60) -> dict[str, Any]:
        """The best class for the coffee photo."""
        first: dict[str, Any] = self.infer_photo(model, timeout)["outputs"][0]["top_k"][0]
        return first


def operator_token(stack: Stack, name: str) -> str:
    """A token minted the way an operator does it: manage.py in the web container."""
    out = stack.exec("web", "python", "manage.py", "apitoken", name, "--role", "operator")
    return out.split()[-1]


def stack_settings(images: dict[str, str], **extra: str) -> dict[str, str]:
    """A first .env as make compose-images writes it, on free loopback ports."""
    settings = builder.env_settings(images)
    https, http, metrics = free_ports(3)
    settings.update(
        HUB_HTTPS_PORT=str(https),
        HUB_HTTP_PORT=str(http),
        TRITON_METRICS_HOST_PORT=str(metrics),
        # Fast enough to notice a restarted Triton within the test's patience.
        HOST_PROBE_SECONDS="15",
    )
    settings.update(extra)
    return settings


def project_name(kind: str) -> str:
    return f"hubtest{kind}{os.getpid()}{secrets.token_hex(2)}"

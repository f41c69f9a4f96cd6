"""The production stack: docker-compose.yml, Dockerfile, .dockerignore and deploy/.

The compose file is parsed with PyYAML and its ``${...}`` references are resolved the way
compose resolves them with nothing set (defaults taken, required ones given a dummy), so these
tests need no Docker. One test asks the real ``docker compose`` when it is installed. The
entrypoint and health-check helpers are run for real, against fakes in a temporary directory.
"""

from __future__ import annotations

import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any

import pytest
import yaml

from model_store import spawn
from model_store.runtime.access import RESTRICTED_OPTIONS, restricted_api_args

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
# The opt-in override that gives the hub's own worker and Triton the host's NPUs.
HUB_ASCEND_FILE = ROOT / "deploy" / "hub-ascend.yml"
HUB_WORKER_NPU_FILE = ROOT / "deploy" / "hub-ascend-worker-npu.yml"
HUB_VNPU_FILE = ROOT / "deploy" / "hub-ascend-vnpu.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
HUB_ENTRYPOINT = ROOT / "deploy" / "entrypoint.sh"
TRITON_ENTRYPOINT = ROOT / "deploy" / "triton" / "entrypoint.sh"
HEALTHCHECK = ROOT / "deploy" / "healthcheck.py"
CADDYFILE = ROOT / "deploy" / "proxy" / "Caddyfile"
PROXY_ENTRYPOINT = ROOT / "deploy" / "proxy" / "entrypoint.sh"
ENV_EXAMPLE = ROOT / "deploy" / "production.env.example"
ATC_REQUIREMENTS = ROOT / "deploy" / "atc-python-requirements.txt"
GITIGNORE = ROOT / ".gitignore"

EXPECTED_SERVICES = {"postgres", "redis", "web", "proxy", "worker", "beat", "triton"}
TRITON_CONTROL_PORTS = {8000, 8001}
LOOPBACK = {"127.0.0.1", "::1", "[::1]", "localhost"}
# What the GE backend's guide maps into the container (docs/ge-backend.md#runtime-environment).
ASCEND_CONTROL_DEVICES = {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"}
ASCEND_DRIVER_MOUNTS = {
    "/usr/local/dcmi",
    "/usr/local/bin/npu-smi",
    "/usr/local/Ascend/driver/lib64",
    "/usr/local/Ascend/driver/version.info",
    "/etc/ascend_install.info",
}
REQUIRED_VARS = (
    "POSTGRES_PASSWORD",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "TRITON_API_KEY",
    "HUB_SITE_ADDRESS",
)
SECRET_VARS = ("POSTGRES_PASSWORD", "SECRET_KEY", "TRITON_API_KEY")
# Container ports of the proxy: HTTPS, and plain HTTP that only redirects to it.
PROXY_PORTS = {443, 80}
DUMMY = "dummy-required-value"

# `$$` first: it is an escaped dollar, not the start of a reference.
_REFERENCE = re.compile(
    r"\$\$"
    r"|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
)


# --- helpers ----------------------------------------------------------------------------------


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Resolve compose ``${VAR}``, ``${VAR:-default}``, ``${VAR:?error}`` and ``$$``."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group("name") or match.group("bare")
        op, arg = match.group("op") or "", match.group("arg") or ""
        current = env.get(name)
        is_set = current is not None and (current != "" or not op.startswith(":"))
        if op in {":-", "-"}:
            return current if is_set else arg  # type: ignore[return-value]
        if op in {":?", "?"}:
            return current if is_set else DUMMY  # type: ignore[return-value]
        if op in {":+", "+"}:
            return arg if is_set else ""
        return current or ""

    return _REFERENCE.sub(replace, value)


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def command_args(service: dict[str, Any]) -> list[str]:
    command = service.get("command") or []
    return command.split() if isinstance(command, str) else [str(part) for part in command]


def flag(args: list[str], name: str) -> str | None:
    for arg in args:
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
    return None


def mounts(service: dict[str, Any]) -> list[dict[str, Any]]:
    """Volumes of a service in long form: type, source, target, read_only."""
    result = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, dict):
            result.append(
                {
                    "type": entry.get("type", "volume"),
                    "source": str(entry.get("source", "")),
                    "target": str(entry["target"]),
                    "read_only": bool(entry.get("read_only", False)),
                }
            )
            continue
        parts = str(entry).split(":")
        source, target = (parts[0], parts[1]) if len(parts) > 1 else ("", parts[0])
        mode = parts[2] if len(parts) > 2 else ""
        kind = "bind" if source.startswith(("/", ".", "~")) else "volume"
        read_only = "ro" in mode.split(",")
        result.append({"type": kind, "source": source, "target": target, "read_only": read_only})
    return result


def _port_range(text: str) -> set[int]:
    low, _, high = text.partition("-")
    return set(range(int(low), int(high or low) + 1))


def published(service: dict[str, Any]) -> list[tuple[str, set[int]]]:
    """(host address, container ports) of each `ports` entry; "" means every interface."""
    result = []
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            target = str(entry["target"]).split("/")[0]
            result.append((str(entry.get("host_ip", "")), _port_range(target)))
            continue
        parts = str(entry).split("/")[0].rsplit(":", 2)
        host_ip = parts[0] if len(parts) == 3 else ""
        result.append((host_ip, _port_range(parts[-1])))
    return result


def merge_override(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``docker compose -f base -f override``, for the keys the overrides here use: a
    service's ``environment`` merged by name, ``devices`` and ``volumes`` by target."""
    merged = {**base, "services": {k: dict(v) for k, v in base["services"].items()}}
    for name, extra in (override.get("services") or {}).items():
        service = merged["services"].setdefault(name, {})
        for key, value in extra.items():
            if key == "environment":
                service[key] = {**environment(service), **environment(extra)}
            elif key in ("devices", "volumes"):
                service[key] = [*(service.get(key) or []), *value]
            else:
                service[key] = value
    return merged


def hub_with_ascend(
    env: dict[str, str], *, worker_npu: bool = False, vnpu: bool = False
) -> dict[str, dict[str, Any]]:
    """The services of docker-compose.yml with deploy/hub-ascend.yml (and, with
    ``worker_npu``, the opt-in deploy/hub-ascend-worker-npu.yml; with ``vnpu``,
    deploy/hub-ascend-vnpu.yml), interpolated."""
    merged = merge_override(
        yaml.safe_load(COMPOSE_FILE.read_text()), yaml.safe_load(HUB_ASCEND_FILE.read_text())
    )
    if worker_npu:
        merged = merge_override(merged, yaml.safe_load(HUB_WORKER_NPU_FILE.read_text()))
    if vnpu:
        merged = merge_override(merged, yaml.safe_load(HUB_VNPU_FILE.read_text()))
    return interpolate(merged, env=env)["services"]


def normalise(path: str) -> str:
    return str(PurePosixPath(path))


def load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def raw_text() -> str:
    return COMPOSE_FILE.read_text()


@pytest.fixture(scope="module")
def compose(raw_text: str) -> dict[str, Any]:
    document = yaml.safe_load(raw_text)
    assert isinstance(document, dict)
    return interpolate(document, env={})


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


@pytest.fixture(scope="module")
def triton(services: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return services["triton"]


@pytest.fixture(scope="module")
def ascend_services() -> dict[str, dict[str, Any]]:
    """The hub with the opt-in deploy/hub-ascend.yml: its worker and Triton on the NPUs."""
    return hub_with_ascend(env={})


@pytest.fixture(scope="module")
def model_repository(triton: dict[str, Any]) -> str:
    repository = flag(command_args(triton), "--model-repository")
    assert repository, "triton is started without --model-repository"
    return repository


@pytest.fixture(scope="module")
def model_mount(triton: dict[str, Any], model_repository: str) -> dict[str, Any]:
    """The named volume Triton reads its model repository from."""
    repo = PurePosixPath(model_repository)
    candidates = [
        m
        for m in mounts(triton)
        if m["type"] == "volume" and repo.is_relative_to(PurePosixPath(m["target"]))
    ]
    assert candidates, f"no named volume in triton holds {model_repository}"
    return max(candidates, key=lambda m: len(m["target"]))


# --- services and restart behaviour ------------------------------------------------------------


def test_expected_services_exist(services: dict[str, Any]) -> None:
    assert set(services) >= EXPECTED_SERVICES


def test_long_running_services_have_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    long_running = {name for name, svc in services.items() if svc.get("restart") != "no"}
    assert long_running >= EXPECTED_SERVICES
    for name in sorted(long_running):
        check = services[name].get("healthcheck")
        assert check, f"{name} has no healthcheck"
        assert not check.get("disable", False), f"{name} disables its healthcheck"
        test = check.get("test")
        assert test and test not in (["NONE"], "NONE"), f"{name} has an empty healthcheck"
        assert services[name].get("restart") in {"always", "unless-stopped", "on-failure"}


def test_one_shot_services_do_not_restart(services: dict[str, dict[str, Any]]) -> None:
    waited_for = {
        dep
        for svc in services.values()
        for dep, spec in (svc.get("depends_on") or {}).items()
        if isinstance(spec, dict) and spec.get("condition") == "service_completed_successfully"
    }
    assert "migrate" in waited_for
    for name in waited_for:
        # `restart: no` unquoted is YAML false, which compose rejects: it must be the string.
        assert services[name].get("restart") == "no", name


@pytest.mark.parametrize("name", ["web", "worker", "beat"])
def test_app_services_wait_for_healthy_postgres_and_redis(
    services: dict[str, dict[str, Any]], name: str
) -> None:
    depends = services[name].get("depends_on")
    assert isinstance(depends, dict), f"{name}: depends_on must use the long form with conditions"
    for dependency in ("postgres", "redis"):
        assert depends.get(dependency, {}).get("condition") == "service_healthy", (
            f"{name} must wait for {dependency} to be healthy"
        )
    assert depends.get("migrate", {}).get("condition") == "service_completed_successfully"


def test_web_runs_uvicorn_on_8080_and_publishes_nothing(
    services: dict[str, dict[str, Any]],
) -> None:
    web = services["web"]
    args = command_args(web)
    assert args[:2] == ["uvicorn", "webapp.edge.asgi:application"]
    assert {"--port=8080", "--http=httptools", "--ws=websockets-sansio"} <= set(args)
    assert not web.get("ports"), "web must only be reachable through the proxy"


def test_web_trusts_forwarded_headers_only_because_it_is_not_published(
    raw_text: str, services: dict[str, dict[str, Any]]
) -> None:
    """The client address (sign-in throttling) and scheme come from the proxy's headers."""
    args = command_args(services["web"])
    assert "--proxy-headers" in args
    assert flag(args, "--forwarded-allow-ips") == "*"
    assert not services["web"].get("ports")
    web_block = raw_text[raw_text.index("\n  web:\n") : raw_text.index("\n  proxy:\n")]
    comment = " ".join(web_block.replace("#", " ").split())
    assert "acceptable only because this port is not published" in comment


def test_worker_and_beat_commands(services: dict[str, dict[str, Any]]) -> None:
    assert command_args(services["worker"])[:4] == ["celery", "-A", "workers.celery", "worker"]
    assert command_args(services["beat"])[:4] == ["celery", "-A", "workers.celery", "beat"]
    one_shot = " ".join(command_args(services["migrate"]))
    assert "manage.py migrate --noinput" in one_shot
    assert "manage.py ensure_admin" in one_shot


# --- exposure and privileges ------------------------------------------------------------------


def test_triton_control_ports_are_not_published(triton: dict[str, Any]) -> None:
    for host_ip, ports in published(triton):
        assert not ports & TRITON_CONTROL_PORTS, "Triton's HTTP/gRPC (model control) is published"
        assert host_ip in LOOPBACK, f"Triton port {sorted(ports)} is published beyond loopback"
    exposed = {int(str(p).split("/")[0]) for p in triton.get("expose") or []}
    assert exposed >= TRITON_CONTROL_PORTS


def test_triton_restricts_its_repository_api_to_the_hubs_key(
    raw_text: str, services: dict[str, dict[str, Any]]
) -> None:
    # Resolved with a real key, so that Triton's flags and the hub's setting are seen to come
    # from the same variable.
    key = "k" * 64
    resolved = interpolate(yaml.safe_load(raw_text), env={"TRITON_API_KEY": key})["services"]
    args = command_args(resolved["triton"])
    assert set(restricted_api_args(key)) <= set(args), "Triton's repository API is not restricted"
    assert sum(arg.startswith(RESTRICTED_OPTIONS) for arg in args) == len(RESTRICTED_OPTIONS)
    for name in ("web", "worker", "beat", "migrate"):
        assert environment(resolved[name]).get("TRITON_API_KEY") == key, name
    # Required (`:?`), never silently empty: unset, compose stops (here: the dummy is filled in).
    restricted = flag(command_args(services["triton"]), "--http-restricted-api") or ""
    assert restricted.endswith(f"triton-hub-key={DUMMY}")


def test_only_the_proxy_is_published_beyond_loopback(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        if name == "proxy":
            continue
        for host_ip, ports in published(service):
            assert host_ip in LOOPBACK, f"{name} publishes {sorted(ports)} on {host_ip or 'all'}"
    for name in ("postgres", "redis", "web", "worker", "beat"):
        assert not services[name].get("ports"), f"{name} publishes a port"
    # What remains on loopback: Triton's read-only metrics port, nothing else.
    publishing = {name for name, service in services.items() if published(service)}
    assert publishing <= {"proxy", "triton"}


def test_the_proxy_publishes_https_and_the_redirect_port(
    raw_text: str, services: dict[str, dict[str, Any]]
) -> None:
    ports = published(services["proxy"])
    assert set().union(*(p for _, p in ports)) == PROXY_PORTS
    assert "${HUB_HTTPS_BIND:-0.0.0.0}:${HUB_HTTPS_PORT:-443}:443" in raw_text
    assert "${HUB_HTTP_BIND:-0.0.0.0}:${HUB_HTTP_PORT:-80}:80" in raw_text
    # Redirects point at the published HTTPS port, not at the container's 443.
    resolved = interpolate(yaml.safe_load(raw_text), env={"HUB_HTTPS_PORT": "8443"})
    proxy_env = environment(resolved["services"]["proxy"])
    assert proxy_env["HUB_PUBLIC_HTTPS_PORT"] == "8443"


def test_no_host_network_and_no_privileged(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        assert service.get("network_mode") != "host", name
        assert service.get("privileged") is not True, name
        assert service.get("pid") != "host", name
        assert service.get("ipc") != "host", name


def test_secrets_are_required_and_come_from_env_file(
    raw_text: str, services: dict[str, dict[str, Any]]
) -> None:
    for var in REQUIRED_VARS:
        assert re.search(r"\$\{" + var + r":\?[^}]+\}", raw_text), f"{var} should be ${{{var}:?}}"
    for name in ("web", "worker", "beat", "migrate"):
        env_file = services[name].get("env_file")
        files = env_file if isinstance(env_file, list) else [env_file]
        paths = [f["path"] if isinstance(f, dict) else f for f in files]
        assert ".env" in paths, f"{name} does not read .env"


# --- the TLS proxy ------------------------------------------------------------------------------


def caddyfile_directives() -> list[str]:
    """The Caddyfile's lines without comments and blank lines, stripped."""
    lines = []
    for line in CADDYFILE.read_text().splitlines():
        code = re.sub(r"(^|\s)#.*$", "", line).strip()
        if code:
            lines.append(code)
    return lines


@pytest.fixture(scope="module")
def proxy(services: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return services["proxy"]


def test_proxy_is_the_official_caddy_image(raw_text: str, proxy: dict[str, Any]) -> None:
    assert proxy["image"] == "caddy:2.11"
    assert "${HUB_PROXY_IMAGE:-caddy:2.11}" in raw_text


def test_proxy_mounts_its_caddyfile_and_entrypoint_read_only(proxy: dict[str, Any]) -> None:
    by_target = {m["target"]: m for m in mounts(proxy)}
    caddyfile = by_target.get("/etc/caddy/Caddyfile")
    assert caddyfile, "the Caddyfile is not mounted where the caddy image reads it"
    assert caddyfile["read_only"]
    assert normalise(caddyfile["source"]) == "deploy/proxy/Caddyfile"
    assert environment(proxy)["HUB_CADDYFILE"] == "/etc/caddy/Caddyfile"
    script = next(m for m in mounts(proxy) if m["target"] in (proxy.get("entrypoint") or []))
    assert script["read_only"]
    assert normalise(script["source"]) == "deploy/proxy/entrypoint.sh"
    assert PROXY_ENTRYPOINT.is_file() and CADDYFILE.is_file()


def test_proxy_reads_certificates_read_only_and_keeps_its_ca_in_a_volume(
    compose: dict[str, Any], proxy: dict[str, Any]
) -> None:
    by_target = {m["target"]: m for m in mounts(proxy)}
    assert by_target["/certs"]["read_only"]
    assert normalise(by_target["/certs"]["source"]) == "deploy/proxy/certs"  # HUB_TLS_DIR default
    data = by_target["/data"]
    assert data["type"] == "volume" and data["source"] in compose["volumes"]


def test_default_certificate_folder_stays_out_of_git_and_the_image() -> None:
    ignored = {line.strip() for line in DOCKERIGNORE.read_text().splitlines()}
    assert "deploy/proxy/certs" in ignored, "a key in deploy/proxy/certs would go into the image"
    assert "/deploy/proxy/certs/" in GITIGNORE.read_text().splitlines()


def test_proxy_defaults_to_caddys_internal_ca_and_never_passes_an_empty_tls(
    raw_text: str, proxy: dict[str, Any]
) -> None:
    assert environment(proxy)["HUB_TLS"] == "internal"
    document = yaml.safe_load(raw_text)
    empty = interpolate(document, env={"HUB_TLS": ""})["services"]["proxy"]
    assert environment(empty)["HUB_TLS"] == "internal"
    own = interpolate(document, env={"HUB_TLS": "/certs/cert.pem /certs/key.pem"})
    assert environment(own["services"]["proxy"])["HUB_TLS"] == "/certs/cert.pem /certs/key.pem"


def test_proxy_forwards_to_web_and_waits_for_it(
    services: dict[str, dict[str, Any]], proxy: dict[str, Any]
) -> None:
    host, _, port = environment(proxy)["HUB_UPSTREAM"].partition(":")
    assert host == "web"
    assert flag(command_args(services["web"]), "--port") == port
    assert proxy["depends_on"]["web"]["condition"] == "service_healthy"


def test_proxy_gets_no_secrets(raw_text: str, proxy: dict[str, Any]) -> None:
    assert "env_file" not in proxy, "the proxy must not read .env (it holds the hub's secrets)"
    key = "s" * 40
    document = yaml.safe_load(raw_text)
    resolved = interpolate(document, env=dict.fromkeys(SECRET_VARS, key))
    assert key not in str(resolved["services"]["proxy"])


def test_proxy_runs_without_privileges(proxy: dict[str, Any]) -> None:
    assert proxy.get("cap_drop") == ["ALL"]
    assert set(proxy.get("cap_add") or []) <= {"NET_BIND_SERVICE"}
    assert "no-new-privileges:true" in (proxy.get("security_opt") or [])
    assert proxy.get("read_only") is True


def test_proxy_healthcheck_asks_the_caddyfiles_health_site(proxy: dict[str, Any]) -> None:
    match = re.search(
        r"^http://:\{\$HUB_PROXY_HEALTH_PORT:(\d+)\} \{$", CADDYFILE.read_text(), re.M
    )
    assert match, "the Caddyfile has no health site"
    test = " ".join(proxy["healthcheck"]["test"])
    assert f"http://127.0.0.1:{match.group(1)}/healthz" in test


def test_caddyfile_settings() -> None:
    """What the proxy must do; tests/integration/test_proxy.py checks it against real Caddy."""
    lines = caddyfile_directives()
    for needed in (
        "admin off",
        "skip_install_trust",
        "tls {$HUB_TLS:internal}",
        "reverse_proxy {$HUB_UPSTREAM:web:8080} {",
        "flush_interval -1",
        "max_size {$HUB_PROXY_MAX_BODY:5GB}",
        "{$HUB_SITE_ADDRESS:localhost} {",
        "redir https://{host}:{$HUB_PUBLIC_HTTPS_PORT:443}{uri} 308",
    ):
        assert needed in lines, f"the Caddyfile lacks `{needed}`"
    # No timeout that could cut a long upload, a ?wait=true switch or a log download.
    code = "\n".join(lines)
    for forbidden in (
        "timeouts",
        "read_body",
        "read_timeout",
        "write_timeout",
        "write_idle",
        "response_header_timeout",
        "stream_timeout",
        "buffer_requests",
        "request_buffers",
    ):
        assert forbidden not in code, f"the Caddyfile sets {forbidden}"
    assert "trusted_proxies" not in code, "clients' own X-Forwarded-* must not be trusted"


def test_caddyfile_and_entrypoint_say_when_the_certificate_is_self_signed() -> None:
    assert "SELF-SIGNED" in CADDYFILE.read_text()
    script = PROXY_ENTRYPOINT.read_text()
    assert "SELF-SIGNED" in script and 'HUB_TLS="${HUB_TLS:-internal}"' in script


def test_env_example_configures_the_proxy() -> None:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key] = value
    for name in ("HUB_SITE_ADDRESS", "HUB_HTTPS_BIND", "HUB_HTTPS_PORT", "HUB_TLS", "HUB_TLS_DIR"):
        assert name in values, f"production.env.example lacks {name}"
    assert values["HUB_HTTPS_PORT"] == "443" and values["HUB_HTTP_PORT"] == "80"
    assert values["HTTPS"] == "true"
    site = values["HUB_SITE_ADDRESS"]
    assert values["CSRF_TRUSTED_ORIGINS"] == f"https://{site}"
    assert site in values["ALLOWED_HOSTS"].split(",")


# --- the model repository -----------------------------------------------------------------------


def test_model_volume_is_a_declared_named_volume(
    compose: dict[str, Any], model_mount: dict[str, Any]
) -> None:
    assert model_mount["source"] in (compose.get("volumes") or {})


def test_triton_reads_the_repository_read_only(model_mount: dict[str, Any]) -> None:
    assert model_mount["read_only"], "Triton must not be able to write into the model store"


@pytest.mark.parametrize("name", ["worker", "web"])
def test_model_volume_is_shared_with_hub_processes(
    services: dict[str, dict[str, Any]],
    model_mount: dict[str, Any],
    model_repository: str,
    name: str,
) -> None:
    service = services[name]
    shared = [m for m in mounts(service) if m["source"] == model_mount["source"]]
    assert shared, f"{name} does not mount the model volume {model_mount['source']}"
    store_root = environment(service).get("MODEL_STORE_ROOT")
    assert store_root, f"{name} has no MODEL_STORE_ROOT"
    # MODEL_STORE_ROOT/repository in this container is the directory Triton serves.
    mount = shared[0]
    hub_view = PurePosixPath(store_root, "repository").relative_to(PurePosixPath(mount["target"]))
    triton_view = PurePosixPath(model_repository).relative_to(PurePosixPath(model_mount["target"]))
    assert hub_view == triton_view


def test_worker_can_write_the_model_store(
    services: dict[str, dict[str, Any]], model_mount: dict[str, Any]
) -> None:
    shared = [m for m in mounts(services["worker"]) if m["source"] == model_mount["source"]]
    assert not shared[0]["read_only"]


def test_triton_working_dir_is_outside_the_model_store(
    triton: dict[str, Any], model_mount: dict[str, Any]
) -> None:
    workdir = triton.get("working_dir")
    assert workdir, "triton needs an explicit working_dir (GE writes files into it)"
    assert not PurePosixPath(workdir).is_relative_to(PurePosixPath(model_mount["target"]))


# --- Triton on Ascend ----------------------------------------------------------------------------


def test_triton_is_started_in_explicit_mode(triton: dict[str, Any]) -> None:
    args = command_args(triton)
    assert "tritonserver" in PurePosixPath(args[0]).name
    assert flag(args, "--model-control-mode") == "explicit"
    assert flag(args, "--backend-directory")


def test_triton_image_is_configurable(raw_text: str, triton: dict[str, Any]) -> None:
    assert re.search(r"image:\s*\$\{TRITON_IMAGE:-[^}]+\}", raw_text)
    assert triton["image"]


def test_the_hub_stack_itself_maps_no_npu(raw_text: str, services: dict[str, Any]) -> None:
    # An Ascend host runs a node (deploy/node/); the hub needs nothing Ascend.
    assert "/dev/davinci" not in raw_text
    for name, service in services.items():
        assert not service.get("devices"), f"{name} maps devices"
        assert not any("Ascend" in m["target"] for m in mounts(service)), name
    assert "ASCEND_ROOT" not in environment(services["worker"])


def test_the_ascend_override_touches_only_worker_and_triton() -> None:
    override = yaml.safe_load(HUB_ASCEND_FILE.read_text())
    assert set(override["services"]) == {"worker", "triton"}
    assert set(override["services"]["worker"]) <= {"volumes", "environment"}
    # Triton also swaps its image for an Ascend one, and runs as root (the NPU's one owner).
    assert set(override["services"]["triton"]) <= {
        "devices", "volumes", "environment", "image", "user",
    }  # fmt: skip
    # Its own setting: TRITON_IMAGE names the CPU Triton, which make compose-images writes.
    assert override["services"]["triton"]["image"] == (
        "${ASCEND_TRITON_IMAGE:-triton-model-hub/triton-ascend:latest}"
    )
    assert override["services"]["triton"]["user"] == "0:0"


def test_only_triton_opens_the_npu_by_default(ascend_services: dict[str, Any]) -> None:
    """A chip can be opened by one container at a time
    (docs/ascend.md#one-container-owns-the-npu): by default the worker maps no device node,
    runs no npu-smi and leaves the NPU to the Triton container; no service but Triton maps a
    device."""
    mapped = [name for name, service in ascend_services.items() if service.get("devices")]
    assert mapped == ["triton"]
    worker = ascend_services["worker"]
    assert environment(worker)["WORKER_NPU"] == "off"
    assert "/usr/local/bin/npu-smi" not in _binds(worker)
    assert "group_add" not in worker


def test_the_opt_in_gives_the_worker_the_chip_and_requires_the_drivers_group(
    services: dict[str, Any],
) -> None:
    """With container sharing on, deploy/hub-ascend-worker-npu.yml also maps the chip into the
    worker (WORKER_NPU=shared); the device nodes are crw-rw---- for the driver's group
    (docs/cann.md#device-permissions), so its id is then a required setting."""
    override = yaml.safe_load(HUB_WORKER_NPU_FILE.read_text())
    assert set(override["services"]) == {"worker"}
    (entry,) = override["services"]["worker"]["group_add"]
    assert entry.startswith("${ASCEND_DRIVER_GID:?") and "stat -c %g /dev/davinci_manager" in entry
    opted = hub_with_ascend(env={"ASCEND_DRIVER_GID": "1990"}, worker_npu=True)
    assert opted["worker"]["group_add"] == ["1990"]
    assert opted["worker"]["devices"] == opted["triton"]["devices"]
    assert environment(opted["worker"])["WORKER_NPU"] == "shared"
    assert "group_add" not in opted["triton"]  # Triton runs as root
    assert not any("group_add" in service for service in services.values())
    assert "device-share" in HUB_WORKER_NPU_FILE.read_text()


def test_npu_smi_is_mounted_from_where_the_host_has_it_onto_the_path() -> None:
    """Whatever the host's folder (/usr/local/bin or /usr/local/sbin), the containers find
    npu-smi at /usr/local/bin/npu-smi, on every image's PATH."""
    for env, path in (
        ({}, "/usr/local/bin/npu-smi"),
        ({"NPU_SMI_PATH": "/usr/local/sbin/npu-smi"}, "/usr/local/sbin/npu-smi"),
    ):
        for service in hub_with_ascend(env=env).values():
            if service.get("devices"):
                bind = _binds(service)["/usr/local/bin/npu-smi"]
                assert normalise(bind["source"]) == path and bind["read_only"]


def test_the_ascend_host_paths_are_settings_for_other_hosts_and_tests() -> None:
    """/dev, /etc/ascend_install.info and /usr/local/dcmi are the defaults; the compose suite
    points them at fake nodes and files (tests/compose/test_ascend_shape.py)."""
    env = {"ASCEND_DEV_DIR": "/srv/dev", "ASCEND_INSTALL_INFO": "/srv/info",
           "ASCEND_DCMI_DIR": "/srv/dcmi", "ASCEND_DRIVER_GID": "1990"}  # fmt: skip
    services = hub_with_ascend(env=env, worker_npu=True)
    for name in ("triton", "worker"):
        assert "/srv/dev/davinci_manager:/dev/davinci_manager" in services[name]["devices"]
    binds = _binds(services["triton"])
    assert normalise(binds["/etc/ascend_install.info"]["source"]) == "/srv/info"
    assert normalise(binds["/usr/local/dcmi"]["source"]) == "/srv/dcmi"
    assert normalise(_binds(services["worker"])["/etc/ascend_install.info"]["source"]) == (
        "/srv/info"
    )


def test_ascend_devices_are_mapped(ascend_services: dict[str, dict[str, Any]]) -> None:
    targets = set()
    for device in ascend_services["triton"].get("devices") or []:
        if isinstance(device, dict):
            targets.add(str(device["target"]))
        else:
            parts = str(device).split(":")
            targets.add(parts[1] if len(parts) > 1 else parts[0])
    assert targets >= ASCEND_CONTROL_DEVICES
    assert any(re.fullmatch(r"/dev/davinci\d+", t) for t in targets), "no /dev/davinciN mapped"


def test_ascend_driver_paths_are_mounted_read_only(
    ascend_services: dict[str, dict[str, Any]],
) -> None:
    triton = ascend_services["triton"]
    binds = {normalise(m["target"]): m for m in mounts(triton) if m["type"] == "bind"}
    for path in sorted(ASCEND_DRIVER_MOUNTS):
        assert path in binds, f"{path} is not mounted into triton"
        assert normalise(binds[path]["source"]) == path
        assert binds[path]["read_only"], f"{path} should be read-only"


def test_each_triton_requires_the_backends_its_image_has(
    triton: dict[str, Any], ascend_services: dict[str, dict[str, Any]]
) -> None:
    """The CPU image has onnxruntime (ours, on the Python backend); the Ascend one npu_ge too."""
    assert environment(triton)["HUB_REQUIRED_BACKENDS"].split() == ["onnxruntime"]
    required = environment(ascend_services["triton"])["HUB_REQUIRED_BACKENDS"].split()
    assert {"npu_ge", "acl", "onnxruntime"} == set(required)
    assert "libtriton_${backend}.so" in TRITON_ENTRYPOINT.read_text()


@pytest.mark.parametrize("backend", ["acl", "onnxruntime"])
def test_python_based_backends_are_mounted_into_the_backend_directory(
    triton: dict[str, Any], backend: str
) -> None:
    backend_dir = PurePosixPath(flag(command_args(triton), "--backend-directory") or "")
    by_target = {PurePosixPath(m["target"]): m for m in mounts(triton)}
    assert backend_dir not in by_target, "mounting over the backend directory would hide npu_ge"
    mount = by_target.get(backend_dir / backend)
    assert mount, f"{backend} is not mounted at {backend_dir / backend}"
    assert mount["read_only"]
    assert normalise(mount["source"]) == f"model_store/backends/{backend}"


def test_triton_entrypoint_is_the_mounted_script(triton: dict[str, Any]) -> None:
    entrypoint = triton.get("entrypoint") or []
    script = next(m for m in mounts(triton) if m["target"] in entrypoint)
    assert normalise(script["source"]) == "deploy/triton/entrypoint.sh"
    assert (ROOT / script["source"]).is_file()


def _binds(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {normalise(m["target"]): m for m in mounts(service) if m["type"] == "bind"}


def test_worker_gets_the_ascend_root_read_only_at_the_same_path(
    ascend_services: dict[str, dict[str, Any]],
) -> None:
    worker = ascend_services["worker"]
    env = environment(worker)
    assert env["ASCEND_ROOT"] == "/usr/local/Ascend"
    root = _binds(worker).get("/usr/local/Ascend")
    assert root and root["read_only"], "the Ascend root is not mounted read-only into the worker"
    assert normalise(root["source"]) == "/usr/local/Ascend"
    # No layout is hard-coded: discovery and the entrypoint find <root>/cann or
    # <root>/ascend-toolkit/latest; these only pin one install when set in .env.
    for name in ("ASCEND_TOOLKIT_HOME", "ATC_PATH", "ASCEND_SET_ENV"):
        assert env[name] == "", f"{name} defaults to {env[name]!r}"


def test_a_configured_ascend_root_moves_every_ascend_mount() -> None:
    services = hub_with_ascend(env={"ASCEND_ROOT": "/opt/Ascend"})
    worker, triton = services["worker"], services["triton"]
    assert environment(worker)["ASCEND_ROOT"] == "/opt/Ascend"
    root = _binds(worker)["/opt/Ascend"]
    assert normalise(root["source"]) == "/opt/Ascend" and root["read_only"]
    driver = _binds(triton)["/usr/local/Ascend/driver/lib64"]
    assert normalise(driver["source"]) == "/opt/Ascend/driver/lib64"


def test_the_worker_runs_atc_with_its_own_python(services: dict[str, dict[str, Any]]) -> None:
    from model_store.compile.atc.python import ATC_PYTHON_PACKAGES

    assert environment(services["worker"])["ATC_PYTHON"] == "/opt/atc-python/bin/python3"
    text = DOCKERFILE.read_text()
    assert re.search(r"-m venv /opt/atc-python\b", text)
    assert re.search(
        r"/opt/atc-python/bin/pip install \$offline -r /tmp/deps/atc-python-requirements.txt", text
    )
    assert "COPY --from=build /opt/atc-python /opt/atc-python" in text
    pins = {}
    for line in ATC_REQUIREMENTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.strip().lower()] = version.strip()
    for dist, _module in ATC_PYTHON_PACKAGES:
        assert pins.get(dist), f"{dist} is not pinned in {ATC_REQUIREMENTS.name}"
    # What every documented CANN release allows (docs/atc.md#python-environment).
    assert tuple(int(p) for p in pins["numpy"].split(".")[:2]) <= (1, 24)
    assert pins["protobuf"].startswith("3.20.")


# --- Dockerfile and .dockerignore ---------------------------------------------------------------


def test_dockerfile_runs_as_non_root_on_the_agreed_base() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim-bookworm$", text, re.M)
    final_stage = re.split(r"^FROM ", text, flags=re.M)[-1]
    users = re.findall(r"^USER\s+(\S+)", final_stage, re.M)
    assert users and users[-1] not in {"root", "0", "0:0"}
    assert re.search(r"pip install \$offline -c \S*constraints\.txt -r \S*requirements\.txt", text)
    assert "collectstatic --noinput" in text
    assert "webapp.edge.asgi:application" in text


def test_dockerignore_keeps_secrets_and_local_state_out() -> None:
    patterns = {
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".env", ".git", ".venv"} <= patterns


# --- deploy/ helpers, run for real --------------------------------------------------------------


@pytest.fixture
def fake_backends(tmp_path: Path) -> Path:
    backends = tmp_path / "backends"
    (backends / "npu_ge").mkdir(parents=True)
    (backends / "npu_ge" / "libtriton_npu_ge.so").write_bytes(b"")
    (backends / "python").mkdir()
    (backends / "python" / "libtriton_python.so").write_bytes(b"")
    for name in ("acl", "onnxruntime"):
        (backends / name).mkdir()
        (backends / name / "model.py").write_text("")
    (tmp_path / "repo").mkdir()
    (tmp_path / "work").mkdir()
    return backends


def run_triton_entrypoint(
    tmp_path: Path,
    backends: Path,
    cwd: Path,
    *extra: str,
    run: tuple[str, ...] = ("echo", "started"),
    **env_: str,
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HUB_REQUIRED_BACKENDS": "npu_ge acl onnxruntime",
        "ASCEND_SET_ENV": str(tmp_path / "absent-set_env.sh"),
        "TRITON_PYTHON_ENV": str(tmp_path / "absent-python"),
        **env_,
    }
    command = [
        "bash",
        str(TRITON_ENTRYPOINT),
        *run,
        f"--backend-directory={backends}",
        f"--model-repository={tmp_path / 'repo'}",
        *extra,
    ]
    return spawn.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


requires_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


@requires_bash
def test_triton_entrypoint_puts_the_drivers_three_library_folders_first(
    tmp_path: Path, fake_backends: Path
) -> None:
    """As CANN's set_env.sh does (hicann/runtime): lib64, lib64/common, lib64/driver, so that
    an image whose set_env.sh adds only lib64/driver still finds lib64/common."""
    driver = tmp_path / "driver"
    for sub in ("lib64", "lib64/common", "lib64/driver"):
        (driver / sub).mkdir(parents=True, exist_ok=True)
    result = run_triton_entrypoint(
        tmp_path, fake_backends, tmp_path / "work",
        run=("sh", "-c", 'echo "$LD_LIBRARY_PATH"', "sh"), ASCEND_DRIVER_HOME=str(driver),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    folders = result.stdout.strip().split(":")
    expected = [str(driver / sub) for sub in ("lib64", "lib64/common", "lib64/driver")]
    assert set(expected) <= set(folders), folders


@requires_bash
def test_triton_entrypoint_starts_when_all_backends_are_present(
    tmp_path: Path, fake_backends: Path
) -> None:
    result = run_triton_entrypoint(tmp_path, fake_backends, cwd=tmp_path / "work")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("started")


@requires_bash
def test_triton_entrypoint_never_logs_the_hubs_key(tmp_path: Path, fake_backends: Path) -> None:
    key = "the-hubs-secret-key-0123456789"
    result = run_triton_entrypoint(
        tmp_path, fake_backends, tmp_path / "work", *restricted_api_args(key)
    )
    assert result.returncode == 0, result.stderr
    assert key in result.stdout  # tritonserver itself (here: echo) still gets it
    assert key not in result.stderr
    for option in RESTRICTED_OPTIONS:
        assert f"{option}=model-repository,trace,logging:triton-hub-key=***" in result.stderr


@requires_bash
@pytest.mark.parametrize("missing", ["npu_ge/libtriton_npu_ge.so", "acl/model.py"])
def test_triton_entrypoint_refuses_a_missing_backend(
    tmp_path: Path, fake_backends: Path, missing: str
) -> None:
    (fake_backends / missing).unlink()
    result = run_triton_entrypoint(tmp_path, fake_backends, cwd=tmp_path / "work")
    assert result.returncode == 78
    assert "not found" in result.stderr
    assert "started" not in result.stdout


@requires_bash
def test_triton_entrypoint_refuses_to_run_inside_the_repository(
    tmp_path: Path, fake_backends: Path
) -> None:
    inside = tmp_path / "repo" / "some_model"
    inside.mkdir()
    result = run_triton_entrypoint(tmp_path, fake_backends, cwd=inside)
    assert result.returncode == 78
    assert "inside the model repository" in result.stderr


@requires_bash
def test_hub_entrypoint_sources_cann_but_keeps_explicit_toolkit_home(tmp_path: Path) -> None:
    set_env = tmp_path / "set_env.sh"
    set_env.write_text(
        "export ASCEND_TOOLKIT_HOME=/derived/latest\nexport ASCEND_OPP_PATH=/derived/opp\n"
    )
    result = run_hub_entrypoint(
        {"ASCEND_SET_ENV": str(set_env), "ASCEND_TOOLKIT_HOME": "/explicit/8.3"}
    )
    assert result.returncode == 0, result.stderr
    lines = set(result.stdout.splitlines())
    assert "ASCEND_OPP_PATH=/derived/opp" in lines
    assert "ASCEND_TOOLKIT_HOME=/explicit/8.3" in lines


def run_hub_entrypoint(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}
    return spawn.run(
        ["bash", str(HUB_ENTRYPOINT), "env"],
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@requires_bash
@pytest.mark.parametrize("layout", ["cann", "ascend-toolkit"])
def test_hub_entrypoint_sets_up_the_cann_found_under_ascend_root(
    tmp_path: Path, layout: str
) -> None:
    from model_store.compile.atc.environment import cann_status
    from tests.fakes.toolkit import make_fake_toolkit, toolkit_home

    root = tmp_path / "Ascend"
    make_fake_toolkit(root, layout=layout)  # type: ignore[arg-type]
    (root / "driver" / "lib64" / "driver").mkdir(parents=True, exist_ok=True)
    result = run_hub_entrypoint({"ASCEND_ROOT": str(root), "ASCEND_SET_ENV": ""})
    assert result.returncode == 0, result.stderr
    env = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    assert env["ASCEND_TOOLKIT_HOME"] == str(toolkit_home(root, layout))  # type: ignore[arg-type]
    assert str(root / "driver" / "lib64" / "driver") in env["LD_LIBRARY_PATH"].split(":")
    # What the worker then finds, the way it looks (no ATC_PATH is set in compose).
    status = cann_status(env)
    assert status.available and status.layout == layout


@requires_bash
def test_hub_entrypoint_prefers_the_newer_layout_and_says_when_there_is_none(
    tmp_path: Path,
) -> None:
    from tests.fakes.toolkit import make_fake_toolkit

    both = tmp_path / "both"
    make_fake_toolkit(both, layout="ascend-toolkit")
    make_fake_toolkit(both, layout="cann")
    lines = run_hub_entrypoint({"ASCEND_ROOT": str(both)}).stdout.splitlines()
    assert f"ASCEND_TOOLKIT_HOME={both / 'cann'}" in lines

    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_hub_entrypoint({"ASCEND_ROOT": str(empty)})
    assert result.returncode == 0  # not fatal: the pages say "needs CANN" and why
    assert f"no CANN set_env.sh under ASCEND_ROOT={empty}" in result.stderr


@pytest.fixture(scope="module")
def healthcheck() -> ModuleType:
    return load_module(HEALTHCHECK, "hub_deploy_healthcheck")


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [
        ("", "localhost"),
        ("*", "localhost"),
        ("hub.example.com,localhost", "hub.example.com"),
        (" , *, .example.org", "example.org"),
    ],
)
def test_web_probe_uses_a_host_django_accepts(
    healthcheck: ModuleType, allowed: str, expected: str
) -> None:
    assert healthcheck.probe_host(allowed) == expected


class _LiveHandler(http.server.BaseHTTPRequestHandler):
    """Answers like Django would: 400 for a Host outside ALLOWED_HOSTS."""

    accepted_host = "hub.example.com"

    def do_GET(self) -> None:
        ok = self.path == "/api/v1/health/live" and self.headers["Host"] == self.accepted_host
        self.send_response(200 if ok else 400)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_web_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LiveHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_web_probe_against_a_server(
    healthcheck: ModuleType, fake_web_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(healthcheck, "WEB_PORT", fake_web_port)
    monkeypatch.setenv("ALLOWED_HOSTS", "hub.example.com")
    assert healthcheck.check_web() is None
    monkeypatch.setenv("ALLOWED_HOSTS", "other.example.com")
    assert "returned 400" in (healthcheck.check_web() or "")


def test_web_probe_reports_a_closed_port(
    healthcheck: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(healthcheck, "WEB_PORT", 1)
    assert "failed" in (healthcheck.check_web() or "")


def test_beat_probe_needs_an_answering_broker(
    healthcheck: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    assert "REDIS_URL" in (healthcheck.check_beat(None) or "")
    monkeypatch.setenv("REDIS_URL", "redis://:secret@127.0.0.1:1/0")
    problem = healthcheck.check_beat(None) or ""
    assert "does not answer" in problem
    assert "secret" not in problem


def test_beat_schedule_may_carry_a_dbm_suffix(healthcheck: ModuleType, tmp_path: Path) -> None:
    schedule = tmp_path / "celerybeat-schedule"
    assert not healthcheck._exists_with_any_suffix(schedule)
    (tmp_path / "celerybeat-schedule.db").write_bytes(b"")
    assert healthcheck._exists_with_any_suffix(schedule)


def test_probe_rejects_unknown_modes(healthcheck: ModuleType) -> None:
    assert healthcheck.main(["healthcheck.py", "nonsense"]) == 2


# --- the real docker compose, when there is one ------------------------------------------------


def _compose_command() -> list[str] | str:
    """docker-compose 1.x or `docker compose` v2 (the files are written for both); else why
    neither is here."""
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    docker = shutil.which("docker")
    if docker is None:
        return "neither docker-compose nor the docker CLI is installed"
    try:
        result = spawn.run(
            [docker, "compose", "version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`docker compose version` did not run: {exc}"
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()[:1]
        return f"`docker compose version` failed ({' '.join(detail) or result.returncode})"
    return [docker, "compose"]


def _project_copy(tmp_path: Path, env_lines: list[str]) -> Path:
    """A copy of the project for compose (the compose file, links to what it mounts and
    builds), with ``env_lines`` as its .env."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(COMPOSE_FILE, project / "docker-compose.yml")
    for name in ("deploy", "model_store", "Dockerfile"):
        (project / name).symlink_to(ROOT / name)
    (project / ".env").write_text("\n".join(env_lines) + "\n")
    return project


def run_compose_config(
    tmp_path: Path, env_lines: list[str], files: tuple[Path, ...] = (COMPOSE_FILE,)
) -> subprocess.CompletedProcess[str]:
    """`compose config -q` on a copy of the project with the given .env; no engine needed."""
    command = _compose_command()
    assert isinstance(command, list), command
    project = _project_copy(tmp_path, env_lines)
    env = {k: v for k, v in os.environ.items() if k not in REQUIRED_VARS}
    chosen = [arg for file in files for arg in ("-f", str(project / file.relative_to(ROOT)))]
    return spawn.run(
        [*command, "--project-directory", str(project), *chosen, "config", "-q"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def docker_compose() -> None:
    reason = _compose_command()
    if isinstance(reason, str):
        pytest.skip(reason)


@pytest.mark.usefixtures("docker_compose")
def test_compose_accepts_the_cpu_stack_with_upstreams_images(tmp_path: Path) -> None:
    """The registry shape: no image names set, so the upstream defaults (postgres:17, ...)."""
    result = run_compose_config(tmp_path, [f"{var}={DUMMY}" for var in REQUIRED_VARS])
    if "Cannot connect to the Docker daemon" in result.stderr:
        pytest.skip("docker compose wanted an engine for `config`")
    assert result.returncode == 0, result.stderr


@pytest.mark.usefixtures("docker_compose")
def test_compose_accepts_the_ascend_override(tmp_path: Path) -> None:
    lines = [f"{var}={DUMMY}" for var in REQUIRED_VARS] + ["ASCEND_DRIVER_GID=1990"]
    result = run_compose_config(tmp_path, lines, (COMPOSE_FILE, HUB_ASCEND_FILE))
    assert result.returncode == 0, result.stderr


@pytest.mark.usefixtures("docker_compose")
def test_compose_names_a_missing_secret(tmp_path: Path) -> None:
    lines = [f"{var}={DUMMY}" for var in REQUIRED_VARS if var != "SECRET_KEY"]
    result = run_compose_config(tmp_path, lines)
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


# --- the worker's memory ceiling (docs/deploy.md#settings) -------------------------------------


def test_the_worker_has_a_memory_limit_that_is_a_setting(raw_text: str) -> None:
    raw = yaml.safe_load(raw_text)["services"]["worker"]
    assert raw["mem_limit"] == "${WORKER_MEM_LIMIT:-8g}"
    assert interpolate(raw, env={})["mem_limit"] == "8g"
    assert interpolate(raw, env={"WORKER_MEM_LIMIT": "24g"})["mem_limit"] == "24g"


def test_the_ascend_override_keeps_the_workers_memory_limit() -> None:
    assert "mem_limit" not in (yaml.safe_load(HUB_ASCEND_FILE.read_text())["services"]["worker"])
    assert hub_with_ascend(env={})["worker"]["mem_limit"] == "8g"
    assert hub_with_ascend(env={"WORKER_MEM_LIMIT": "16g"})["worker"]["mem_limit"] == "16g"


def test_only_the_worker_gets_the_worker_memory_limit(services: dict[str, Any]) -> None:
    limited = {name for name, service in services.items() if "mem_limit" in service}
    assert limited == {"worker"}


@pytest.mark.usefixtures("docker_compose")
def test_compose_applies_the_workers_memory_limit(tmp_path: Path) -> None:
    """The real compose reads `mem_limit` at the service level (1.29 keeps "3g", v2 may give
    bytes) from WORKER_MEM_LIMIT."""
    command = _compose_command()
    assert isinstance(command, list), command
    lines = [f"{var}={DUMMY}" for var in REQUIRED_VARS] + ["WORKER_MEM_LIMIT=3g"]
    project = _project_copy(tmp_path, lines)
    env = {k: v for k, v in os.environ.items() if k not in (*REQUIRED_VARS, "WORKER_MEM_LIMIT")}
    result = spawn.run(
        [*command, "--project-directory", str(project), "config"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if "Cannot connect to the Docker daemon" in result.stderr:
        pytest.skip("docker compose wanted an engine for `config`")
    assert result.returncode == 0, result.stderr
    worker = yaml.safe_load(result.stdout)["services"]["worker"]
    assert str(worker["mem_limit"]) in {"3g", str(3 * 1024**3)}


def test_a_virtual_npu_is_mapped_again_under_the_name_cann_opens() -> None:
    """Ascend Docker Runtime shows /dev/vdavinciN to the container as /dev/davinciN; without
    it, deploy/hub-ascend-vnpu.yml maps the host's node a second time under that name."""
    env = {"ASCEND_DEVICE": "/dev/vdavinci100", "ASCEND_DEVICE_IN_CONTAINER": "/dev/davinci100"}
    triton = hub_with_ascend(env=env, vnpu=True)["triton"]
    assert "/dev/vdavinci100:/dev/davinci100" in triton["devices"]
    assert "/dev/vdavinci100:/dev/vdavinci100" in triton["devices"]
    override = yaml.safe_load(HUB_VNPU_FILE.read_text())
    assert set(override["services"]) == {"triton"}
    (entry,) = override["services"]["triton"]["devices"]
    assert "${ASCEND_DEVICE_IN_CONTAINER:?" in entry
    node_override = ROOT / "deploy" / "node" / "vnpu.yml"
    assert yaml.safe_load(node_override.read_text()) == override

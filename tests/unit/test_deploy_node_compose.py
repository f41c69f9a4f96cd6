"""deploy/node/: the compose file of one node on an Ascend host, and its .env.example.

Parsed and interpolated with the helpers of test_compose.py (no Docker needed). The node
worker's environment is also read by the node's own settings parser, so a compose file that
the worker would refuse at start fails here.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tests.unit.test_compose import (
    ASCEND_CONTROL_DEVICES,
    ASCEND_DRIVER_MOUNTS,
    ROOT,
    command_args,
    environment,
    flag,
    interpolate,
    mounts,
    normalise,
    published,
)
from workers.node import settings as node_settings

NODE_DIR = ROOT / "deploy" / "node"
NODE_COMPOSE = NODE_DIR / "docker-compose.yml"
NODE_ENV_EXAMPLE = NODE_DIR / ".env.example"
SETTINGS_SOURCE = Path(node_settings.__file__)
# What a node must never hold (docs/nodes.md#terms: only the hub holds database credentials).
DATABASE_WORDS = ("DATABASE_URL", "POSTGRES", "postgres://", "SECRET_KEY", "sqlite")
# A node's settings as .env would give them (interpolation only; nothing is contacted).
NODE_ENV = {
    "NODE_NAME": "edge-1",
    "HUB_URL": "https://hub.example",
    "REDIS_URL": "redis://hub.example:6379/0",
    "TRITON_API_KEY": "k" * 32,
    "NODE_TRITON_ADVERTISE_HOST": "edge-1.example",
    "NODE_LABELS": "zone=a",
}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
# The settings parser's ways of reading a variable: env.get("X"), env["X"], helper(env, "X").
_READ = re.compile(r'\benv(?:\.get\(|\[)\s*"([A-Z][A-Z0-9_]*)"|\(env, "([A-Z][A-Z0-9_]*)"')


@pytest.fixture(scope="module")
def node_text() -> str:
    return NODE_COMPOSE.read_text()


@pytest.fixture(scope="module")
def node_services(node_text: str) -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(node_text)
    assert isinstance(document, dict)
    return interpolate(document, env=NODE_ENV)["services"]


def example_settings() -> dict[str, str]:
    """NAME=value lines of .env.example (comments and blank lines skipped)."""
    found = {}
    for line in NODE_ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, sep, value = line.partition("=")
            assert sep, f"not NAME=value: {line!r}"
            found[name.strip()] = value
    return found


def variables_read_by_the_node_worker() -> set[str]:
    return {a or b for a, b in _READ.findall(SETTINGS_SOURCE.read_text())}


def device_targets(service: dict[str, Any]) -> set[str]:
    targets = set()
    for device in service.get("devices") or []:
        parts = str(device).split(":")
        targets.add(parts[1] if len(parts) > 1 else parts[0])
    return targets


def test_a_node_holds_no_database_settings(node_text: str) -> None:
    for path, text in ((NODE_COMPOSE, node_text), (NODE_ENV_EXAMPLE, NODE_ENV_EXAMPLE.read_text())):
        for word in DATABASE_WORDS:
            assert word.lower() not in text.lower(), f"{path.name} mentions {word}"


def test_only_the_opt_in_gives_the_node_worker_the_chip_and_needs_the_group(
    node_text: str, node_services: dict[str, Any]
) -> None:
    """By default the node worker maps no device and leaves the NPU to Triton
    (docs/ascend.md#one-container-owns-the-npu); deploy/node/worker-npu.yml maps the chip into
    it too (WORKER_NPU=shared), which needs the driver's group."""
    worker = node_services["node-worker"]
    assert not worker.get("devices") and "group_add" not in worker
    assert environment(worker)["WORKER_NPU"] == "off"
    assert node_services["triton"]["user"] == "0:0"
    opt_in = yaml.safe_load((NODE_DIR / "worker-npu.yml").read_text())
    (entry,) = opt_in["services"]["node-worker"]["group_add"]
    assert entry.startswith("${ASCEND_DRIVER_GID:?") and "stat -c %g /dev/davinci_manager" in entry
    assert opt_in["services"]["node-worker"]["environment"]["WORKER_NPU"] == "shared"
    assert opt_in["x-ascend-devices"] == yaml.safe_load(node_text)["x-ascend-devices"]


def test_the_node_has_triton_and_its_worker(node_services: dict[str, Any]) -> None:
    assert {"triton", "node-worker"} <= set(node_services)
    assert node_services["node-worker"]["build"]["context"] == "../.."


def test_triton_gets_the_ascend_devices_and_driver_files(node_services: dict[str, Any]) -> None:
    service = node_services["triton"]
    targets = device_targets(service)
    assert targets >= ASCEND_CONTROL_DEVICES
    assert "/dev/davinci0" in targets
    binds = {normalise(m["target"]): m for m in mounts(service) if m["type"] == "bind"}
    for path in ("/etc/ascend_install.info", "/usr/local/dcmi", "/usr/local/bin/npu-smi"):
        assert path in binds and binds[path]["read_only"], f"{path} not read-only in triton"


def test_triton_gets_the_driver_as_the_hub_override_maps_it(node_services: dict[str, Any]) -> None:
    binds = {normalise(m["target"]): m for m in mounts(node_services["triton"])}
    for path in sorted(ASCEND_DRIVER_MOUNTS):
        assert normalise(binds[path]["source"]) == path and binds[path]["read_only"]


def test_the_device_list_is_the_hubs_ascend_override(node_text: str) -> None:
    hub_override = yaml.safe_load((ROOT / "deploy" / "hub-ascend.yml").read_text())
    assert yaml.safe_load(node_text)["x-ascend-devices"] == hub_override["x-ascend-devices"]


def test_the_node_worker_consumes_only_its_own_queue(node_services: dict[str, Any]) -> None:
    raw = yaml.safe_load(NODE_COMPOSE.read_text())["services"]["node-worker"]["command"]
    args = command_args(node_services["node-worker"])
    assert args[:4] == ["celery", "-A", "workers.node.app", "worker"]
    assert args.count("-Q") == 1
    queue_at = args.index("-Q") + 1
    assert raw[queue_at].startswith("node.${NODE_NAME")
    assert args[queue_at] == node_settings.queue_name(NODE_ENV["NODE_NAME"])
    # The flags `make node` uses (workers/node/launch.py).
    assert args[args.index("-P") + 1] == "solo"
    assert {"--without-gossip", "--without-mingle"} <= set(args)


def test_the_node_worker_environment_is_one_the_worker_accepts(
    node_services: dict[str, Any], tmp_path: Path
) -> None:
    env = environment(node_services["node-worker"])
    assert "NODE_TOKEN" not in env, "the token goes by file (a docker secret), never by variable"
    assert env["NODE_TOKEN_FILE"] == "/run/secrets/node_token"
    assert node_services["node-worker"]["secrets"] == ["node_token"]
    token = tmp_path / "token"
    token.write_text("n" * 40 + "\n")
    parsed = node_settings.read_settings({**env, "NODE_TOKEN_FILE": str(token)})
    assert parsed.queue == "node.edge-1"
    assert parsed.repository == PurePosixPath("/models/repository")
    # Reported to the hub as given: the address the hub reaches, the published ports.
    assert parsed.triton_http == "edge-1.example:8000"
    assert parsed.triton_grpc == "edge-1.example:8001"
    assert parsed.triton_metrics == "edge-1.example:8002"
    assert parsed.labels == {"zone": "a"}


def test_every_variable_the_node_worker_reads_is_set_or_documented(
    node_services: dict[str, Any],
) -> None:
    read = variables_read_by_the_node_worker()
    # The parser is read right: these are the ones docs/nodes.md#running-a-node lists.
    assert read >= {"NODE_NAME", "NODE_REPOSITORY", "HUB_URL", "REDIS_URL", "TRITON_URL"}
    env = environment(node_services["node-worker"])
    documented = example_settings()
    # NODE_TOKEN is the one deliberately left out: the token is a file.
    missing = sorted(name for name in read - {"NODE_TOKEN"} if name not in env | documented)
    assert not missing, (
        f"the node worker reads {missing}, which deploy/node/ neither sets nor lists"
    )


def test_every_compose_variable_is_listed_in_the_env_example(node_text: str) -> None:
    used = set(_VARIABLE.findall(node_text))
    listed = set(example_settings())
    assert used, "no ${...} found"
    assert not sorted(used - listed), f"not in .env.example: {sorted(used - listed)}"


def test_triton_serves_the_workers_repository_in_explicit_mode(
    node_services: dict[str, Any],
) -> None:
    triton, worker = node_services["triton"], node_services["node-worker"]
    args = command_args(triton)
    assert flag(args, "--model-control-mode") == "explicit"
    repository = flag(args, "--model-repository")
    assert repository == environment(worker)["NODE_REPOSITORY"]
    assert PurePosixPath(repository).name == "repository"
    triton_store = next(m for m in mounts(triton) if m["target"] == "/models")
    worker_store = next(m for m in mounts(worker) if m["target"] == "/models")
    assert triton_store["source"] == worker_store["source"] == "node_store"
    assert triton_store["read_only"] and not worker_store["read_only"]


def test_triton_publishes_its_ports_behind_the_nodes_key(node_services: dict[str, Any]) -> None:
    triton = node_services["triton"]
    assert {port for _, ports in published(triton) for port in ports} == {8000, 8001, 8002}
    args = command_args(triton)
    for option in ("--http-restricted-api", "--grpc-restricted-protocol"):
        value = flag(args, option) or ""
        assert value.startswith("model-repository,") and value.endswith("=" + "k" * 32)
    assert environment(node_services["node-worker"])["TRITON_API_KEY"] == "k" * 32


def test_the_token_secret_lives_outside_the_checkout(node_text: str) -> None:
    secret = yaml.safe_load(node_text)["secrets"]["node_token"]["file"]
    default = interpolate(secret, env={})
    assert PurePosixPath(default).is_absolute(), "a token file in the checkout enters the image"


def test_the_node_worker_has_a_memory_limit_that_is_a_setting(node_text: str) -> None:
    """One large ATC graph must not take the host's memory from the node's Triton
    (docs/deploy.md#settings); the same setting as the hub's worker."""
    raw = yaml.safe_load(node_text)["services"]
    assert raw["node-worker"]["mem_limit"] == "${WORKER_MEM_LIMIT:-8g}"
    assert "mem_limit" not in raw["triton"]
    assert interpolate(raw["node-worker"], env=NODE_ENV)["mem_limit"] == "8g"
    limited = interpolate(raw["node-worker"], env={**NODE_ENV, "WORKER_MEM_LIMIT": "32g"})
    assert limited["mem_limit"] == "32g"


def test_the_nodes_triton_defaults_to_the_recipes_tag(node_text: str) -> None:
    """deploy/triton/ascend/build.sh tags triton-model-hub/triton-ascend:latest; a node that
    built it on its host needs no image setting, and .env.example says so."""
    image = yaml.safe_load(node_text)["services"]["triton"]["image"]
    assert image == "${NODE_TRITON_IMAGE:-triton-model-hub/triton-ascend:latest}"
    example = (NODE_DIR / ".env.example").read_text()
    assert "NODE_TRITON_IMAGE=triton-model-hub/triton-ascend:latest" in example
    # The driver's group matters only to the opt-in that gives the worker the chip.
    gid_comment = example.split("ASCEND_DRIVER_GID=")[0].rsplit("\n\n", 1)[-1]
    assert "worker-npu.yml" in gid_comment and "Required" not in gid_comment

"""A node from deploy/node/ joins the hub's compose stack and serves a model there.

The node is a second compose project standing for another Ascend host (the stand-in Triton
image, fake device nodes, the stand-in CANN): its token is a docker secret minted with
``manage.py nodetoken`` in the hub's ``web`` container, it holds no database credentials, and
it reaches the hub through the hub's proxy (HTTPS) and Redis. The hub places the demo on every
node; the node worker fetches the package over HTTPS and loads it into its own Triton, and the
hub's inference API answers from there.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator

import pytest

from tests.compose.conftest import (
    ROOT,
    Api,
    Stack,
    builder,
    operator_token,
    project_name,
    shared_tmp,
    stack_settings,
    wait_for,
)

# A cold image build (about 150 s) and a stack start count towards the first test.
pytestmark = [pytest.mark.integration, pytest.mark.compose, pytest.mark.timeout(900)]

NODE = "edge-1"
#: The name the node's Triton is advertised and reached by (an alias on the hub's network).
NODE_TRITON = "edge-1-triton"


@pytest.fixture(scope="module")
def hub(images: dict[str, str]) -> Iterator[Stack]:
    # The node reaches the proxy as `proxy`: the internal certificate names it too.
    settings = stack_settings(
        images, HUB_SITE_ADDRESS="localhost, proxy", ALLOWED_HOSTS="localhost,127.0.0.1,proxy"
    )
    running = Stack(project_name("hub"), ["docker-compose.yml"], settings,
                    shared_tmp("hub-compose-hub-"))  # fmt: skip
    try:
        running.up()
        running.wait_healthy()
        yield running
    finally:
        running.down()


def test_a_node_started_from_deploy_node_joins_and_serves_the_demo(
    images: dict[str, str], host: dict[str, str], hub: Stack
) -> None:
    """Budget: 4 min."""
    api = Api(hub, operator_token(hub, "compose-nodes"))
    added = api.ok("POST", "/demo")
    assert api.wait_job(added["job"])["state"] == "succeeded"
    model = added["model"]
    wait_for("the demo served", lambda: api.ok("GET", f"/models/{model}")["serving_version"], 120)
    placed = api.ok("PUT", f"/models/{model}/placement?wait=true", {"labels": {}})
    assert placed["state"] == "succeeded", placed

    folder = shared_tmp("hub-compose-node-")
    token = hub.exec("web", "python", "manage.py", "nodetoken", NODE).split()[-1]
    secret = folder / "node-token"
    secret.write_text(token + "\n")
    os.chown(secret, 10001, 10001)
    secret.chmod(0o400)
    ca = folder / "hub-ca.pem"
    ca.write_text(hub.exec("proxy", "cat", "/data/caddy/pki/authorities/local/root.crt"))
    ca.chmod(0o644)

    settings = {k: v for k, v in host.items() if k != "folder"}
    settings.update(
        NODE_NAME=NODE,
        HUB_URL="https://proxy",
        REDIS_URL="redis://redis:6379/0",
        TRITON_API_KEY=secrets.token_hex(32),
        NODE_TRITON_ADVERTISE_HOST=NODE_TRITON,
        # Published on loopback at the ports the containers use: the advertised URL carries
        # the port, and on the shared network that is the container's own.
        NODE_TRITON_BIND="127.0.0.1",
        NODE_TRITON_IMAGE=builder.STANDIN_IMAGE,
        HUB_IMAGE=images["HUB_IMAGE"],
        NODE_TOKEN_PATH=str(secret),
        # No ASCEND_DRIVER_GID: only the node's Triton (root) maps the NPU.
        NODE_REPORT_EVERY_SECONDS="5",
        HUB_NETWORK=f"{hub.name}_default",
        HUB_CA_FILE=str(ca),
    )
    node = Stack(project_name("node"),
                 ["deploy/node/docker-compose.yml", "tests/compose/node-on-hub-network.yml",
                  "tests/compose/node-standin-driver.yml"],
                 settings, folder, project_dir=ROOT / "deploy" / "node")  # fmt: skip
    # The node's .env names no database, and its containers get no database setting.
    assert not any("DATABASE" in key or "POSTGRES" in key for key in settings)
    try:
        started = time.monotonic()
        node.up()

        def edge() -> dict | None:
            nodes = {n["name"]: n for n in api.ok("GET", "/nodes")["nodes"]}
            return nodes.get(NODE) if nodes.get(NODE, {}).get("state") == "up" else None

        joined = wait_for(f"{NODE} up on the hub", edge, 180, interval=2)
        print(f"{NODE} up {time.monotonic() - started:.0f} s after `up`: {joined.get('soc')}")
        # The SoC comes from npu-smi inside the node's Triton: the worker maps no NPU.
        assert joined.get("soc"), joined

        def serving_there() -> bool:
            per_node = {n["node"]: n for n in api.ok("GET", f"/models/{model}")["nodes"]}
            return per_node.get(NODE, {}).get("state") == "serving"

        try:
            wait_for(f"{model} serving on {NODE}", serving_there, 240, interval=2)
        except AssertionError as exc:
            per_node = api.ok("GET", f"/models/{model}")["nodes"]
            raise AssertionError(f"{exc}\n{per_node}\n{node.logs('node-worker')[-6000:]}") from exc
        environment = node.exec("node-worker", "env")
        assert "DATABASE_URL" not in environment and token not in environment

        answered: set[str] = set()
        for _ in range(8):
            answer = api.infer_photo(model)
            assert answer["outputs"][0]["top_k"][0]["label"] == "espresso"
            answered.add(answer["node"])
        assert NODE in answered, answered
        print(f"the demo served on {NODE} {time.monotonic() - started:.0f} s after `up`")

        # The node's own self-test, without Django (docs/deploy-node.md, step 6). The node
        # serves already, so no npu_ge trial goes into its Triton: that stage does not apply.
        done = node.compose(
            "exec", "-T", "node-worker", "python", "-m", "workers.node.selftest", "--json", "-",
            check=False, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-6000:]
        stages = {s["id"]: s["verdict"] for s in json.loads(done.stdout)["stages"]}
        assert stages.pop("triton_npu_ge") == "skipped", stages
        assert set(stages.values()) == {"passed"}, stages
    finally:
        node.down()

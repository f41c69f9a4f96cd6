"""The CPU stack of docker-compose.yml, as an operator runs it (docs/deploy.md).

Up from the images of ``make compose-images``; healthy through Caddy on a loopback port with
its internal certificate; an operator signs in, adds the demo, classifies the coffee photo and
switches versions under client traffic without a failed request; killed containers come back
through their restart policy and the hub's reconcile; ``down -v`` leaves nothing behind.
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from model_store import spawn
from tests.compose.conftest import (
    DEMO,
    Api,
    Stack,
    operator_token,
    project_name,
    shared_tmp,
    stack_settings,
    wait_for,
)
from tests.fixtures.multipart import multipart_file

# A cold image build (about 150 s) and a stack start count towards the first test.
pytestmark = [pytest.mark.integration, pytest.mark.compose, pytest.mark.timeout(900)]

DEMO_MODEL = "efficientnet-lite0"


@pytest.fixture(scope="module")
def stack(images: dict[str, str]) -> Iterator[Stack]:
    running = Stack(project_name("cpu"), ["docker-compose.yml"], stack_settings(images),
                    shared_tmp("hub-compose-cpu-"))  # fmt: skip
    started = time.monotonic()
    try:
        running.up()
        running.wait_healthy()
        print(f"CPU stack healthy through the proxy {time.monotonic() - started:.0f} s after up")
        yield running
    finally:
        running.down()


@pytest.fixture(scope="module")
def api(stack: Stack) -> Api:
    return Api(stack, operator_token(stack, "compose-operator"))


def _sign_in(stack: Stack) -> str:
    """The login form as a browser uses it: CSRF cookie and field, Referer (HTTPS), session."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=stack.ssl_context()),
        urllib.request.HTTPCookieProcessor(jar),
    )
    form = opener.open(stack.url("/login/"), timeout=30).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
    assert token, form[:500]
    body = urllib.parse.urlencode({
        "csrfmiddlewaretoken": token.group(1),
        "username": "admin",
        "password": stack.settings["HUB_ADMIN_PASSWORD"],
    }).encode()  # fmt: skip
    request = urllib.request.Request(stack.url("/login/"), data=body,
                                     headers={"Referer": stack.url("/login/")})  # fmt: skip
    with opener.open(request, timeout=30) as answer:
        page = answer.read().decode()
        assert answer.status == 200 and "/login/" not in answer.url, (answer.url, page[:300])
    assert any(c.name == "sessionid" and c.secure for c in jar), "no secure session cookie"
    return page


class Traffic:
    """Clients classifying the coffee photo in a loop through the proxy, counting failures."""

    def __init__(self, api: Api, model: str, clients: int = 2) -> None:
        self.api, self.model = api, model
        self.ok = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(clients)]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                first = self.api.classify(self.model, timeout=30)
            except (AssertionError, OSError) as exc:
                self.failed.append(str(exc)[:300])
            else:
                if first["label"] == "espresso":
                    self.ok += 1
                else:
                    self.failed.append(f"answered {first}")
            time.sleep(0.02)

    def __enter__(self) -> Traffic:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)


def _add_version(api: Api, model: str) -> dict[str, Any]:
    body, content_type = multipart_file(
        (DEMO / DEMO_MODEL / "model.onnx").read_bytes(), fields={"allow_duplicate": "true"}
    )
    added: dict[str, Any] = api.ok("POST", f"/models/{model}/versions", raw=body,
                                   content_type=content_type)  # fmt: skip
    return added


def test_an_operator_signs_in_adds_the_demo_and_switches_under_traffic(
    stack: Stack, api: Api
) -> None:
    """Budget: 3 min (the stack's start is the fixture's)."""
    page = _sign_in(stack)
    assert "Triton Model Hub" in page

    added = api.ok("POST", "/demo")
    assert api.wait_job(added["job"])["state"] == "succeeded"
    model = added["model"]
    wait_for("the demo served", lambda: api.ok("GET", f"/models/{model}")["serving_version"], 120)
    first = api.classify(model)
    assert first["label"] == "espresso" and first["probability"] > 0.9, first

    second = _add_version(api, model)
    assert api.wait_job(second["job"])["state"] == "succeeded"
    with Traffic(api, model) as traffic:
        time.sleep(2)
        for number in (second["version"], added["version"]):
            served = api.ok("POST", f"/models/{model}/serve?wait=true", {"version": number})
            assert served["state"] == "succeeded", served
            time.sleep(2)
    assert traffic.failed == [], traffic.failed[:5]
    assert traffic.ok >= 20, traffic.ok
    print(f"switch v1 -> v2 -> v1 under traffic: {traffic.ok} requests, 0 failed")


def _restarts(stack: Stack, service: str) -> int:
    out = spawn.run(
        ["docker", "inspect", "-f", "{{.RestartCount}}", stack.container(service)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    return int(out.strip())


def _crash(stack: Stack, service: str) -> float:
    """SIGKILL to the container's first process from the host, as the OOM killer or a crash
    would end it. Not `docker kill`: the engine counts that as stopped by hand, and a restart
    policy never restarts a container stopped by hand (Docker's restart-policy docs)."""
    pid = spawn.run(
        ["docker", "inspect", "-f", "{{.State.Pid}}", stack.container(service)],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    os.kill(int(pid), signal.SIGKILL)
    return time.monotonic()


def test_killed_triton_and_worker_come_back_with_nothing_lost(stack: Stack, api: Api) -> None:
    """Budget: 2 min. After the demo test: the demo model serves."""
    model = DEMO_MODEL
    assert api.classify(model)["label"] == "espresso"

    killed = _crash(stack, "triton")

    def answers() -> bool:
        try:
            return api.classify(model, timeout=10)["label"] == "espresso"
        except AssertionError:
            return False

    wait_for("the demo answering after Triton was killed", answers, 180)
    triton_back = time.monotonic() - killed
    assert _restarts(stack, "triton") >= 1

    # The worker killed while a build waits for it: the job is not lost.
    killed = _crash(stack, "worker")
    queued = _add_version(api, model)
    job = api.wait_job(queued["job"], timeout=300)
    worker_back = time.monotonic() - killed
    assert job["state"] == "succeeded", job
    assert _restarts(stack, "worker") >= 1
    print(f"triton killed: the demo answered again after {triton_back:.1f} s; worker killed: "
          f"the job queued meanwhile succeeded after {worker_back:.1f} s")  # fmt: skip


def test_down_leaves_no_container_network_or_volume(stack: Stack) -> None:
    """Budget: 30 s. Last in this module: it takes the stack down."""
    assert any(stack.leftovers().values())
    stack.down()
    assert stack.leftovers() == {"containers": [], "networks": [], "volumes": []}

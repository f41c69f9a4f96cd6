"""``make node``'s launcher before it starts anything: where it finds the hub, and that it
takes only the hub's URL and broker from a running stack, never the hub's Triton."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from model_store import spawn
from tests.fixtures.waiting import wait_until
from workers.node.launch import (
    LaunchError,
    Node,
    advertised_host,
    hub_settings,
    stack_settings,
    write_token,
)


def _stack_file(var: Path, pid: int) -> None:
    (var / "run").mkdir(parents=True)
    settings = {
        "HUB_URL": "http://127.0.0.1:8080", "REDIS_URL": "redis://127.0.0.1:6390/0",
        "TRITON_URL": "127.0.0.1:8000", "TRITON_API_KEY": "the-hubs-key",
    }  # fmt: skip
    (var / "run" / "connections.json").write_text(json.dumps({"pid": pid, "settings": settings}))


@pytest.fixture
def stack_pid() -> Iterator[int]:
    """A live process whose command line says ``webapp.stack``, as a running stack's does."""
    proc = spawn.start([sys.executable, "-c", "import time; time.sleep(60)", "webapp.stack"])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    try:
        # Just after exec the kernel may still show an empty command line for a moment.
        wait_until(lambda: b"webapp.stack" in cmdline.read_bytes(), 10)
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(10)


def test_a_running_stack_gives_its_url_and_broker_only(tmp_path: Path, stack_pid: int) -> None:
    _stack_file(tmp_path, stack_pid)

    assert stack_settings(tmp_path) == {
        "HUB_URL": "http://127.0.0.1:8080", "REDIS_URL": "redis://127.0.0.1:6390/0",
    }  # fmt: skip
    chosen = hub_settings({"HUB_URL": "http://hub.example:9000/"}, tmp_path)
    assert chosen == {"HUB_URL": "http://hub.example:9000", "REDIS_URL": "redis://127.0.0.1:6390/0"}


def test_a_file_left_by_a_dead_stack_is_ignored(tmp_path: Path) -> None:
    _stack_file(tmp_path, 2**22 + 12345)  # above the default pid_max: no such process

    assert stack_settings(tmp_path) == {}
    with pytest.raises(LaunchError, match="HUB_URL and REDIS_URL not set"):
        hub_settings({}, tmp_path)


def test_the_worker_gets_the_token_in_a_private_file_and_none_of_the_hubs_settings(
    tmp_path: Path,
) -> None:
    env = {
        "HUB_VAR_DIR": str(tmp_path), "HUB_URL": "http://127.0.0.1:8080",
        "REDIS_URL": "redis://127.0.0.1:6390/0", "NODE_TOKEN": "node-token-0123456789abcdef",
        "TRITON_URL": "127.0.0.1:8000", "TRITON_API_KEY": "the-hubs-key",
        "DATABASE_URL": "postgres://hub@db/hub", "DJANGO_SETTINGS_MODULE": "webapp.settings",
    }  # fmt: skip

    worker_env = Node("b", env).worker_env()

    token_file = Path(worker_env["NODE_TOKEN_FILE"])
    assert token_file.read_text().strip() == env["NODE_TOKEN"]
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert worker_env["NODE_REPOSITORY"] == str(tmp_path / "nodes" / "b" / "store" / "repository")
    for key in ("NODE_TOKEN", "TRITON_URL", "TRITON_API_KEY", "DATABASE_URL",
                "DJANGO_SETTINGS_MODULE"):  # fmt: skip
        assert key not in worker_env


def test_the_token_file_replaces_an_older_one_whole(tmp_path: Path) -> None:
    write_token(tmp_path / "run" / "token", "first-token-0123456789")
    write_token(tmp_path / "run" / "token", "second-token-0123456789")

    assert (tmp_path / "run" / "token").read_text() == "second-token-0123456789\n"
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["token"]


def test_the_triton_address_reported_is_one_others_can_reach() -> None:
    assert advertised_host({}) == "127.0.0.1"
    assert advertised_host({"NODE_TRITON_HOST": "10.0.0.7"}) == "10.0.0.7"
    assert advertised_host({"NODE_TRITON_HOST": "0.0.0.0"}) not in ("0.0.0.0", "")
    given = {"NODE_TRITON_HOST": "0.0.0.0", "NODE_TRITON_ADVERTISE_HOST": "edge-1.lan"}
    assert advertised_host(given) == "edge-1.lan"

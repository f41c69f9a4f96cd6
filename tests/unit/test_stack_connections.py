"""Commands typed next to a running `make run` reach its Redis and Triton (and only then)."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from model_store import spawn
from tests.fixtures.waiting import wait_until
from webapp.stack_connections import (
    adopt_running_stack,
    connections_path,
    remove_connections,
    running_stack_settings,
    write_connections,
)

STACK_ENV = {
    "REDIS_URL": "redis://127.0.0.1:40001/0",
    "TRITON_URL": "127.0.0.1:40002",
    "TRITON_API_KEY": "k" * 40,
    "HUB_TRITON_EMBEDDED": "1",
    "SECRET_KEY": "never shared",
}


@pytest.fixture
def stack_pid() -> Iterator[int]:
    """A live process whose command line says `webapp.stack`, as the launcher's does."""
    proc = spawn.start([sys.executable, "-c", "import time; time.sleep(60)", "-m", "webapp.stack"])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    # Until the child has exec'd, /proc shows the parent's command line.
    wait_until(lambda: b"webapp.stack" in cmdline.read_bytes(), timeout=10)
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_running_stack_shares_its_addresses_and_key_privately(
    tmp_path: Path, stack_pid: int
) -> None:
    write_connections(tmp_path, STACK_ENV, stack_pid)
    path = connections_path(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    shared = running_stack_settings(tmp_path)
    assert shared == {k: v for k, v in STACK_ENV.items() if k != "SECRET_KEY"}

    environ = {"TRITON_URL": "10.0.0.9:8000", "REDIS_URL": "  "}
    added = adopt_running_stack(tmp_path, environ)
    assert environ["TRITON_URL"] == "10.0.0.9:8000"  # what the person set wins
    assert environ["REDIS_URL"] == STACK_ENV["REDIS_URL"]
    assert sorted(added) == ["HUB_TRITON_EMBEDDED", "REDIS_URL", "TRITON_API_KEY"]

    remove_connections(tmp_path)
    assert not path.exists()
    remove_connections(tmp_path)  # stopping twice is fine


def test_a_file_left_by_a_dead_or_foreign_process_is_ignored(tmp_path: Path) -> None:
    proc = spawn.start([sys.executable, "-c", "pass", "webapp.stack"])
    proc.wait()
    write_connections(tmp_path, STACK_ENV, proc.pid)  # that stack has gone
    assert running_stack_settings(tmp_path) == {}
    write_connections(tmp_path, STACK_ENV, 1)  # alive, but not a stack
    assert running_stack_settings(tmp_path) == {}


@pytest.mark.parametrize(
    "text", ["", "not json", "[]", '{"pid": "12"}', '{"pid": 1, "settings": [1]}']
)
def test_a_damaged_file_is_ignored(tmp_path: Path, text: str) -> None:
    path = connections_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    environ: dict[str, str] = {}
    assert adopt_running_stack(tmp_path, environ) == []
    assert environ == {}


def test_only_the_shared_settings_are_taken(tmp_path: Path, stack_pid: int) -> None:
    path = connections_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(
        json.dumps({"pid": stack_pid, "settings": {"DATABASE_URL": "x", "TRITON_URL": 5}})
    )
    assert running_stack_settings(tmp_path) == {}

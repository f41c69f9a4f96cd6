"""Stress: every way the project starts a child works from a process that has used gRPC.

The cause this guards against (see ``model_store/spawn.py``): a ``fork()`` that runs
gRPC's fork handlers aborted about one child in fifty with SIGABRT before ``exec``, when
the parent held a gRPC client and the machine was busy. The suite's process is such a
parent: it talks gRPC to the session's Triton. Each loop below goes through the real call
sites (the launcher's ``ManagedProcess``, ``EmbeddedTriton``, the ATC runner) with both
cores kept busy, and every single start must succeed. On the code before the fix the
launcher loop failed (a few children in each few hundred ended with -6).

Budget: about 60 s on 2 cores; marked ``stress`` so that CI runs it once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient

from model_store import spawn
from model_store.compile.atc.running import run_atc
from model_store.runtime.embedded import EmbeddedTriton
from tests.fixtures.ports import free_ports
from tests.fixtures.triton import TritonHandle
from webapp.stack.process import ManagedProcess

pytestmark = [pytest.mark.integration, pytest.mark.stress]

TRUE = "/bin/true"


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """Two processes that spin, so fork and exec race with a loaded scheduler."""
    spinners = [
        spawn.start([sys.executable, "-c", "while True: pass"], die_with_parent=signal.SIGKILL)
        for _ in range(2)
    ]
    try:
        yield
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def grpc_client(embedded_triton: TritonHandle) -> Iterator[grpcclient.InferenceServerClient]:
    """A live gRPC client of the session's Triton: its event engine runs in this process."""
    client = grpcclient.InferenceServerClient(embedded_triton.triton.urls["grpc"])
    for _ in range(20):
        assert client.is_server_live()
        client.get_server_metadata()  # open to anyone (the repository API needs the key)
    yield client
    client.close()


def _keep_grpc_busy(client: grpcclient.InferenceServerClient, i: int) -> None:
    if i % 10 == 0:
        client.is_server_live()


def test_the_launcher_starts_hundreds_of_children_after_grpc(
    grpc_client: grpcclient.InferenceServerClient, busy_cores: None, tmp_path: Path
) -> None:
    outcomes: Counter[str] = Counter()
    for i in range(400):
        child = ManagedProcess(
            "true", [TRUE], log_path=tmp_path / "true.log", env={}, cwd=tmp_path, ready=bool
        )
        child.start()
        assert child.proc is not None
        outcomes[spawn.describe_exit(child.proc.wait(30))] += 1
        child.stop()
        _keep_grpc_busy(grpc_client, i)
    assert outcomes == {"status 0": 400}, (outcomes, (tmp_path / "true.log").read_text()[-2000:])


def test_children_that_die_with_their_parent_start_hundreds_of_times_after_grpc(
    grpc_client: grpcclient.InferenceServerClient, busy_cores: None
) -> None:
    outcomes: Counter[str] = Counter()
    errors: list[str] = []
    for i in range(400):
        proc = spawn.start(
            [TRUE],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            die_with_parent=signal.SIGKILL,
        )
        _, err = proc.communicate(timeout=30)
        outcomes[spawn.describe_exit(proc.returncode)] += 1
        if proc.returncode:
            errors.append(err.decode(errors="replace"))
        _keep_grpc_busy(grpc_client, i)
    assert outcomes == {"status 0": 400}, (outcomes, errors[:3])


def test_the_atc_runner_starts_hundreds_of_times_after_grpc(
    grpc_client: grpcclient.InferenceServerClient, busy_cores: None, tmp_path: Path
) -> None:
    outcomes: Counter[int] = Counter()
    for i in range(200):
        result = run_atc([TRUE], env={}, cwd=tmp_path, on_line=lambda _line: None, timeout=30)
        outcomes[result.returncode] += 1
        _keep_grpc_busy(grpc_client, i)
    assert outcomes == {0: 200}


def test_the_embedded_triton_starts_every_time_after_grpc(
    grpc_client: grpcclient.InferenceServerClient,
    busy_cores: None,
    embedded_triton: TritonHandle,
    tmp_path: Path,
) -> None:
    repository = tmp_path / "repository"
    repository.mkdir()
    for i in range(20):
        http_port, grpc_port, metrics_port = free_ports(3)
        triton = EmbeddedTriton(
            repository,
            embedded_triton.backends_dir,
            http_port=http_port,
            grpc_port=grpc_port,
            metrics_port=metrics_port,
            workdir=tmp_path / "work",
            log_path=tmp_path / f"triton-{i}.log",
            prepare_backends=False,
            exit_timeout_secs=1,
        )
        triton.start()
        try:
            triton.wait_ready(timeout=60)
        finally:
            triton.stop(timeout=5)
        _keep_grpc_busy(grpc_client, 0)

"""The shared test helpers in tests/fixtures do what the suite relies on."""

from __future__ import annotations

import itertools
import socket

import pytest

from model_store.runtime.errors import TritonStartError
from tests.fixtures import triton
from tests.fixtures.multipart import multipart_file
from tests.fixtures.waiting import wait_until


def test_a_missing_tritonserver_skips_here_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise TritonStartError("tritonserver binary not found at /nowhere")

    monkeypatch.setattr(triton, "find_tritonserver", missing)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no embedded tritonserver"):
        triton.require_tritonserver()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no tritonserver in CI"):
        triton.require_tritonserver()


def test_wait_until_returns_the_first_truthy_value_or_fails_naming_what_it_awaited() -> None:
    values = iter([0, None, "ready"])
    assert wait_until(lambda: next(values), 5, interval=0) == "ready"
    with pytest.raises(AssertionError, match=r"the answer: not within 0.01 s \(last value: 0\)"):
        wait_until(lambda: 0, 0.01, interval=0.001, message="the answer")
    with pytest.raises(AssertionError, match="built late"):
        wait_until(lambda: False, 0, message=lambda: "built late")


def test_a_multipart_body_is_one_django_reads_back(rf) -> None:  # type: ignore[no-untyped-def]
    body, content_type = multipart_file(b"\x00model\r\n--bytes", "m.onnx")
    request = rf.post("/", data=body, content_type=content_type)
    upload = request.FILES["file"]
    assert upload.name == "m.onnx" and upload.read() == b"\x00model\r\n--bytes"


def test_ports_come_from_this_workers_own_block_below_the_ephemeral_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.fixtures import ports

    for worker, index in (("gw0", 0), ("gw3", 3)):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        taken = ports.free_ports(5)
        first = ports.FIRST_PORT + index * ports.BLOCK
        assert len(set(taken)) == 5
        assert all(first <= port < first + ports.BLOCK < 32768 for port in taken), taken
        # Each is free now: a server can bind it.
        for port in taken:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fixtures import ports

    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw5")
    monkeypatch.setattr(ports, "_next", itertools.count(0))
    first = ports.FIRST_PORT + 5 * ports.BLOCK
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", first))
        busy.listen()
        assert ports.free_ports(1) == [first + 1]


def test_each_worker_has_its_own_pair_of_redis_databases(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fixtures.services import spare_redis_url
    from tests.fixtures.suites import worker_redis_url

    seen = set()
    for index in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        main = worker_redis_url("redis://127.0.0.1:6379/15")
        seen |= {main, spare_redis_url(main)}
    assert len(seen) == 8
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert worker_redis_url("redis://:pw@10.0.0.1:6380/15") == "redis://:pw@10.0.0.1:6380/13"
    assert spare_redis_url("redis://127.0.0.1:6379/13") == "redis://127.0.0.1:6379/12"


def test_the_suite_line_names_each_suites_time_and_budget() -> None:
    from tests.fixtures.suites import BUDGETS, suite_line

    line = suite_line({"unit": 100.0, "nodes": BUDGETS["nodes"] + 1.0}, {"unit": 3, "nodes": 1})
    assert line.startswith("suite times (summed test time / budget): unit 100 s/330 s (3 tests)")
    assert f"nodes {BUDGETS['nodes'] + 1} s/{BUDGETS['nodes']} s (1 tests) OVER BUDGET" in line

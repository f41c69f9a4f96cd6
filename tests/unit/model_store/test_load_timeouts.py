"""npu_ge loads are given the time GE needs (issue 45): a load timeout per target, and a
timeout is not a failure: a load Triton is still doing is waited out, and only Triton's own
refusal notes that Triton needs a restart (docs/ge-backend.md#loading-takes-minutes).

Triton is faked at the boundary (its load call and repository index); the time past the
timeout runs on an injected clock, so no test sleeps for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from model_store import load_timeouts
from model_store.load_timeouts import LoadTimeoutSettingError, read_load_timeouts
from model_store.runtime.errors import TritonRequestError, TritonUnavailable
from model_store.serving import loading
from model_store.serving.loading import load_and_wait, load_serving
from model_store.serving.restart_needed import needs_restart
from model_store.serving.switching import _Switch
from model_store.store import ModelStore
from model_store.targets import known_targets
from workers.node.settings import NodeSettingsError, read_settings

# -- which timeout a target gets ----------------------------------------------------------------


def test_npu_ge_gets_600_s_and_the_others_keep_todays_values() -> None:
    hub = read_load_timeouts({}, default_s=180.0)
    node = read_load_timeouts({}, default_s=120.0)
    assert {t: hub.for_target(t) for t in load_timeouts.TARGETS} == {
        "onnxruntime": 180.0, "npu_ge": 600.0, "acl": 180.0, "external": 180.0,
    }  # fmt: skip
    assert (node.for_target("npu_ge"), node.for_target("onnxruntime")) == (600.0, 120.0)
    assert hub.for_target(None) == hub.for_target("python") == 180.0


def test_the_environment_overrides_one_target_or_all() -> None:
    own = read_load_timeouts({"LOAD_TIMEOUT_NPU_GE_SECONDS": "900"}, default_s=180.0)
    assert (own.for_target("npu_ge"), own.for_target("acl")) == (900.0, 180.0)
    lower = read_load_timeouts({"LOAD_TIMEOUT_NPU_GE_SECONDS": "300"}, default_s=180.0)
    assert lower.for_target("npu_ge") == 300.0  # only its own variable sets it lower
    general = read_load_timeouts({"LOAD_TIMEOUT_SECONDS": "60"}, default_s=180.0)
    assert (general.for_target("onnxruntime"), general.for_target("npu_ge")) == (60.0, 600.0)
    longer = read_load_timeouts({"LOAD_TIMEOUT_SECONDS": "900"}, default_s=180.0)
    assert longer.for_target("npu_ge") == 900.0  # a longer general one is not cut to 600
    acl = read_load_timeouts({"LOAD_TIMEOUT_ACL_SECONDS": " 240 "}, default_s=180.0)
    assert acl.for_target("acl") == 240.0


@pytest.mark.parametrize("value", ["ten", "0", "-5", "nan", "1e9"])
def test_a_value_that_is_no_number_of_seconds_is_named(value: str) -> None:
    with pytest.raises(LoadTimeoutSettingError, match="LOAD_TIMEOUT_NPU_GE_SECONDS must be"):
        read_load_timeouts({"LOAD_TIMEOUT_NPU_GE_SECONDS": value}, default_s=180.0)


def test_the_targets_named_are_every_known_target() -> None:
    assert set(load_timeouts.TARGETS) == {target.name for target in known_targets()}


def test_a_node_reads_the_same_variables(tmp_path: Path) -> None:
    env = {
        "NODE_NAME": "b", "HUB_URL": "http://hub:8080", "NODE_TOKEN": "node-token-0123456789ab",
        "REDIS_URL": "redis://r:6379/0", "TRITON_URL": "t:9000", "TRITON_GRPC_URL": "t:9001",
        "TRITON_METRICS_URL": "t:9002", "NODE_REPOSITORY": str(tmp_path / "s" / "repository"),
    }  # fmt: skip
    node = read_settings(env).load_timeouts
    assert (node.for_target("npu_ge"), node.for_target("onnxruntime")) == (600.0, 120.0)
    assert (
        read_settings(env | {"LOAD_TIMEOUT_NPU_GE_SECONDS": "1200"}).load_timeouts.for_target(
            "npu_ge"
        )
        == 1200.0
    )
    with pytest.raises(NodeSettingsError, match="LOAD_TIMEOUT_SECONDS must be"):
        read_settings(env | {"LOAD_TIMEOUT_SECONDS": "soon"})


# -- a load that outlives its timeout -----------------------------------------------------------


class Clock:
    """Monotonic time that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Triton:
    """Triton's load call and repository index, for one model at version 1.

    ``states`` are what the index shows on successive polls (the last one stays); the load
    call blocks until ``finish`` is set, then raises ``load_error`` if there is one.
    """

    def __init__(self, states: list[tuple[str, str]], *, blocks: bool = False) -> None:
        self.states = list(states)
        self.finish = threading.Event()
        if not blocks:
            self.finish.set()
        self.load_error: Exception | None = None
        self.index_error: Exception | None = None
        self.polls = 0

    def load(self, name: str, config: object = None) -> None:
        self.finish.wait(10)
        if self.load_error is not None:
            raise self.load_error

    def unload(self, name: str, unload_dependents: bool = False) -> None:
        pass

    def repository_index(self) -> list[dict[str, str]]:
        if self.index_error is not None:
            raise self.index_error
        self.polls += 1
        state, reason = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        if state == "READY":
            self.finish.set()  # Triton answers the load call once the model is READY
        return [{"name": "ge", "version": "1", "state": state, "reason": reason}]


@pytest.fixture
def ge_store(tmp_path: Path) -> ModelStore:
    """A repository whose model ``ge`` is an npu_ge one, pinned to version 1."""
    store = ModelStore(tmp_path / "store")
    store.model_dir("ge").mkdir(parents=True)
    store.config_path("ge").write_text(
        'name: "ge"\nbackend: "npu_ge"\nversion_policy { specific { versions: [1] } }\n'
    )
    return store


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Past the timeout the index is asked once a second; the tests on real time ask sooner."""
    monkeypatch.setattr(loading, "LATE_POLL_S", 0.005)
    yield


LOADING = ("LOADING", "")
READY = ("READY", "")


def _wait(triton: Triton, clock: Clock, **kw: float) -> tuple[bool, str, bool]:
    return load_and_wait(
        triton, "ge", [1], kw.get("timeout_s", 0.01), 0.5,
        ceiling_s=kw.get("ceiling_s", 1800.0), clock=clock, sleep=clock.sleep,
    )  # fmt: skip


def test_a_load_that_outlives_its_timeout_and_then_is_ready_succeeds() -> None:
    clock, triton = Clock(), Triton([LOADING] * 20 + [READY], blocks=True)
    ok, reason, still_loading = _wait(triton, clock)
    assert (ok, reason, still_loading) == (True, "", False)
    assert clock.now - 1000.0 > 10  # it waited well past the 0.01 s timeout, on the clock


def test_still_loading_at_the_ceiling_is_said_as_such_not_as_a_failure() -> None:
    clock, triton = Clock(), Triton([LOADING], blocks=True)
    ok, reason, still_loading = _wait(triton, clock, ceiling_s=30.0)
    triton.finish.set()
    assert (ok, still_loading) == (False, True)
    assert "still loading ge after 30 s" in reason and "has not failed" in reason
    assert 30.0 <= clock.now - 1000.0 < 32.0


def test_a_client_time_out_while_the_index_shows_loading_is_waited_out() -> None:
    """The client's own load time-out (TRITON_... 600 s) may end before a longer npu_ge one."""
    clock, triton = Clock(), Triton([LOADING] * 5 + [READY])
    triton.load_error = TritonUnavailable("load model 'ge': timed out")
    assert _wait(triton, clock) == (True, "", False)


def test_a_real_unavailable_still_fails_at_once() -> None:
    clock, triton = Clock(), Triton([("UNAVAILABLE", "Internal: GE init failed: 507011")])
    triton.load_error = TritonRequestError("x", triton_message="GE init failed: 507011")
    ok, reason, still_loading = _wait(triton, clock)
    assert (ok, still_loading) == (False, False)
    assert reason == "GE init failed: 507011"
    assert clock.now == 1000.0  # no waiting on a verdict


def test_triton_gone_fails_as_before_without_waiting() -> None:
    clock, triton = Clock(), Triton([LOADING])
    triton.load_error = TritonUnavailable("connection refused")
    triton.index_error = TritonUnavailable("connection refused")
    ok, reason, still_loading = _wait(triton, clock)
    assert (ok, still_loading) == (False, False)
    assert "connection refused" in reason and clock.now == 1000.0


def test_a_fast_load_is_not_slowed() -> None:
    """The onnxruntime path: Triton answers the load call, the first index poll says READY."""
    clock, triton = Clock(), Triton([READY])
    assert _wait(triton, clock, timeout_s=180.0) == (True, "", False)
    assert (triton.polls, clock.now) == (1, 1000.0)


# -- the "Triton needs a restart" note ----------------------------------------------------------


def test_load_serving_outliving_its_timeout_then_ready_notes_no_restart(
    ge_store: ModelStore, quick: None
) -> None:
    triton = Triton([LOADING] * 5 + [READY], blocks=True)
    result = load_serving(ge_store, triton, "ge", timeout_s=0.05, poll_s=0.001)
    assert result.ok, result.reason
    assert needs_restart(ge_store) is None


def test_load_serving_still_loading_notes_no_restart(ge_store: ModelStore, quick: None) -> None:
    triton = Triton([LOADING], blocks=True)
    result = load_serving(ge_store, triton, "ge", timeout_s=0.01, poll_s=0.001)
    triton.finish.set()
    assert not result.ok and "still loading" in str(result.reason)
    assert needs_restart(ge_store) is None


def test_load_serving_refused_by_triton_still_notes_a_restart(ge_store: ModelStore) -> None:
    triton = Triton([("UNAVAILABLE", "GE init failed")])
    triton.load_error = TritonRequestError("x", triton_message="GE init failed")
    result = load_serving(ge_store, triton, "ge", timeout_s=5.0, poll_s=0.001)
    noted = needs_restart(ge_store)
    assert not result.ok and noted is not None
    assert (noted["model"], noted["reason"]) == ("ge", "GE init failed")


def test_a_switch_still_loading_logs_so_and_notes_no_restart(
    ge_store: ModelStore, quick: None
) -> None:
    lines: list[str] = []
    triton = Triton([LOADING], blocks=True)
    switch = _Switch(ge_store, triton, "ge", 1, None, 0.01, 0.001, lines.append)
    ok, _reason, still_loading = switch.load_target()
    triton.finish.set()
    assert (ok, still_loading) == (False, True)
    assert any("is not READY yet" in line for line in lines)
    assert not any("needs a restart" in line for line in lines)
    assert needs_restart(ge_store) is None

"""model_store.serving against the real embedded Triton: switch, roll back, fail, restore.

The store is rooted at the session Triton's own directory (the fixture makes
``<tmp>/triton/repository``), so ``ModelStore(root).repository_dir`` is exactly what
that Triton reads. Each test packages its versions under ``sources/`` the way the compile
pipeline does (``package/config.pbtxt`` + ``package/<v>/model.onnx``), with weights that
differ per version, so every response tells which version answered.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from model_store.config import DynamicBatching, ModelConfig, TensorSpec, render_pbtxt
from model_store.errors import NotFound
from model_store.runtime.client import TritonRuntime
from model_store.serving.directory_swap import RETIRED_ROOT, STAGING_ROOT
from model_store.serving.loading import load_serving, unload_model
from model_store.serving.packages import serving_config
from model_store.serving.state import repository_state
from model_store.serving.switching import SwitchResult, switch_version
from model_store.serving.triton_index import model_rows, ready_versions
from model_store.store import ModelStore
from tests.fixtures.traffic import Traffic
from tests.fixtures.triton import TritonHandle, mlp_onnx_bytes, reference_outputs, wait_for_state

pytestmark = pytest.mark.integration

X = np.random.default_rng(7).standard_normal((2, 4)).astype(np.float32)
CORRUPT = b"this is not an ONNX protobuf"


@pytest.fixture
def store(embedded_triton: TritonHandle) -> ModelStore:
    store = ModelStore(embedded_triton.repository.parent)
    assert store.repository_dir == embedded_triton.repository.resolve()
    return store


def _config(name: str, version: int, backend: str = "onnxruntime") -> ModelConfig:
    return ModelConfig(
        name=name,
        backend=backend,
        max_batch_size=8,
        inputs=[TensorSpec("x", "TYPE_FP32", [4])],
        outputs=[TensorSpec("y", "TYPE_FP32", [3])],
        dynamic_batching=DynamicBatching(max_queue_delay_microseconds=500),
        instance_count=1,
        version_policy_specific=[version],
        parameters={"intra_op_thread_count": "1"},
    )


def _package(
    store: ModelStore, name: str, version: int, onnx_bytes: bytes, *, install: bool = False
) -> None:
    """Writes ``sources/<name>/<v>/package`` as the pipeline does (and installs it, if asked,
    side by side in the repository as packaging does for onnxruntime/acl)."""
    package = store.package_dir(name, version)
    (package / str(version)).mkdir(parents=True)
    (package / str(version) / "model.onnx").write_bytes(onnx_bytes)
    (package / "config.pbtxt").write_text(render_pbtxt(_config(name, version)))
    if install:
        with store.stage_version(name, version) as staging:
            (staging / "model.onnx").write_bytes(onnx_bytes)


def _models(store: ModelStore, name: str, seeds: dict[int, int], **kw: Any) -> dict[int, bytes]:
    """Packages one mlp per version (seed per version); returns the ONNX bytes by version."""
    models = {version: mlp_onnx_bytes(seed=seed) for version, seed in seeds.items()}
    for version, payload in models.items():
        _package(store, name, version, payload, **kw)
    return models


def _answered_by(y: np.ndarray, refs: dict[int, np.ndarray]) -> int | None:
    return next((v for v, ref in refs.items() if np.allclose(y, ref, atol=1e-5)), None)


def _serve(
    store: ModelStore, runtime: TritonRuntime, name: str, target: str, to: int, frm: int | None
) -> SwitchResult:
    lines: list[str] = []
    result = switch_version(
        store,
        runtime,
        name=name,
        target=target,
        to_version=to,
        from_version=frm,
        timeout_s=60,
        on_log=lines.append,
    )
    assert lines, "the switch logged nothing"
    return result


def _traffic(triton: TritonHandle, name: str, refs: dict[int, np.ndarray]) -> Traffic:
    """Four client threads sending X to ``name`` back to back until the block ends."""
    return Traffic(triton.triton.urls["http"], name, {"x": X}, refs, threads=4, limit_s=30)


def _leftovers(store: ModelStore, name: str) -> list[Path]:
    found: list[Path] = []
    for folder in (STAGING_ROOT, RETIRED_ROOT):
        if (store.root / folder).is_dir():
            found += [p for p in (store.root / folder).iterdir() if p.name.startswith(name)]
    return found


# --------------------------------------------------------------------------- tests


def test_switch_and_rollback_under_load_lose_no_request(
    store: ModelStore, embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime
    # v1 installed side by side at packaging time; v2 missing from the repository (as after
    # a manual cleanup), so the switch installs it from its package.
    models = _models(store, model_name, {1: 1}, install=True)
    models |= _models(store, model_name, {2: 2})
    refs = {v: reference_outputs(payload, X) for v, payload in models.items()}
    assert not np.allclose(refs[1], refs[2])
    assert not store.version_dir(model_name, 2).exists()

    first = _serve(store, runtime, model_name, "onnxruntime", 1, None)
    assert first.ok, first.reason
    assert _answered_by(runtime.infer(model_name, {"x": X})["y"], refs) == 1

    with _traffic(embedded_triton, model_name, refs) as load:
        load.wait_for(20)
        forward = _serve(store, runtime, model_name, "onnxruntime", 2, 1)
        forward_end = time.monotonic()
        load.wait_for(50, after=forward_end)
        rollback_start = time.monotonic()
        back = _serve(store, runtime, model_name, "onnxruntime", 1, 2)
        rollback_end = time.monotonic()
        load.wait_for(50, after=rollback_end)

    assert forward.ok, forward.reason
    assert back.ok, back.reason
    assert store.version_dir(model_name, 2).is_dir()
    assert serving_config(store, model_name, 1).version_policy_specific == [1]
    failed = load.failures()
    assert failed == [], failed[:3]
    assert {r.version for r in load.outcomes} <= {1, 2}
    after_forward = load.between(forward_end, rollback_start)
    after_rollback = load.between(rollback_end)
    assert after_forward and {r.version for r in after_forward} == {2}
    assert after_rollback and {r.version for r in after_rollback} == {1}
    wait_for_state(runtime, model_name, "UNAVAILABLE", version="2")

    # Measured numbers, for the record (run with -s to see them).
    print(
        f"\n[serving] {len(load.outcomes)} requests from 4 threads, {len(failed)} failed; "
        f"v1->v2 switch {forward.duration_s:.3f} s (Triton load {forward.load_s:.3f} s, "
        f"phases {forward.phases}); rollback v2->v1 {back.duration_s:.3f} s "
        f"(Triton load {back.load_s:.3f} s, phases {back.phases})"
    )


def test_failed_switch_keeps_the_old_version_and_its_config(
    store: ModelStore, embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime
    models = _models(store, model_name, {1: 1}, install=True)
    _package(store, model_name, 2, CORRUPT, install=True)
    assert _serve(store, runtime, model_name, "onnxruntime", 1, None).ok
    config_path = store.config_path(model_name)
    before = config_path.read_bytes()

    result = _serve(store, runtime, model_name, "onnxruntime", 2, 1)

    assert not result.ok
    assert result.restored
    assert "onnxruntime could not load" in result.reason  # Triton's own reason
    assert "Protobuf parsing failed" in result.reason
    assert "At:" not in result.reason  # the stub's traceback is dropped
    assert result.load_s is not None
    assert config_path.read_bytes() == before
    wait_for_state(runtime, model_name, "READY", version="1")
    y = runtime.infer(model_name, {"x": X})["y"]
    np.testing.assert_allclose(y, reference_outputs(models[1], X), atol=1e-5)
    state = repository_state(store, runtime, model_name)
    assert state["policy_versions"] == [1]
    assert state["ready_versions"] == [1]
    assert state["triton_versions"]["2"]["state"] == "UNAVAILABLE"
    assert "onnxruntime could not load" in state["triton_versions"]["2"]["reason"]
    assert "At:" not in state["triton_versions"]["2"]["reason"]
    assert state["problems"] == []


def test_failed_first_serve_removes_the_config_it_wrote(
    store: ModelStore, embedded_triton: TritonHandle, model_name: str
) -> None:
    _package(store, model_name, 1, CORRUPT)
    result = _serve(store, embedded_triton.runtime, model_name, "onnxruntime", 1, None)
    assert not result.ok
    assert result.restored
    assert "onnxruntime could not load" in result.reason
    assert not store.config_path(model_name).exists()


def test_npu_ge_model_dir_holds_only_the_serving_version(
    store: ModelStore, embedded_triton: TritonHandle, model_name: str
) -> None:
    """The npu_ge file choreography, run by our onnxruntime backend.

    There is no GE backend here, so the packaged configs say ``backend: "onnxruntime"``
    while the switch is asked for target ``npu_ge``: what is tested is the directory swap
    (one version per model directory, swap back on failure), not GE itself.
    """
    runtime = embedded_triton.runtime
    models = _models(store, model_name, {1: 1, 2: 2})
    _package(store, model_name, 3, CORRUPT)
    refs = {v: reference_outputs(payload, X) for v, payload in models.items()}
    model_dir = store.model_dir(model_name)

    def onnx_files() -> list[str]:
        return sorted(str(p.relative_to(model_dir)) for p in model_dir.rglob("*.onnx"))

    assert _serve(store, runtime, model_name, "npu_ge", 1, None).ok
    assert onnx_files() == ["1/model.onnx"]
    with _traffic(embedded_triton, model_name, refs) as load:
        load.wait_for(20)
        result = _serve(store, runtime, model_name, "npu_ge", 2, 1)
        switched = time.monotonic()
        load.wait_for(20, after=switched)
    assert result.ok, result.reason
    assert [r for r in load.outcomes if r.error] == []
    assert {r.version for r in load.between(switched)} == {2}
    assert store.list_versions(model_name) == [2]
    assert onnx_files() == ["2/model.onnx"]
    assert _leftovers(store, model_name) == []
    before = store.config_path(model_name).read_bytes()

    failed = _serve(store, runtime, model_name, "npu_ge", 3, 2)
    assert not failed.ok
    assert failed.restored
    assert "onnxruntime could not load" in failed.reason
    assert onnx_files() == ["2/model.onnx"]
    assert store.config_path(model_name).read_bytes() == before
    assert _leftovers(store, model_name) == []
    wait_for_state(runtime, model_name, "READY", version="2")
    np.testing.assert_allclose(runtime.infer(model_name, {"x": X})["y"], refs[2], atol=1e-5)
    print(
        f"\n[serving] npu_ge swap v1->v2 {result.duration_s:.3f} s "
        f"(Triton load {result.load_s:.3f} s), failed v3 + swap back {failed.duration_s:.3f} s"
    )


def test_load_serving_brings_the_serving_version_back_after_unload(
    store: ModelStore, embedded_triton: TritonHandle, model_name: str
) -> None:
    runtime = embedded_triton.runtime
    models = _models(store, model_name, {1: 1, 2: 2}, install=True)
    assert _serve(store, runtime, model_name, "onnxruntime", 2, None).ok

    # What a Triton restart in explicit mode amounts to: the model is no longer loaded.
    unload_model(runtime, model_name, timeout_s=30)
    assert not runtime.model_ready(model_name)
    state = repository_state(store, runtime, model_name)
    assert state["ready_versions"] == []
    assert state["policy_versions"] == [2]
    assert any("Triton has it UNAVAILABLE" in p for p in state["problems"])

    assert load_serving(store, runtime, model_name, timeout_s=30) == (True, "")
    wait_for_state(runtime, model_name, "READY", version="2")
    np.testing.assert_allclose(
        runtime.infer(model_name, {"x": X})["y"], reference_outputs(models[2], X), atol=1e-5
    )
    assert not runtime.model_ready(model_name, "1")


def test_repository_state_lists_old_leftovers_only(
    store: ModelStore, embedded_triton: TritonHandle, model_name: str
) -> None:
    _models(store, model_name, {1: 1}, install=True)
    old = store.model_dir(model_name) / ".staging-0123abcd"
    fresh = store.model_dir(model_name) / ".staging-4567cdef"
    for path in (old, fresh):
        path.mkdir()
    aged = time.time() - 3600
    os.utime(old, (aged, aged))

    state = repository_state(store, embedded_triton.runtime, model_name)

    assert state["stale_staging"] == [str(old)]
    assert state["config_present"] is False
    assert state["version_dirs"] == [1]
    assert state["onnx_files"] == ["1/model.onnx"]
    assert state["triton_reachable"] is True


def test_load_serving_without_config_says_so(store: ModelStore, model_name: str) -> None:
    runtime = TritonRuntime("127.0.0.1:9")  # never contacted
    ok, reason = load_serving(store, runtime, model_name)
    assert not ok
    assert "no config.pbtxt" in reason


# --------------------------------------------------------------------------- without Triton


class _SlowRuntime:
    """Triton that takes longer to load than the caller waits; records unloads."""

    def __init__(self, load_s: float) -> None:
        self.load_s = load_s
        self.unloaded: list[str] = []

    def load(self, name: str, config: dict[str, Any] | None = None) -> None:
        time.sleep(self.load_s)  # a load that outlasts the caller's timeout, on purpose

    def unload(self, name: str, unload_dependents: bool = False) -> None:
        self.unloaded.append(name)

    def repository_index(self) -> list[dict[str, str]]:
        return []


def test_switch_that_times_out_is_abandoned_and_undone(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    _package(store, "slow", 1, mlp_onnx_bytes())
    runtime = _SlowRuntime(load_s=2.0)
    started = time.monotonic()
    result = switch_version(
        store, runtime, name="slow", target="onnxruntime", to_version=1, from_version=None,
        timeout_s=0.3,
    )  # fmt: skip
    assert time.monotonic() - started < 1.5
    assert not result.ok
    assert "still loading" in result.reason
    assert result.restored
    assert runtime.unloaded == ["slow"]  # the abandoned load must not serve later
    assert not store.config_path("slow").exists()


def test_switch_to_an_unpackaged_version_changes_nothing(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    _package(store, "m", 1, mlp_onnx_bytes(), install=True)
    store.write_config("m", render_pbtxt(_config("m", 1)))
    before = store.config_path("m").read_bytes()
    with pytest.raises(NotFound, match="no packaged config"):
        switch_version(
            store, _SlowRuntime(0), name="m", target="onnxruntime", to_version=2, from_version=1
        )
    assert store.config_path("m").read_bytes() == before
    assert store.list_versions("m") == [1]


def test_a_router_that_names_versions_is_handed_over_before_the_old_one_unloads(
    store: ModelStore, embedded_triton: TritonHandle, model_name: str
) -> None:
    """A gateway sends each call to the version it believes serves, by number. With
    ``hand_over`` the old version is still READY when the router moves, and unloaded only
    after; a router that cannot move leaves the old version serving alone."""
    runtime = embedded_triton.runtime
    _models(store, model_name, {1: 1, 2: 2, 3: 3}, install=True)
    assert _serve(store, runtime, model_name, "onnxruntime", 1, None).ok
    routed = {"version": "1"}
    ready_at_hand_over: list[list[int]] = []
    failures: list[str] = []
    stop = threading.Event()

    def move() -> None:
        ready_at_hand_over.append(ready_versions(model_rows(runtime, model_name)))
        routed["version"] = "2"

    def pinned_calls() -> None:
        while not stop.is_set():
            try:
                runtime.infer(model_name, {"x": X}, version=routed["version"])
            except Exception as exc:  # any failure is the finding
                failures.append(f"v{routed['version']}: {exc}")

    callers = [threading.Thread(target=pinned_calls, daemon=True) for _ in range(3)]
    for caller in callers:
        caller.start()
    time.sleep(0.5)
    result = switch_version(store, runtime, name=model_name, target="onnxruntime",
                            to_version=2, from_version=1, timeout_s=60, hand_over=move)  # fmt: skip
    time.sleep(0.5)
    stop.set()
    for caller in callers:
        caller.join(30)
    assert result.ok, result.reason
    assert ready_at_hand_over == [[1, 2]]
    assert failures == [], failures[:3]
    assert serving_config(store, model_name, 2).version_policy_specific == [2]
    wait_for_state(runtime, model_name, "UNAVAILABLE", version="1")

    def refuse() -> None:
        raise RuntimeError("the router is down")

    refused = switch_version(
        store, runtime, name=model_name, target="onnxruntime", to_version=3, from_version=2,
        timeout_s=60, hand_over=refuse,
    )  # fmt: skip
    assert not refused.ok and refused.restored and "router is down" in refused.reason
    runtime.infer(model_name, {"x": X}, version="2")  # still served
    wait_for_state(runtime, model_name, "UNAVAILABLE", version="3")

"""OmSession and run_om against the fake pyACL, on OMs built by the fake ATC.

The fake ``acl`` (tests/fakes/acl) runs the ONNX model stored in the fake OM
with onnxruntime, so outputs can be compared with onnxruntime on the source.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from model_store.ascend import om_runner
from model_store.ascend.om_runner import (
    OmInputMismatch,
    OmRunFailed,
    PyAclUnavailable,
    acl_available,
    run_om,
)
from model_store.backends.acl import model as backend
from model_store.backends.acl.model import (
    AclError,
    OmSession,
    RequestError,
    TensorSpec,
    check_signature,
    finalize_acl,
)
from model_store.compile.atc.environment import atc_environment, require_atc
from model_store.compile.atc.options import AtcOptions, build_atc_command
from model_store.compile.atc.running import run_atc
from tests.fakes.cann import make_fake_toolkit
from tests.fixtures.triton import mlp_onnx_bytes, reference_outputs

ORIGIN = {"precision_mode_v2": "origin"}
BuildOm = Callable[..., Path]


@pytest.fixture(scope="module")
def build_om(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BuildOm]:
    """Compiles the MLP with the fake ATC: ``build_om(name, **AtcOptions fields) -> Path``."""
    root = tmp_path_factory.mktemp("om")
    status = require_atc(make_fake_toolkit(root / "Ascend"))
    source = root / "mlp.onnx"
    source.write_bytes(mlp_onnx_bytes())
    env = atc_environment(status, os.environ)

    def build(name: str, **options: object) -> Path:
        argv = build_atc_command(
            status.atc_path or "",
            source,
            root / name,
            AtcOptions(soc_version="Ascend310P3", **options),  # type: ignore[arg-type]
        )
        result = run_atc(argv, env=env, cwd=root, on_line=lambda _: None)
        result.raise_for_failure()
        assert result.om_path is not None
        return result.om_path

    yield build


@pytest.fixture
def fake_acl(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The fake pyACL as ``acl``, in a fresh state, with our process-wide flags reset."""
    module = importlib.import_module("tests.fakes.acl")
    module._fake.reset()
    monkeypatch.setitem(sys.modules, "acl", module)
    monkeypatch.setattr(backend, "_initialized_by_us", set())
    monkeypatch.setattr(backend, "_open_sessions", 0)
    return module


def _x(batch: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((batch, 4)).astype(np.float32)


# --------------------------------------------------------------------------- results


def test_outputs_equal_onnxruntime_on_the_source(fake_acl: ModuleType, build_om: BuildOm) -> None:
    om = build_om("static_origin", input_shape="x:2,4", **ORIGIN)
    x = _x(2)
    with OmSession(om) as session:
        assert [(t.name, t.dims, t.dtype) for t in session.inputs] == [("x", [2, 4], np.float32)]
        assert [(t.name, t.dims) for t in session.outputs] == [("y", [2, 3])]
        outputs = session.run({"x": x})
    np.testing.assert_allclose(outputs["y"], reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)


def test_default_precision_computes_in_fp16_like_the_npu(
    fake_acl: ModuleType, build_om: BuildOm
) -> None:
    om = build_om("static_fp16", input_shape="x:2,4")
    x = _x(2)
    y = run_om(om, {"x": x})["y"]
    reference = reference_outputs(mlp_onnx_bytes(), x)
    np.testing.assert_allclose(y, reference, rtol=1e-2, atol=1e-2)
    assert not np.array_equal(y, reference)


def test_noise_makes_outputs_drift_for_tolerance_tests(
    fake_acl: ModuleType, build_om: BuildOm, monkeypatch: pytest.MonkeyPatch
) -> None:
    om = build_om("noisy", input_shape="x:2,4", **ORIGIN)
    monkeypatch.setenv("FAKE_ACL_NOISE", "0.5")
    x = _x(2)
    y = run_om(om, {"x": x})["y"]
    assert np.abs(y - reference_outputs(mlp_onnx_bytes(), x)).max() > 0.05


def test_a_dynamic_batch_om_pads_to_the_next_gear(fake_acl: ModuleType, build_om: BuildOm) -> None:
    om = build_om("dynamic", input_shape="x:-1,4", dynamic_batch_size=[1, 2, 4, 8], **ORIGIN)
    with OmSession(om) as session:
        assert session.gears == [1, 2, 4, 8]
        assert [t.name for t in session.inputs] == ["x"]  # the gear input is internal
        for batch in (1, 3, 8):
            x = _x(batch, seed=batch)
            y = session.run({"x": x})["y"]
            np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)
        with pytest.raises(RequestError, match="larger than the largest compiled batch 8"):
            session.run({"x": _x(9)})
        x = _x(19)
        y = session.run({"x": x}, split_batch=True)["y"]
        np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)
    calls = fake_acl._fake.CALLS
    assert calls.count("mdl.set_dynamic_batch_size") == calls.count("mdl.execute")


def test_a_fixed_batch_om_splits_and_pads_when_asked(
    fake_acl: ModuleType, build_om: BuildOm
) -> None:
    om = build_om("fixed4", input_shape="x:4,4", **ORIGIN)
    with OmSession(om) as session:
        assert session.batch_axis_size == 4
        x = _x(10)
        y = session.run({"x": x}, split_batch=True)["y"]
    np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)
    assert fake_acl._fake.CALLS.count("mdl.execute") == 3  # 4 + 4 + 2 padded to 4


def test_runs_from_another_thread_make_the_context_current(
    fake_acl: ModuleType, build_om: BuildOm
) -> None:
    om = build_om("threads", input_shape="x:2,4", **ORIGIN)
    results: list[np.ndarray] = []
    with OmSession(om) as session:
        worker = threading.Thread(target=lambda: results.append(session.run({"x": _x(2)})["y"]))
        worker.start()
        worker.join()
    assert len(results) == 1


# --------------------------------------------------------------------------- errors


def test_a_wrong_input_shape_is_a_clear_error(fake_acl: ModuleType, build_om: BuildOm) -> None:
    om = build_om("shape", input_shape="x:2,4", **ORIGIN)
    with OmSession(om) as session:
        with pytest.raises(
            RequestError, match=r"shape \[3, 4\] does not match the compiled shape \[2, 4\]"
        ):
            session.run({"x": _x(3)})
        with pytest.raises(RequestError, match="--input_shape"):
            session.run({"x": np.zeros((2, 5), np.float32)})
        with pytest.raises(RequestError, match="data type float64 does not match float32"):
            session.run({"x": np.zeros((2, 4), np.float64)})
        with pytest.raises(RequestError, match=r"input\(s\) \['x'\] missing"):
            session.run({})
        with pytest.raises(RequestError, match=r"unknown input\(s\) \['z'\]"):
            session.run({"x": _x(2), "z": _x(2)})
    with pytest.raises(OmInputMismatch, match="does not match the compiled shape") as info:
        run_om(om, {"x": _x(3)})
    assert info.value.code == "om_input_mismatch"


def test_a_missing_device_is_reported_with_its_id(fake_acl: ModuleType, build_om: BuildOm) -> None:
    om = build_om("device", input_shape="x:2,4")
    with pytest.raises(OmRunFailed, match=r"acl.rt.set_device\(3\) failed with ACL error 107001"):
        run_om(om, {"x": _x(2)}, device_id=3)
    assert fake_acl._fake.leaks() == {"initialized": 1}


def test_a_file_that_is_not_an_om_fails_to_load_and_releases_everything(
    fake_acl: ModuleType, tmp_path: Path
) -> None:
    bogus = tmp_path / "model.om"
    bogus.write_bytes(b"not an om")
    with pytest.raises(AclError, match="load_from_file failed with ACL error 100013"):
        OmSession(bogus)
    assert fake_acl._fake.leaks() == {"initialized": 1}
    with pytest.raises(AclError, match="does not exist"):
        OmSession(tmp_path / "absent.om")


def test_an_om_for_another_chip_fails_to_load(
    fake_acl: ModuleType, build_om: BuildOm, monkeypatch: pytest.MonkeyPatch
) -> None:
    om = build_om("chip", input_shape="x:2,4")
    monkeypatch.setenv("FAKE_ACL_SOC", "Ascend910B4")
    with pytest.raises(OmRunFailed, match="not an OM for this chip"):
        run_om(om, {"x": _x(2)})


def test_without_pyacl_the_runner_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "acl", None)  # makes "import acl" fail
    ok, reason = acl_available()
    assert not ok
    assert "set_env.sh" in reason
    with pytest.raises(PyAclUnavailable, match="pyACL is not available") as info:
        run_om(tmp_path / "m.om", {})
    assert info.value.code == "acl_missing"


def test_acl_available_with_the_fake(fake_acl: ModuleType) -> None:
    ok, reason = acl_available()
    assert ok, reason
    assert "pyACL found" in reason
    assert om_runner.acl_available is acl_available


# --------------------------------------------------------------------------- lifecycle


def test_teardown_calls_every_release_function_in_the_documented_order(
    fake_acl: ModuleType, build_om: BuildOm
) -> None:
    om = build_om("teardown", input_shape="x:2,4")
    session = OmSession(om)
    session.run({"x": _x(2)})
    start = len(fake_acl._fake.CALLS)
    assert session.close() == []
    assert session.close() == []  # twice is harmless
    assert finalize_acl(fake_acl) == 0
    calls = fake_acl._fake.CALLS[start:]
    order = [
        "destroy_data_buffer",
        "mdl.destroy_dataset",
        "mdl.unload",
        "mdl.destroy_desc",
        "rt.free",
        "rt.free_host",
        "rt.destroy_context",
        "rt.reset_device",
        "finalize",
    ]
    positions = [calls.index(name) for name in order]
    assert positions == sorted(positions), calls
    assert calls.count("destroy_data_buffer") == 2  # one input, one output
    assert calls.count("rt.free") == 2
    assert fake_acl._fake.leaks() == {}
    with pytest.raises(AclError, match="closed"):
        session.run({"x": _x(2)})


def test_acl_is_initialised_once_per_process(fake_acl: ModuleType, build_om: BuildOm) -> None:
    om = build_om("twice", input_shape="x:2,4")
    run_om(om, {"x": _x(2)})
    run_om(om, {"x": _x(2)})
    assert fake_acl._fake.CALLS.count("init") == 1
    assert fake_acl._fake.leaks() == {"initialized": 1}  # finalized at exit, not per run


def test_finalize_waits_for_open_sessions_and_for_our_own_init(
    fake_acl: ModuleType, build_om: BuildOm
) -> None:
    om = build_om("open", input_shape="x:2,4")
    with OmSession(om):
        assert finalize_acl(fake_acl) is None
    assert finalize_acl(fake_acl) == 0
    # Someone else initialised pyACL first: we use it but leave finalize to them.
    fake_acl._fake.reset()
    backend._initialized_by_us.clear()
    assert fake_acl.init() == 0
    run_om(om, {"x": _x(2)})
    assert finalize_acl(fake_acl) is None
    assert fake_acl._fake.state().initialized


def test_config_and_om_must_agree(fake_acl: ModuleType, build_om: BuildOm) -> None:
    om = build_om("config", input_shape="x:-1,4", dynamic_batch_size=[1, 4])

    def specs(dims: list[int], data_type: str = "TYPE_FP32", name: str = "x") -> list[TensorSpec]:
        return [TensorSpec({"name": name, "data_type": data_type, "dims": dims}, batched=True)]

    with OmSession(om) as session:
        check_signature(session, specs([4]), specs([3], name="y"))
        check_signature(session, specs([-1]), specs([3], name="y"))
        with pytest.raises(ValueError, match=r"dims \[5\] but the OM has \[batch, 4\]"):
            check_signature(session, specs([5]), specs([3], name="y"))
        with pytest.raises(ValueError, match="TYPE_FP16 but the OM has float32"):
            check_signature(session, specs([4], "TYPE_FP16"), specs([3], name="y"))
        with pytest.raises(ValueError, match="'logits' is not an output of the OM"):
            check_signature(session, specs([4]), specs([3], name="logits"))
        with pytest.raises(ValueError, match=r"does not declare OM input\(s\) \['x'\]"):
            check_signature(session, [], specs([3], name="y"))

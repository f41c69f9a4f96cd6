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
    OmOutputMismatch,
    OmRunFailed,
    PyAclUnavailable,
    acl_available,
    match_outputs,
    run_om,
)
from model_store.backends.acl import model as backend
from model_store.backends.acl.model import (
    ACL_BF16,
    AclError,
    OmSession,
    OmTensor,
    OutputNameError,
    RequestError,
    TensorSpec,
    UnsupportedTensorType,
    check_signature,
    finalize_acl,
    map_om_outputs,
    onnx_part,
)
from model_store.compile.atc.environment import atc_environment, require_atc
from model_store.compile.atc.options import AtcOptions, build_atc_command
from model_store.compile.atc.running import run_atc
from tests.fakes.cann import make_fake_toolkit
from tests.fixtures.triton import mlp_onnx_bytes, reference_outputs

ORIGIN = {"precision_mode_v2": "origin"}
#: The MLP's output "y" as an OM built from ONNX names it: <op>:<index>:<ONNX name>.
Y = "Relu_2:0:y"
BuildOm = Callable[..., Path]


@pytest.fixture(scope="module")
def build_om(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BuildOm]:
    """Compiles the MLP with the fake ATC: ``build_om(name, **AtcOptions fields) -> Path``.

    ``source=<ONNX bytes>`` compiles another model instead.
    """
    root = tmp_path_factory.mktemp("om")
    status = require_atc(make_fake_toolkit(root / "Ascend"))
    source = root / "mlp.onnx"
    source.write_bytes(mlp_onnx_bytes())
    env = atc_environment(status, os.environ)

    def build(name: str, source_bytes: bytes | None = None, **options: object) -> Path:
        model = source
        if source_bytes is not None:
            model = root / f"{name}.onnx"
            model.write_bytes(source_bytes)
        argv = build_atc_command(
            status.atc_path or "",
            model,
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
        assert [(t.name, t.dims) for t in session.outputs] == [(Y, [2, 3])]
        outputs = session.run({"x": x})
    np.testing.assert_allclose(outputs[Y], reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)


def test_default_precision_computes_in_fp16_like_the_npu(
    fake_acl: ModuleType, build_om: BuildOm
) -> None:
    om = build_om("static_fp16", input_shape="x:2,4")
    x = _x(2)
    y = run_om(om, {"x": x})[Y]
    reference = reference_outputs(mlp_onnx_bytes(), x)
    np.testing.assert_allclose(y, reference, rtol=1e-2, atol=1e-2)
    assert not np.array_equal(y, reference)


def test_noise_makes_outputs_drift_for_tolerance_tests(
    fake_acl: ModuleType, build_om: BuildOm, monkeypatch: pytest.MonkeyPatch
) -> None:
    om = build_om("noisy", input_shape="x:2,4", **ORIGIN)
    monkeypatch.setenv("FAKE_ACL_NOISE", "0.5")
    x = _x(2)
    y = run_om(om, {"x": x})[Y]
    assert np.abs(y - reference_outputs(mlp_onnx_bytes(), x)).max() > 0.05


def test_a_dynamic_batch_om_pads_to_the_next_gear(fake_acl: ModuleType, build_om: BuildOm) -> None:
    om = build_om("dynamic", input_shape="x:-1,4", dynamic_batch_size=[1, 2, 4, 8], **ORIGIN)
    with OmSession(om) as session:
        assert session.gears == [1, 2, 4, 8]
        assert [t.name for t in session.inputs] == ["x"]  # the gear input is internal
        for batch in (1, 3, 8):
            x = _x(batch, seed=batch)
            y = session.run({"x": x})[Y]
            np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)
        with pytest.raises(RequestError, match="larger than the largest compiled batch 8"):
            session.run({"x": _x(9)})
        x = _x(19)
        y = session.run({"x": x}, split_batch=True)[Y]
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
        y = session.run({"x": x}, split_batch=True)[Y]
    np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)
    assert fake_acl._fake.CALLS.count("mdl.execute") == 3  # 4 + 4 + 2 padded to 4


def test_runs_from_another_thread_make_the_context_current(
    fake_acl: ModuleType, build_om: BuildOm
) -> None:
    om = build_om("threads", input_shape="x:2,4", **ORIGIN)
    results: list[np.ndarray] = []
    with OmSession(om) as session:
        worker = threading.Thread(target=lambda: results.append(session.run({"x": _x(2)})[Y]))
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
    with pytest.raises(OmRunFailed, match=r"ACL error 100013 .*built for another chip"):
        run_om(om, {"x": _x(2)})


def test_common_return_codes_say_what_they_mean() -> None:
    """Memory exhaustion and a model of another release fail the same load: the code tells
    (ACL's return-code list; docs/pyacl.md#return-codes)."""
    from model_store.backends.acl.model import AclError

    assert "out of device memory" in str(AclError("acl.mdl.load_from_file", 207001, "hint"))
    assert "another CANN release" in str(AclError("acl.mdl.load_from_file", 100012, "hint"))
    assert "driver's group" in str(AclError("acl.rt.set_device(0)", 207006))
    assert (
        str(AclError("acl.x", 123456, "the hint"))
        == "acl.x failed with ACL error 123456 (the hint)"
    )


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
        assert [t.name for t in session.outputs] == [Y]
        assert check_signature(session, specs([4]), specs([3], name="y")) == ({"y": 0}, "")
        check_signature(session, specs([-1]), specs([3], name="y"))
        with pytest.raises(ValueError, match=r"dims \[5\] but the OM has \[batch, 4\]"):
            check_signature(session, specs([5]), specs([3], name="y"))
        with pytest.raises(ValueError, match="TYPE_FP16 but the OM input 'x' is float32"):
            check_signature(session, specs([4], "TYPE_FP16"), specs([3], name="y"))
        with pytest.raises(ValueError, match=f"the OM output '{Y}' is float32"):
            check_signature(session, specs([4]), specs([3], "TYPE_FP16", name="y"))
        with pytest.raises(ValueError, match=r"dims \[5\] but the OM has \[4, 3\]"):
            check_signature(session, specs([4]), specs([5], name="y"))
        with pytest.raises(
            OutputNameError,
            match=rf"config output\(s\) \['logits'\] are not outputs of the OM: "
            rf"its outputs are \['{Y}'\] and the config declares \['logits'\]",
        ):
            check_signature(session, specs([4]), specs([3], name="logits"))
        with pytest.raises(ValueError, match=r"does not declare OM input\(s\) \['x'\]"):
            check_signature(session, [], specs([3], name="y"))


# --------------------------------------------------------------------------- output names


@pytest.mark.parametrize(
    ("om_name", "part"),
    [
        ("Relu_2:0:y", "y"),
        ("Conv_1:1:scores:0", "scores:0"),  # an ONNX name may itself contain ':'
        ("Relu_2:0", None),  # --out_nodes: no ONNX part
        ("y", None),
        ("Relu_2:x:y", None),
        ("Relu_2:0:", None),
    ],
)
def test_the_onnx_part_is_the_rest_after_two_colons(om_name: str, part: str | None) -> None:
    assert onnx_part(om_name) == part


def test_om_outputs_map_to_config_outputs_by_their_onnx_part() -> None:
    om = ["Conv_1:0:scores:0", "Add_3:1:boxes"]
    assert map_om_outputs(om, ["boxes", "scores:0"]) == ([1, 0], "")
    assert map_om_outputs(om, ["boxes"]) == ([1], "")  # a config may declare fewer
    assert map_om_outputs(["y"], ["y"]) == ([0], "")  # a plain name equal to the config's
    with pytest.raises(
        OutputNameError, match=r"'y' matches several OM outputs \['a:0:y', 'b:1:y'\]"
    ):
        map_om_outputs(["a:0:y", "b:1:y"], ["y"])
    with pytest.raises(OutputNameError, match=r"\['logits'\] are not outputs of the OM"):
        map_om_outputs(["Relu_2:0:y"], ["logits"])


def test_names_without_an_onnx_part_fall_back_to_position_only_when_counts_match() -> None:
    indices, note = map_om_outputs(["Relu_2:0", "Softmax_4:0"], ["y", "z"])
    assert indices == [0, 1]
    assert "matched to the config's ['y', 'z'] by position" in note
    with pytest.raises(OutputNameError, match=r"its outputs are \['Relu_2:0'\]"):
        map_om_outputs(["Relu_2:0"], ["y", "z"])
    with pytest.raises(OutputNameError, match="are not outputs of the OM"):
        map_om_outputs(["Relu_2:0", "Add_1:0:q"], ["y", "z"])  # one name has an ONNX part


def test_a_long_output_name_is_shortened_in_dims_only(
    fake_acl: ModuleType, build_om: BuildOm
) -> None:
    long = "probabilities:" + "p" * 130  # longer than the 127-character dims field
    source = mlp_onnx_bytes(output_name=long)
    om = build_om("long", source_bytes=source, input_shape="x:2,4", **ORIGIN)
    with OmSession(om) as session:
        assert [t.name for t in session.outputs] == [f"Relu_2:0:{long}"]
        info, ret = fake_acl.mdl.get_output_dims(session.desc, 0)
        assert ret == 0 and info["name"].startswith("acl_modelId_")
        spec = [TensorSpec({"name": long, "dims": [2, 3]}, batched=False)]
        indices, _ = check_signature(
            session, [TensorSpec({"name": "x", "dims": [2, 4]}, False)], spec
        )
        assert indices == {long: 0}
    x = _x(2)
    outputs, note = match_outputs([long], run_om(om, {"x": x}))
    assert note == ""
    np.testing.assert_allclose(outputs[long], reference_outputs(source, x), rtol=1e-6)


def test_an_om_built_with_out_nodes_maps_by_position_and_says_so(
    fake_acl: ModuleType, build_om: BuildOm
) -> None:
    om = build_om("out_nodes", input_shape="x:2,4", out_nodes="Relu_2:0", **ORIGIN)
    with OmSession(om) as session:
        assert [t.name for t in session.outputs] == ["Relu_2:0"]
        indices, note = check_signature(
            session,
            [TensorSpec({"name": "x", "dims": [2, 4]}, False)],
            [TensorSpec({"name": "y", "dims": [2, 3]}, False)],
        )
    assert indices == {"y": 0}
    assert "by position" in note
    with pytest.raises(
        OmOutputMismatch, match=r"\['y', 'z'\] are not outputs.*only when the counts agree"
    ) as info:
        match_outputs(["y", "z"], run_om(om, {"x": _x(2)}))
    assert info.value.code == "om_output_mismatch"


# --------------------------------------------------------------------------- dynamic batch


def test_the_fake_reports_the_largest_gear_as_upstream_documents(
    fake_acl: ModuleType, build_om: BuildOm
) -> None:
    om = build_om("gears", input_shape="x:-1,4", dynamic_batch_size=[2, 4, 8], **ORIGIN)
    mdl = fake_acl.mdl
    with OmSession(om) as session:
        assert mdl.get_input_dims(session.desc, 0)[0]["dims"] == [-1, 4]  # -1 in inputs only
        assert mdl.get_output_dims(session.desc, 0)[0]["dims"] == [8, 3]
        assert [t.dims for t in session.outputs] == [[8, 3]]
        assert mdl.get_output_size_by_index(session.desc, 0) == 8 * 3 * 4
        # An execute with no gear set is not refused: it runs the largest gear.
        assert fake_acl.rt.set_context(session.context) == 0
        assert mdl.execute(session.model_id, session._input_ds, session._output_ds) == 0
        assert mdl.get_cur_output_dims(session.desc, 0)[0]["dims"] == [8, 3]


def test_a_request_smaller_than_the_largest_gear_runs_the_next_gear(
    fake_acl: ModuleType, build_om: BuildOm, monkeypatch: pytest.MonkeyPatch
) -> None:
    om = build_om("small", input_shape="x:-1,4", dynamic_batch_size=[2, 4, 8], **ORIGIN)
    batches: list[int] = []
    real_set = fake_acl.mdl.set_dynamic_batch_size

    def set_batch(model_id: int, dataset: int, index: int, batch: int) -> int:
        batches.append(batch)
        return int(real_set(model_id, dataset, index, batch))

    monkeypatch.setattr(fake_acl.mdl, "set_dynamic_batch_size", set_batch)
    with OmSession(om) as session:
        for rows in (3, 1, 8, 4):
            x = _x(rows, seed=rows)
            y = session.run({"x": x})[Y]
            assert y.shape == (rows, 3)
            np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)
        assert batches == [4, 2, 8, 4]
        assert fake_acl.mdl.get_cur_output_dims(session.desc, 0)[0]["dims"] == [4, 3]
        # Without get_cur_output_dims (older pyACL) the gear set gives the batch axis.
        monkeypatch.delattr(fake_acl.mdl, "get_cur_output_dims")
        x = _x(3, seed=30)
        y = session.run({"x": x})[Y]
        assert y.shape == (3, 3)
        np.testing.assert_allclose(y, reference_outputs(mlp_onnx_bytes(), x), rtol=1e-6)


# --------------------------------------------------------------------------- types and buffers


def test_bytes_to_ptr_takes_bytes_only_like_pyacl(fake_acl: ModuleType) -> None:
    assert fake_acl.util.bytes_to_ptr(b"\x00" * 8) > 0
    for other in (bytearray(8), memoryview(b"\x00" * 8), np.zeros(2, np.float32)):
        with pytest.raises(ValueError, match="needs an byte as argument"):
            fake_acl.util.bytes_to_ptr(other)


def test_inputs_reach_the_device_as_bytes(fake_acl: ModuleType, build_om: BuildOm) -> None:
    om = build_om("bytes", input_shape="x:2,4", **ORIGIN)
    run_om(om, {"x": _x(2)})
    assert "util.bytes_to_ptr" in fake_acl._fake.CALLS  # the strict fake accepted what we passed


def test_a_bfloat16_tensor_is_refused_at_load_with_the_reason(
    fake_acl: ModuleType, build_om: BuildOm, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UnsupportedTensorType, match=r"ACL data type 27 \(ACL_BF16\).*bfloat16"):
        OmTensor(0, "y", [2, 3], ACL_BF16, 12)
    om = build_om("bf16", input_shape="x:2,4", **ORIGIN)
    monkeypatch.setattr(fake_acl.mdl, "get_output_data_type", lambda desc, index: ACL_BF16)
    with pytest.raises(AclError, match=f"OM tensor '{Y}' has ACL data type 27"):
        OmSession(om)
    assert fake_acl._fake.leaks() == {"initialized": 1}
    with pytest.raises(OmRunFailed, match="rebuild the OM with float16 or float32"):
        run_om(om, {"x": _x(2)})

"""Tests for model_store.compile.optimise: each step's effect, its log line, and where it writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from model_store.compile import optimise
from model_store.compile.optimise import OptimiseError
from model_store.onnx_info import inspect_onnx
from tests.unit.targets import models


def _run(path: Path, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feed)


def _x(batch: int = 3) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(5).standard_normal((batch, 16)).astype(np.float32)}


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.fixture
def mlp_path(tmp_path: Path) -> Path:
    return models.save(models.mlp(), tmp_path / "src" / "mlp.onnx")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


def test_simplify_removes_dead_nodes_and_logs_counts(mlp_path: Path, out: Path) -> None:
    lines: list[str] = []
    report = optimise.simplify_model(mlp_path, out / "slim.onnx", log=lines.append)
    assert (report.nodes_before, report.nodes_after) == (6, 5)
    assert lines == ["simplify: 6 -> 5 nodes (-Identity x1)"]
    assert report.files == [out / "slim.onnx"]
    np.testing.assert_allclose(_run(out / "slim.onnx", _x())[0], _run(mlp_path, _x())[0])


def test_ort_optimise_fuses_and_keeps_the_signature(mlp_path: Path, out: Path) -> None:
    lines: list[str] = []
    report = optimise.ort_optimise(mlp_path, out / "opt.onnx", "extended", log=lines.append)
    assert report.nodes_after < report.nodes_before
    assert lines[0].startswith("onnxruntime optimisation (extended): 6 -> ")
    info = inspect_onnx(out / "opt.onnx")
    assert [(t.name, t.dims) for t in info.inputs] == [("x", ["batch", 16])]
    np.testing.assert_allclose(
        _run(out / "opt.onnx", _x())[0], _run(mlp_path, _x())[0], rtol=1e-5, atol=1e-6
    )
    assert _files(out) == {"opt.onnx"}


def test_ort_optimise_refuses_an_unknown_level(mlp_path: Path, out: Path) -> None:
    with pytest.raises(OptimiseError, match="Unknown optimisation level"):
        optimise.ort_optimise(mlp_path, out / "opt.onnx", "max", log=print)


def test_fp16_keeps_float32_io_and_halves_the_weights(mlp_path: Path, out: Path) -> None:
    lines: list[str] = []
    optimise.to_fp16(mlp_path, out / "half.onnx", log=lines.append)
    info = inspect_onnx(out / "half.onnx")
    assert [t.onnx_type for t in [*info.inputs, *info.outputs]] == ["FLOAT", "FLOAT"]
    model = onnx.load(str(out / "half.onnx"))
    assert {t.data_type for t in model.graph.initializer} == {onnx.TensorProto.FLOAT16}
    assert "+Cast x2" in lines[0]
    got, want = _run(out / "half.onnx", _x())[0], _run(mlp_path, _x())[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=2e-2)


def test_fix_input_shapes_fixes_the_symbol_everywhere(mlp_path: Path, out: Path) -> None:
    lines: list[str] = []
    optimise.fix_input_shapes(mlp_path, out / "fixed.onnx", {"x": [2, 16]}, log=lines.append)
    info = inspect_onnx(out / "fixed.onnx")
    assert info.inputs[0].dims == [2, 16]
    assert info.outputs[0].dims == [2, 10]  # the shared "batch" symbol was fixed too
    assert lines[0] == "input 'x': shape fixed to [2, 16]"


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ({"nope": [1, 16]}, "There is no input 'nope'"),
        ({"x": [1, 16, 1]}, "has 2 dims, but 3 were given"),
        ({"x": [1, 8]}, "fixed to 16 in the model"),
        ({"x": [0, 16]}, "is not a size"),
    ],
)
def test_fix_input_shapes_refuses_impossible_shapes(
    mlp_path: Path, out: Path, shapes: dict[str, list[int]], message: str
) -> None:
    with pytest.raises(OptimiseError, match=message):
        optimise.fix_input_shapes(mlp_path, out / "fixed.onnx", shapes, log=print)


def test_fix_input_shapes_refuses_two_sizes_for_one_symbol(tmp_path: Path, out: Path) -> None:
    model = models.dynamic_outputs()
    extra = onnx.helper.make_tensor_value_info("x2", onnx.TensorProto.FLOAT, ["batch", 4])
    model.graph.input.append(extra)
    source = models.save(model, tmp_path / "two.onnx")
    with pytest.raises(OptimiseError, match="two sizes"):
        optimise.fix_input_shapes(source, out / "f.onnx", {"x": [2, 5], "x2": [3, 4]}, log=print)


def test_convert_opset_18_to_14_keeps_results(tmp_path: Path, out: Path) -> None:
    source = models.save(models.opset18_reduce(), tmp_path / "r18.onnx")
    lines: list[str] = []
    optimise.convert_opset(source, out / "r14.onnx", 14, log=lines.append)
    converted = onnx.load(str(out / "r14.onnx"))
    assert converted.opset_import[0].version == 14
    reduce = next(n for n in converted.graph.node if n.op_type == "ReduceMean")
    assert [a.name for a in reduce.attribute if a.name == "axes"] == ["axes"]
    assert lines[0].startswith("opset 18 -> 14: ")
    feed = {"x": np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)}
    np.testing.assert_allclose(_run(out / "r14.onnx", feed)[0], _run(source, feed)[0])


def test_a_step_never_overwrites_its_input(mlp_path: Path) -> None:
    with pytest.raises(OptimiseError, match="new file"):
        optimise.copy_model(mlp_path, mlp_path, log=print)


def test_external_data_is_read_beside_the_source_and_written_beside_the_output(
    tmp_path: Path, out: Path
) -> None:
    source = models.save_external(models.mlp(), tmp_path / "src" / "mlp.onnx", "weights.bin")
    before = _files(source.parent)
    optimise.copy_model(source, out / "model.onnx", log=print)
    # A small model comes back as one self-contained file; the source is untouched.
    assert _files(out) == {"model.onnx"}
    assert not inspect_onnx(out / "model.onnx").uses_external_data
    assert _files(source.parent) == before
    np.testing.assert_allclose(_run(out / "model.onnx", _x())[0], _run(source, _x())[0])


def test_big_models_get_one_relative_data_file(
    tmp_path: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(optimise, "SINGLE_FILE_LIMIT", 0)  # pretend everything is over 2 GiB
    source = models.save_external(models.mlp(), tmp_path / "src" / "mlp.onnx", "weights.bin")
    report = optimise.simplify_model(source, out / "model.onnx", log=print)
    assert report.files == [out / "model.onnx", out / "model.onnx.data"]
    assert _files(out) == {"model.onnx", "model.onnx.data"}
    assert inspect_onnx(out / "model.onnx").external_data_files == ["model.onnx.data"]
    np.testing.assert_allclose(_run(out / "model.onnx", _x())[0], _run(source, _x())[0])

    # ONNX Runtime's own writer puts the weights next to its output, under the same rule.
    opt_dir = tmp_path / "opt"
    opt_dir.mkdir()
    optimise.ort_optimise(out / "model.onnx", opt_dir / "model.onnx", "basic", log=print)
    assert _files(opt_dir) == {"model.onnx", "model.onnx.data"}
    np.testing.assert_allclose(_run(opt_dir / "model.onnx", _x())[0], _run(source, _x())[0])


def test_single_file_targets_refuse_models_over_the_limit(
    mlp_path: Path, out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(optimise, "SINGLE_FILE_LIMIT", 0)
    with pytest.raises(OptimiseError, match="exactly one file"):
        optimise.copy_model(mlp_path, out / "model.onnx", log=print, allow_external=False)
    assert _files(out) == set()

"""``prepare_backend_dir``: the backend directory handed to the embedded Triton (no server run)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from model_store.runtime import triton_wheel
from model_store.runtime.embedded import free_port, free_ports
from model_store.runtime.errors import TritonStartError
from model_store.runtime.triton_wheel import OUR_BACKENDS_SRC, our_backends, prepare_backend_dir

STUB = "triton_python_backend_stub"


@pytest.fixture
def backends_src(tmp_path: Path) -> Path:
    """A fake source tree of Python-based backends: two real ones and two to ignore."""
    src = tmp_path / "src"
    for name in ("alpha", "beta"):
        (src / name).mkdir(parents=True)
        (src / name / "model.py").write_text(f"# backend {name}\n")
    (src / "no_model").mkdir()  # a directory without model.py is not a backend
    (src / "no_model" / "helper.py").write_text("")
    (src / "__pycache__").mkdir()
    (src / "__pycache__" / "model.py").write_text("")
    (src / "__init__.py").write_text("")
    return src


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Relative path -> (inode, mtime_ns) of every file under root."""
    return {
        str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_layout_for_the_running_python(tmp_path: Path, backends_src: Path) -> None:
    out = prepare_backend_dir(tmp_path / "backends", backends_src)
    assert out == tmp_path / "backends"
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == [
        "alpha/model.py",
        "beta/model.py",
        "python/libtriton_python.so",
        f"python/{STUB}",
        "python/triton_python_backend_utils.py",
    ]
    stub = out / "python" / STUB
    assert os.access(stub, os.X_OK)
    major, minor = sys.version_info[:2]
    shipped = (
        triton_wheel._pytriton_root() / "tritonserver" / "python_backend_stubs" / f"{major}.{minor}"
    )
    assert stub.read_bytes() == (shipped / STUB).read_bytes()
    assert (out / "alpha" / "model.py").read_text() == "# backend alpha\n"


def test_second_run_rewrites_nothing(tmp_path: Path, backends_src: Path) -> None:
    out = prepare_backend_dir(tmp_path / "backends", backends_src)
    before = _snapshot(out)
    prepare_backend_dir(out, backends_src)
    assert _snapshot(out) == before


def test_changed_files_are_refreshed_and_others_kept(tmp_path: Path, backends_src: Path) -> None:
    out = prepare_backend_dir(tmp_path / "backends", backends_src)
    (backends_src / "alpha" / "model.py").write_text("# backend alpha, v2\n")
    (out / "python" / "triton_python_backend_utils.py").write_text("damaged")
    (out / "beta" / "notes.txt").write_text("not ours")
    beta_before = _snapshot(out / "beta")

    prepare_backend_dir(out, backends_src)

    assert (out / "alpha" / "model.py").read_text() == "# backend alpha, v2\n"
    utils = triton_wheel._python_backend_src() / "triton_python_backend_utils.py"
    assert (out / "python" / "triton_python_backend_utils.py").read_bytes() == utils.read_bytes()
    assert _snapshot(out / "beta") == beta_before
    # Replacement goes through temporary files; none may be left behind.
    assert not list(out.rglob("*.tmp"))


def test_replacement_is_a_new_inode(tmp_path: Path, backends_src: Path) -> None:
    """A running Triton keeps its mapping of the old file when we refresh one."""
    out = prepare_backend_dir(tmp_path / "backends", backends_src)
    target = out / "alpha" / "model.py"
    inode = target.stat().st_ino
    (backends_src / "alpha" / "model.py").write_text("# changed\n")
    prepare_backend_dir(out, backends_src)
    assert target.stat().st_ino != inode


def test_our_shipped_backends_are_found() -> None:
    found = our_backends(OUR_BACKENDS_SRC)
    assert "onnxruntime" in found
    assert found["onnxruntime"] == OUR_BACKENDS_SRC / "onnxruntime" / "model.py"
    assert our_backends(Path("/nonexistent")) == {}


def test_missing_stub_for_this_python_is_a_clear_error(
    tmp_path: Path, backends_src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(triton_wheel.sys, "version_info", (3, 99, 0, "final", 0))
    with pytest.raises(TritonStartError, match=r"no Python backend stub for Python 3\.99"):
        prepare_backend_dir(tmp_path / "backends", backends_src)


def test_free_ports_are_distinct() -> None:
    ports = free_ports(3)
    assert len(set(ports)) == 3
    assert 0 < free_port() < 65536


def test_onnxruntime_backend_imports_without_triton() -> None:
    """The backend module must load outside the stub (tests, tooling)."""
    path = OUR_BACKENDS_SRC / "onnxruntime" / "model.py"
    spec = importlib.util.spec_from_file_location("_ort_backend_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    spec_x = module.TensorSpec({"name": "x", "data_type": "TYPE_FP32", "dims": [4]}, batched=True)
    spec_x.check(np.zeros((2, 4), np.float32), max_batch_size=8)
    with pytest.raises(module.RequestError, match="exceeds max_batch_size 8"):
        spec_x.check(np.zeros((9, 4), np.float32), max_batch_size=8)
    with pytest.raises(module.RequestError, match=r"does not match \[batch, 4\]"):
        spec_x.check(np.zeros((2, 5), np.float32), max_batch_size=8)
    with pytest.raises(module.RequestError, match="TYPE_FP32"):
        spec_x.check(np.zeros((2, 4), np.float64), max_batch_size=8)


def test_the_acl_backend_is_shipped_and_self_contained() -> None:
    """Triton's stub imports acl/model.py by path: only numpy, acl, Triton's utils and stdlib."""
    import ast

    found = our_backends(OUR_BACKENDS_SRC)
    assert found["acl"] == OUR_BACKENDS_SRC / "acl" / "model.py"
    tree = ast.parse(found["acl"].read_text())
    imported = {
        (alias.name if isinstance(node, ast.Import) else node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    allowed = set(sys.stdlib_module_names) | {"numpy", "acl", "triton_python_backend_utils"}
    assert imported - allowed == set()
    assert "model_store" not in imported


def test_acl_backend_imports_without_triton_or_pyacl() -> None:
    path = OUR_BACKENDS_SRC / "acl" / "model.py"
    spec = importlib.util.spec_from_file_location("_acl_backend_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # pyACL is imported lazily, by OmSession
    assert module.pb_utils is None
    assert module.ACL_TO_NUMPY[0] is np.float32

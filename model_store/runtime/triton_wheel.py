"""Find the files of the ``nvidia-pytriton`` wheel and build Triton's backend directory.

The wheel ships the ``tritonserver`` binary, the Python backend
(``libtriton_python.so``, ``triton_python_backend_utils.py``), one Python backend stub per
CPython minor version and the shared libraries the stub needs
(docs/triton.md#embedded-triton-from-the-nvidia-pytriton-wheel). This module locates them
without importing pytriton, and :func:`prepare_backend_dir` lays out the directory handed to
``tritonserver --backend-directory``: the Python backend with the stub for *this*
interpreter, and our Python-based backends as ``<name>/model.py``. Starting the server is
:mod:`model_store.runtime.embedded`'s job.
"""

from __future__ import annotations

import filecmp
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

from model_store.runtime.errors import TritonStartError

__all__ = [
    "OUR_BACKENDS_SRC",
    "find_tritonserver",
    "our_backends",
    "prepare_backend_dir",
    "triton_libs_dir",
]

#: Where our Python-based backends live in the source tree (one sub-directory each).
OUR_BACKENDS_SRC = Path(__file__).resolve().parent.parent / "backends"

#: Files of the Python backend that every Python-based backend needs next to it.
_PYTHON_BACKEND_FILES = ("libtriton_python.so", "triton_python_backend_utils.py")
_STUB_NAME = "triton_python_backend_stub"


# --------------------------------------------------------------------------- locating the wheel


def _pytriton_root() -> Path:
    """The installed ``pytriton`` package directory, found without importing it.

    Importing pytriton pulls in a lot (and logs); we only need its files.
    """
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise TritonStartError(
            "the nvidia-pytriton package is not installed; it provides the embedded tritonserver"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def find_tritonserver() -> Path:
    """Path of the ``tritonserver`` binary shipped by ``nvidia-pytriton``."""
    binary = _pytriton_root() / "tritonserver" / "bin" / "tritonserver"
    if not binary.is_file():
        raise TritonStartError(f"tritonserver binary not found at {binary}")
    if not os.access(binary, os.X_OK):
        raise TritonStartError(f"tritonserver at {binary} is not executable")
    return binary


def triton_libs_dir() -> Path:
    """``site-packages/nvidia_pytriton.libs``: the libraries the Python stub loads."""
    return _pytriton_root().parent / "nvidia_pytriton.libs"


def _python_backend_src() -> Path:
    return _pytriton_root() / "tritonserver" / "backends" / "python"


def _stub_src(version: tuple[int, int] | None = None) -> Path:
    major, minor = version or sys.version_info[:2]
    stub = (
        _pytriton_root() / "tritonserver" / "python_backend_stubs" / f"{major}.{minor}" / _STUB_NAME
    )
    if not stub.is_file():
        raise TritonStartError(
            f"nvidia-pytriton ships no Python backend stub for Python {major}.{minor} ({stub})"
        )
    return stub


# --------------------------------------------------------------------------- backend directory


def _install_file(src: Path, dst: Path) -> bool:
    """Copy ``src`` to ``dst`` unless ``dst`` already has the same bytes.

    The copy goes to a unique temporary name in the destination directory and
    is renamed over ``dst``: a running Triton that has the old file mapped keeps
    the old inode, a concurrent caller never sees a half-written file, and two
    callers racing each other both end with a complete file. Returns True when
    the file was (re)written.
    """
    if dst.is_file() and filecmp.cmp(src, dst, shallow=False):
        return False
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        shutil.copy2(src, tmp)  # copy2 keeps the executable bit of the stub
        tmp.replace(dst)
    finally:
        tmp.unlink(missing_ok=True)
    return True


def our_backends(our_backends_src: Path = OUR_BACKENDS_SRC) -> dict[str, Path]:
    """Our Python-based backends: ``{name: path of model.py}``."""
    if not our_backends_src.is_dir():
        return {}
    return {
        child.name: child / "model.py"
        for child in sorted(our_backends_src.iterdir())
        if child.is_dir()
        and (child / "model.py").is_file()
        and not child.name.startswith((".", "_"))
    }


def prepare_backend_dir(backends_dir: Path, our_backends_src: Path = OUR_BACKENDS_SRC) -> Path:
    """Build (or refresh) the directory handed to ``tritonserver --backend-directory``.

    Layout produced::

        backends_dir/
          python/libtriton_python.so
          python/triton_python_backend_utils.py
          python/triton_python_backend_stub      # for the running interpreter
          <backend>/model.py                     # for each of our Python-based backends

    Idempotent: unchanged files are left alone, changed ones are replaced
    atomically. Files that are not ours are not removed.
    """
    backends_dir = Path(backends_dir)
    python_dir = backends_dir / "python"
    src_dir = _python_backend_src()
    for name in _PYTHON_BACKEND_FILES:
        src = src_dir / name
        if not src.is_file():
            raise TritonStartError(f"Python backend file missing from nvidia-pytriton: {src}")
        _install_file(src, python_dir / name)
    _install_file(_stub_src(), python_dir / _STUB_NAME)
    for name, model_py in our_backends(our_backends_src).items():
        _install_file(model_py, backends_dir / name / "model.py")
    return backends_dir

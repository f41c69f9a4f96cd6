"""Replacing a whole model directory in one step, for targets that hold one version.

The GE backend runs the first ``.onnx`` it finds anywhere under the model directory, whatever
the version (docs/ge-backend.md#how-the-model-file-is-found), so for ``npu_ge`` a new model
directory is built outside the repository (``<root>/staging``) and swapped in whole; the
previous one goes to ``<root>/retired`` until the new version is READY
(docs/ge-backend.md#one-version-per-model-directory). Where Linux and the filesystem allow,
the swap is one atomic ``renameat2(RENAME_EXCHANGE)``.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import secrets
import shutil
from pathlib import Path
from typing import Any

from model_store.config import ModelConfig, render_pbtxt
from model_store.file_io import DIR_MODE, atomic_write_text, fsync_dir
from model_store.serving.packages import InvalidPackage, link_or_copy
from model_store.store import CONFIG_FILE, ModelStore

#: Folders under the store root, beside ``repository/``, for whole model directories on the
#: way in and on the way out. Outside the repository so that neither Triton nor the GE
#: backend's recursive ``*.onnx`` search ever sees them; on the same filesystem so that
#: moving them in and out is a rename.
STAGING_ROOT = "staging"
RETIRED_ROOT = "retired"


def aside_path(store: ModelStore, folder: str, name: str) -> Path:
    """A fresh ``<root>/<folder>/<name>-<random>`` path (not created)."""
    parent = store.root / folder
    parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    return parent / f"{name}-{secrets.token_hex(8)}"


def stage_model_dir(store: ModelStore, cfg: ModelConfig, version: int, files: list[Path]) -> Path:
    """Builds ``config.pbtxt`` + ``<version>/<files>`` in a staging dir outside the repository."""
    onnx_files = [p.name for p in files if p.name.endswith(".onnx")]
    if len(onnx_files) > 1:
        raise InvalidPackage(
            f"The package of version {version} holds {len(onnx_files)} .onnx files "
            f"({', '.join(onnx_files)}); the GE backend would run an arbitrary one. "
            "Package the version again with a single model file."
        )
    staged = aside_path(store, STAGING_ROOT, cfg.name)
    try:
        (staged / str(version)).mkdir(mode=DIR_MODE, parents=True)
        for path in files:
            link_or_copy(path, staged / str(version) / path.name)
        atomic_write_text(staged / CONFIG_FILE, render_pbtxt(cfg))
        fsync_dir(staged / str(version))
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return staged


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@functools.cache
def _renameat2() -> Any:
    """glibc's ``renameat2``, or None where it does not exist."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    func = getattr(libc, "renameat2", None)
    if func is not None:
        func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
        func.argtypes += [ctypes.c_uint]
        func.restype = ctypes.c_int
    return func


def _exchange(a: Path, b: Path) -> bool:
    """Swaps two directories in one atomic step; False where the system cannot.

    With two plain renames the model directory is missing for an instant, in which a
    second Triton reading the same repository (scale-out) could fail to find the model.
    ``renameat2(RENAME_EXCHANGE)`` (Linux 3.15+, not on every filesystem) has no such gap.
    """
    func = _renameat2()
    if func is None:
        return False
    if func(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def swap_in(staged: Path, model_dir: Path, retired: Path) -> Path | None:
    """Puts the ``staged`` directory at ``model_dir``.

    Either the model directory changes or, when this raises, nothing did (``staged`` still
    holds the new directory).

    Returns:
        Where the previous model directory is now (``retired``, or ``staged`` after an
        atomic exchange), or None when there was none.
    """
    if not model_dir.exists():
        staged.rename(model_dir)
        return None
    if _exchange(staged, model_dir):
        return staged  # the staging path now holds the previous directory
    model_dir.rename(retired)
    try:
        staged.rename(model_dir)
    except BaseException:
        retired.rename(model_dir)
        raise
    return retired


def swap_back(store: ModelStore, name: str, model_dir: Path, previous: Path | None) -> None:
    """Undoes :func:`swap_in`: the previous directory returns, the new one is deleted."""
    discard = aside_path(store, RETIRED_ROOT, name)
    if previous is None:
        model_dir.rename(discard)
    elif _exchange(previous, model_dir):
        discard = previous
    else:
        model_dir.rename(discard)
        previous.rename(model_dir)
    fsync_dir(model_dir.parent)
    shutil.rmtree(discard, ignore_errors=True)

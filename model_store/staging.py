"""Staging directories that appear under their final name in one rename, and their debris.

A version, a package or a source is filled in a hidden staging directory next to its final
place and renamed there once complete, so Triton and readers never see half of it. Apart from
:mod:`model_store.store` because it is the mechanism, not the layout; the leftover checks
belong here as they know the hidden names it uses.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

from model_store.errors import StoreConflict
from model_store.file_io import DIR_MODE, fsync_dir
from model_store.text import Said, say

# Triton only loads version directories whose names are plain integers, so
# anything starting with "." is invisible to it (docs/triton.md#repository-layout).
STAGING_PREFIX = ".staging-"
REMOVING_PREFIX = ".removing-"


def _fsync_tree(top: Path) -> None:
    """Flushes every file and directory under ``top`` before it is published by rename."""
    for dirpath, _dirnames, filenames in os.walk(top):
        for filename in filenames:
            path = Path(dirpath, filename)
            if path.is_symlink():
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(Path(dirpath))


def _new_staging_dir(parent: Path) -> Path:
    """Creates ``parent`` if needed and a fresh, hidden staging directory inside it."""
    parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    staging = parent / f"{STAGING_PREFIX}{secrets.token_hex(8)}"
    staging.mkdir(mode=DIR_MODE)
    return staging


def _publish_dir(staging: Path, target: Path, what: Said) -> None:
    """Renames a complete staging directory to its final name, never over an existing one.

    ``os.rename`` would silently replace an *empty* directory, hence the
    explicit check; a non-empty one makes the rename fail, which we report the
    same way. Callers serialise work on one model (a lock per model), so the
    gap between check and rename is not a race between our own writers.
    """
    if target.exists():
        raise StoreConflict(say("%(what)s already exists. Pick a new version number.", what=what))
    _fsync_tree(staging)
    try:
        staging.rename(target)
    except OSError as exc:
        if target.exists():
            raise StoreConflict(
                say("%(what)s already exists. Pick a new version number.", what=what)
            ) from exc
        raise
    fsync_dir(target.parent)


def _is_leftover(path: Path) -> bool:
    """Tells whether ``path`` is debris from an interrupted staging, removal or atomic write."""
    text = path.name
    if text.startswith((STAGING_PREFIX, REMOVING_PREFIX)):
        return True
    return text.startswith(".") and text.endswith(".tmp") and path.is_file()


def _remove_entry(path: Path) -> None:
    """Removes a file, a symlink or a whole directory tree (without following symlinks)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()

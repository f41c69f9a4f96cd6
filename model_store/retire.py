"""Retiring a model on disk: its repository directory goes, its sources are kept or purged.

Kept sources move out of ``sources/<name>/`` to ``retired/<name>.<key>/`` (``key`` tells the
retired models of one name apart, the hub passes its row id), so a new model may take the
name and number its versions from 1 again without meeting the old files. Purged sources are
deleted. Either way the repository directory is renamed to a hidden name first (Triton sees
the model vanish whole; names starting with "." are invisible to it), then deleted.
"""

from __future__ import annotations

import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from model_store.file_io import DIR_MODE, fsync_dir
from model_store.names import validate_model_name
from model_store.staging import REMOVING_PREFIX
from model_store.store import ModelStore


@dataclass(frozen=True)
class RetiredFiles:
    """What retiring did on disk, for the job's log and the audit event."""

    repository_removed: bool
    sources_kept_at: Path | None
    sources_purged: bool


def retired_dir(store: ModelStore) -> Path:
    """``retired/``: the kept sources of retired models."""
    return store.root / "retired"


def retire_files(store: ModelStore, name: str, *, key: str, purge_sources: bool) -> RetiredFiles:
    """Removes ``repository/<name>`` and keeps (moves) or purges ``sources/<name>``.

    Call it with the model unloaded from Triton and its lock held. Safe to run again after an
    interruption: what is gone already is skipped.
    """
    name = validate_model_name(name)
    if not key.isalnum():
        raise ValueError(f"{key!r} is not a plain key")
    removed = _remove_dir(store.model_dir(name))
    sources = store.sources_dir / name
    kept_at: Path | None = None
    purged = False
    if sources.is_dir():
        if purge_sources:
            purged = _remove_dir(sources)
        else:
            kept_at = retired_dir(store) / f"{name}.{key}"
            kept_at.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            sources.rename(kept_at)  # same filesystem (both under the store's root): atomic
            fsync_dir(kept_at.parent)
    return RetiredFiles(removed, kept_at, purged)


def _remove_dir(path: Path) -> bool:
    if not path.is_dir():
        return False
    doomed = path.parent / f"{REMOVING_PREFIX}{secrets.token_hex(8)}"
    path.rename(doomed)
    fsync_dir(path.parent)
    shutil.rmtree(doomed)
    return True

"""Loading a candidate version into Triton under a temporary name, beside the serving model.

Verification through the server that will serve a version (when the worker cannot run the
artifact itself, e.g. an Ascend OM on a worker without an NPU) needs the candidate loaded
without touching what clients use: :func:`trial_model` puts it in the repository under a
fresh name that no hub model can have (hub names start with a letter or digit,
:mod:`model_store.names`; trial names start with ``_``), loads it, yields the name, and on
exit unloads it and removes its directory again, also on error. A worker that dies in between
leaves a ``_trial-*`` directory; :func:`remove_stale_trials` (run by the periodic reconcile)
removes it. Everything that lists the repository or Triton's index ignores trial names
(:func:`~model_store.serving.triton_index.is_trial_name`).
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from model_store.config import ModelConfig
from model_store.errors import ModelStoreError
from model_store.file_io import DIR_MODE, fsync_dir
from model_store.names import validate_version
from model_store.runtime.errors import TritonRuntimeError
from model_store.serving.directory_swap import RETIRED_ROOT, STAGING_ROOT, stage_model_dir
from model_store.serving.loading import load_and_wait, unload_model
from model_store.serving.restart_needed import note_failed_load, note_loaded
from model_store.serving.triton_index import TRIAL_PREFIX, ServingRuntime, is_trial_name
from model_store.store import ModelStore

log = logging.getLogger(__name__)

#: Triton's model names are directory names; ours stay well below common limits.
_BASE_LIMIT = 48


class TrialLoadFailed(ModelStoreError):
    """Triton could not load a trial model; the message is Triton's reason."""

    code = "trial_load_failed"


def trial_name(base: str) -> str:
    """A fresh ``_trial-<base>-<8 hex>`` name: a valid Triton model name, never a hub model's.

    ``base`` is only a hint for people reading Triton's log; characters outside
    ``[A-Za-z0-9_.-]`` are replaced.
    """
    safe = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_.-") else "-" for ch in base)
    safe = safe.replace("..", "-")[:_BASE_LIMIT] or "model"
    return f"{TRIAL_PREFIX}{safe}-{secrets.token_hex(4)}"


def _trial_dir(store: ModelStore, name: str) -> Path:
    if not is_trial_name(name) or "/" in name or ".." in name:
        raise ValueError(f"{name!r} is not a trial model name")
    return store.repository_dir / name


def _remove_dir(store: ModelStore, path: Path) -> None:
    """Moves ``path`` out of the repository in one rename, then deletes it.

    Triton (or a repository scan) never sees a half-deleted model directory.
    """
    if not path.exists():
        return
    parent = store.root / RETIRED_ROOT
    parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    aside = parent / f"{path.name}-{secrets.token_hex(8)}"
    path.rename(aside)
    fsync_dir(path.parent)
    shutil.rmtree(aside, ignore_errors=True)


def _unload_quietly(runtime: ServingRuntime, name: str, timeout_s: float) -> None:
    """Unloads ``name``; a failure is logged, since the directory is removed anyway.

    Triton in explicit mode forgets a model whose directory is gone at its next load or
    unload of that name; nothing else refers to trial names.
    """
    try:
        unload_model(runtime, name, timeout_s=timeout_s)
    except (ModelStoreError, TritonRuntimeError) as exc:
        log.warning("could not unload trial model %s: %s", name, exc)


def _place(store: ModelStore, cfg: ModelConfig, version: int, files: Sequence[Path]) -> Path:
    """Builds the trial directory outside the repository and renames it into place."""
    staged = stage_model_dir(store, cfg, version, list(files))
    target = _trial_dir(store, cfg.name)
    store.repository_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    try:
        staged.rename(target)  # same filesystem (both under the store root): atomic
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    fsync_dir(store.repository_dir)
    return target


@contextmanager
def trial_model(
    store: ModelStore,
    runtime: ServingRuntime,
    cfg: ModelConfig,
    files: Sequence[Path],
    *,
    version: int = 1,
    timeout_s: float = 120.0,
    on_placed: Callable[[str], None] | None = None,
) -> Iterator[str]:
    """Loads ``files`` with a copy of ``cfg`` under a fresh trial name; yields that name.

    The copy's name is :func:`trial_name` of ``cfg.name`` and its version policy is
    ``[version]``; ``files`` become ``<trial>/<version>/``. The directory is staged outside
    the repository and renamed into place, so Triton never reads a half-written one. The
    serving model is not touched. On exit (normal or by exception) the trial is unloaded and
    its directory removed. ``on_placed(name)`` runs once the directory is in place, before
    the load, so a caller can record which trial a dead worker would leave behind.

    Raises:
        TrialLoadFailed: With Triton's reason when the load fails (after cleaning up).
    """
    version = validate_version(version)
    trial = dataclasses.replace(
        cfg,
        name=trial_name(cfg.name),
        version_policy_specific=[version],
        parameters=dict(cfg.parameters),
    )
    path = _place(store, trial, version, files)
    try:
        if on_placed is not None:
            on_placed(trial.name)
        ok, reason, still_loading = load_and_wait(runtime, trial.name, [version], timeout_s, 0.05)
        if ok:
            note_loaded(store, trial.name, backend=trial.backend)
        else:
            if not still_loading:  # a load still compiling has not wedged the GE backend
                note_failed_load(store, trial.name, reason, backend=trial.backend)
            raise TrialLoadFailed(reason)
        yield trial.name
    finally:
        _unload_quietly(runtime, trial.name, timeout_s=min(timeout_s, 60.0))
        _remove_dir(store, path)


def remove_trial(store: ModelStore, runtime: ServingRuntime, name: str) -> bool:
    """Unloads and removes one trial model by name (a dead worker's); False if it was gone."""
    path = _trial_dir(store, name)
    _unload_quietly(runtime, name, timeout_s=30.0)
    existed = path.exists()
    _remove_dir(store, path)
    return existed


def remove_stale_trials(
    store: ModelStore, runtime: ServingRuntime, older_than_s: float
) -> list[str]:
    """Unloads and removes trial models left behind by a crash; the names removed.

    Only trials untouched for ``older_than_s`` go (a running verification's trial is
    younger than its timeout), as do their staging directories beside the repository.
    """
    cutoff = time.time() - older_than_s
    removed: list[str] = []
    repository = store.repository_dir
    for path in sorted(repository.iterdir()) if repository.is_dir() else []:
        if not is_trial_name(path.name) or not _older(path, cutoff):
            continue
        _unload_quietly(runtime, path.name, timeout_s=30.0)
        _remove_dir(store, path)
        removed.append(path.name)
    for folder in (STAGING_ROOT, RETIRED_ROOT):
        parent = store.root / folder
        for path in sorted(parent.iterdir()) if parent.is_dir() else []:
            if is_trial_name(path.name) and _older(path, cutoff):
                shutil.rmtree(path, ignore_errors=True)
    return removed


def _older(path: Path, cutoff: float) -> bool:
    try:
        return path.lstat().st_mtime <= cutoff
    except FileNotFoundError:
        return False

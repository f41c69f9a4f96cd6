"""What the files and Triton say about one model, side by side, for the reconcile page.

Reading only: :func:`repository_state` lists the config's pinned versions, the version
directories and ``.onnx`` files on disk, stale leftovers of interrupted writes, and Triton's
view of each version, then names every disagreement in plain words. Repairing is the
caller's job.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TypedDict

from model_store.config import parse_pbtxt
from model_store.errors import InvalidConfig
from model_store.names import validate_model_name
from model_store.runtime.errors import TritonRuntimeError
from model_store.serving.directory_swap import RETIRED_ROOT, STAGING_ROOT
from model_store.serving.triton_index import (
    ServingRuntime,
    model_rows,
    plain_reason,
    ready_versions,
    versions_text,
)
from model_store.staging import REMOVING_PREFIX, STAGING_PREFIX
from model_store.store import ModelStore
from model_store.targets import all_targets
from model_store.text import Said, say

#: Leftovers younger than this are assumed to belong to work in progress (a packaging job
#: stages versions without the switch lock), so :func:`repository_state` does not list them.
DEFAULT_STALE_AFTER_S = 600.0


class TritonVersionState(TypedDict):
    """One version in Triton's repository index."""

    state: str
    reason: str


class RepositoryState(TypedDict):
    """What the files and Triton say about one model; see :func:`repository_state`."""

    name: str
    model_dir_present: bool
    config_present: bool
    config_error: Said
    backend: str | None
    policy_versions: list[int] | None
    version_dirs: list[int]
    onnx_files: list[str]
    stale_staging: list[str]
    stale_files: list[str]
    triton_reachable: bool
    triton_error: str
    triton_versions: dict[str, TritonVersionState]
    ready_versions: list[int]
    problems: list[Said]


def _older_than(path: Path, cutoff: float) -> bool:
    try:
        return path.lstat().st_mtime <= cutoff
    except FileNotFoundError:
        return False


def _leftovers(store: ModelStore, name: str, cutoff: float) -> tuple[list[str], list[str]]:
    """Stale directories and temp files of ``name`` inside and beside the repository."""
    dirs: list[str] = []
    files: list[str] = []
    model_dir = store.model_dir(name)
    if model_dir.is_dir():
        for entry in sorted(model_dir.iterdir()):
            if not _older_than(entry, cutoff):
                continue
            if entry.name.startswith((STAGING_PREFIX, REMOVING_PREFIX)) and entry.is_dir():
                dirs.append(str(entry))
            elif entry.name.startswith(".") and entry.name.endswith(".tmp") and entry.is_file():
                files.append(str(entry))
    aside = re.compile(re.escape(name) + r"-[0-9a-f]{16}")
    for folder in (STAGING_ROOT, RETIRED_ROOT):
        parent = store.root / folder
        if parent.is_dir():
            dirs += [
                str(p)
                for p in sorted(parent.iterdir())
                if aside.fullmatch(p.name) and _older_than(p, cutoff)
            ]
    return dirs, files


def _files_state(store: ModelStore, name: str, state: RepositoryState) -> None:
    """Fills the file-side fields of ``state``."""
    model_dir = store.model_dir(name)
    state["model_dir_present"] = model_dir.is_dir()
    state["version_dirs"] = store.list_versions(name)
    if model_dir.is_dir():
        state["onnx_files"] = sorted(
            str(p.relative_to(model_dir))
            for p in model_dir.rglob("*.onnx")
            if not p.name.startswith(".")
        )
    try:
        cfg = parse_pbtxt(store.config_path(name).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return
    except InvalidConfig as exc:
        state["config_present"] = True
        state["config_error"] = exc.message
        return
    state["config_present"] = True
    state["backend"] = cfg.backend or cfg.platform
    state["policy_versions"] = cfg.version_policy_specific


def _triton_state(runtime: ServingRuntime, name: str, state: RepositoryState) -> None:
    """Fills the Triton-side fields of ``state``."""
    try:
        rows = model_rows(runtime, name)
    except TritonRuntimeError as exc:
        state["triton_error"] = str(exc)
        return
    state["triton_reachable"] = True
    state["triton_versions"] = {
        row.get("version", ""): {
            "state": row.get("state", ""),
            "reason": plain_reason(row.get("reason", "")),
        }
        for row in rows
    }
    state["ready_versions"] = ready_versions(rows)


def _problems(state: RepositoryState) -> list[Said]:
    """Disagreements between files and Triton, in plain words, for the reconcile page."""
    problems: list[Said] = []
    policy = state["policy_versions"]
    if state["config_error"]:
        problems.append(say("config.pbtxt cannot be read: %(error)s", error=state["config_error"]))
    elif state["config_present"] and policy is None:
        problems.append("config.pbtxt pins no version (no version_policy specific).")
    for version in policy or []:
        if version not in state["version_dirs"]:
            problems.append(f"config.pbtxt serves version {version}, but its directory is missing.")
        if state["triton_reachable"] and version not in state["ready_versions"]:
            row = state["triton_versions"].get(str(version))
            why = f"{row['state']} ({row['reason'] or 'no reason given'})" if row else "not loaded"
            problems.append(f"config.pbtxt serves version {version}, but Triton has it {why}.")
    extra = sorted(set(state["ready_versions"]) - set(policy or []))
    if extra:
        problems.append(f"Triton serves {versions_text(extra)}, which config.pbtxt does not pin.")
    swapped_whole = any(
        t.backend == state["backend"] and not t.versions_side_by_side for t in all_targets()
    )
    if swapped_whole and len(state["onnx_files"]) > 1:
        problems.append(
            f"The model directory holds {len(state['onnx_files'])} .onnx files; the GE backend "
            "runs an arbitrary one. Switch the version again to rebuild the directory."
        )
    if state["stale_staging"] or state["stale_files"]:
        problems.append("Leftovers of interrupted writes can be removed.")
    return problems


def repository_state(
    store: ModelStore,
    runtime: ServingRuntime,
    name: str,
    stale_after_s: float = DEFAULT_STALE_AFTER_S,
) -> RepositoryState:
    """Summarises what the files say and what Triton says about one model.

    Reading only; reconciling is the caller's job. Triton being unreachable is reported in
    the result (``triton_reachable`` False, ``triton_error``), not raised.

    Args:
        store: The model store.
        runtime: The Triton client.
        name: Model name.
        stale_after_s: Leftovers (``.staging-*``/``.removing-*`` dirs, temp files, and this
            model's dirs under ``<root>/staging`` and ``<root>/retired``) count as stale
            only when untouched this long, so that work in progress (a packaging job stages
            versions without the switch lock) is not reported for deletion.

    Returns:
        A dict: ``config_present``, ``config_error``, ``backend``, ``policy_versions``
        (None when the config pins none), ``version_dirs`` (on disk), ``onnx_files``
        (relative paths), ``stale_staging`` (absolute paths of directories safe to delete
        while holding the model's lock), ``stale_files``, ``triton_reachable``,
        ``triton_error``, ``triton_versions`` (``{"2": {"state", "reason"}}``),
        ``ready_versions`` and ``problems`` (plain words).
    """
    name = validate_model_name(name)
    state: RepositoryState = {
        "name": name,
        "model_dir_present": False,
        "config_present": False,
        "config_error": "",
        "backend": None,
        "policy_versions": None,
        "version_dirs": [],
        "onnx_files": [],
        "stale_staging": [],
        "stale_files": [],
        "triton_reachable": False,
        "triton_error": "",
        "triton_versions": {},
        "ready_versions": [],
        "problems": [],
    }
    _files_state(store, name, state)
    state["stale_staging"], state["stale_files"] = _leftovers(
        store, name, time.time() - stale_after_s
    )
    _triton_state(runtime, name, state)
    state["problems"] = _problems(state)
    return state

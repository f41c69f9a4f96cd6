"""After a failed ``npu_ge`` load, the Triton that serves needs a restart.

The GE backend initialises in turns shared by every ``npu_ge`` model of one Triton process, and
a load that fails in its turn never passes the turn on: every later ``npu_ge`` load in that
Triton waits for ever (docs/ge-backend.md#statistics-reload-and-unload). So the first failed
``npu_ge`` load is noted in a file beside the repository, the host report carries it (the Nodes
and Diagnostics pages, the self-test say it), and the next ``npu_ge`` load that succeeds (which
a wedged backend never lets happen: Triton was restarted) clears it.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from model_store.config import parse_pbtxt
from model_store.errors import ModelStoreError
from model_store.file_io import atomic_write_text
from model_store.store import ModelStore

MARKER = ".triton-needs-restart.json"
GE_BACKEND = "npu_ge"


def _marker(store: ModelStore) -> Path:
    return store.root / MARKER


def backend_of(store: ModelStore, name: str) -> str | None:
    """The backend ``name``'s config.pbtxt in the repository names, or None."""
    with contextlib.suppress(OSError, ModelStoreError, ValueError):
        return parse_pbtxt(store.config_path(name).read_text(encoding="utf-8")).backend
    return None


def note_failed_load(
    store: ModelStore,
    name: str,
    reason: str,
    *,
    backend: str | None = None,
    now: float | None = None,
) -> bool:
    """Notes that Triton needs a restart when ``name`` is an ``npu_ge`` model; True if noted.

    The first failure is kept (the one that wedged the backend); later ones add nothing."""
    if (backend or backend_of(store, name)) != GE_BACKEND:
        return False
    if needs_restart(store) is None:
        note = {"model": name, "reason": str(reason)[:2000], "at": now or time.time()}
        with contextlib.suppress(OSError):
            atomic_write_text(_marker(store), json.dumps(note))
    return True


def needs_restart(store: ModelStore) -> dict[str, Any] | None:
    """``{"model", "reason", "at"}`` of the npu_ge load that failed, or None."""
    try:
        found = json.loads(_marker(store).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def note_loaded(store: ModelStore, name: str, *, backend: str | None = None) -> None:
    """An ``npu_ge`` model loaded: the backend takes loads again, so the note goes."""
    if (backend or backend_of(store, name)) == GE_BACKEND:
        _marker(store).unlink(missing_ok=True)

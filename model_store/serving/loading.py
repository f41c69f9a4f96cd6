"""Loading and unloading a model in Triton and waiting until the index agrees.

Triton's load call blocks while the backend prepares the model (the GE backend compiles it,
which can take minutes), so it runs in a helper thread bounded by a timeout; the repository
index is then polled until the pinned versions are READY. A failure comes back as Triton's own
reason in plain words. Switching (:mod:`model_store.serving.switching`) loads through
:func:`load_and_wait`; the UI's load, unload and compare actions call the public functions
here directly.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from typing import NamedTuple

from model_store.config import parse_pbtxt, render_pbtxt
from model_store.errors import InvalidConfig, ModelStoreError
from model_store.file_io import atomic_write_text
from model_store.names import validate_version
from model_store.runtime.errors import TritonRequestError, TritonRuntimeError
from model_store.serving.packages import install_version, serving_config
from model_store.serving.restart_needed import note_failed_load, note_loaded
from model_store.serving.triton_index import (
    READY,
    UNAVAILABLE,
    ServingRuntime,
    model_rows,
    plain_reason,
    ready_versions,
    row_for,
)
from model_store.store import ModelStore
from model_store.text import Said


class ServingTimeout(ModelStoreError):
    """Triton did not reach the expected state in time."""

    code = "serving_timeout"


def _failure_reason(
    runtime: ServingRuntime, name: str, version: int, load_error: str | None
) -> str:
    """Why ``version`` is not READY: the index's reason for it, else the load call's error.

    The index reason is used only when it is current: when the load call failed with a
    message that does not contain it (e.g. "at least one version must be available"), the
    row may be left over from an earlier attempt.
    """
    try:
        row = row_for(model_rows(runtime, name), version)
    except TritonRuntimeError as exc:
        row = None
        load_error = load_error or str(exc)
    index_reason = (row or {}).get("reason", "").strip()
    stale = row is None or row.get("state") == READY or index_reason == "unloaded"
    if index_reason and not stale and (load_error is None or index_reason in load_error):
        return plain_reason(index_reason)
    if load_error:
        return plain_reason(load_error)
    state = (row or {}).get("state") or "not known to Triton"
    return f"version {version} is {state} with no reason given"


class _LoadOutcome(NamedTuple):
    error: str | None
    timed_out: bool


def _release_gevent_hub() -> None:
    """Frees the calling thread's gevent hub, if gevent is in use.

    tritonclient's HTTP client runs on gevent, which gives every thread that uses it a hub
    with its own event loop (two file descriptors) and does not free it when the thread
    ends. Load threads are short-lived; without this a long-running worker would leak two
    descriptors per load.
    """
    gevent = sys.modules.get("gevent")
    if gevent is not None:
        gevent.get_hub().destroy(destroy_loop=True)


def _load_bounded(runtime: ServingRuntime, name: str, timeout_s: float) -> _LoadOutcome:
    """Calls ``runtime.load(name)``, giving up waiting after ``timeout_s``.

    Triton's load call blocks until the load has finished (the GE backend compiles the
    model during it, which can take minutes), so it runs in a helper thread. When we give
    up, Triton keeps loading; the thread ends when Triton answers. Failures come back as
    Triton's own message.
    """
    box: dict[str, BaseException] = {}

    def call() -> None:
        try:
            runtime.load(name)
        except Exception as exc:  # reported to the caller's thread below
            box["error"] = exc
        finally:
            _release_gevent_hub()

    thread = threading.Thread(target=call, name=f"triton-load-{name}", daemon=True)
    thread.start()
    thread.join(max(timeout_s, 0.0))
    if thread.is_alive():
        return _LoadOutcome(None, True)
    error = box.get("error")
    if error is None:
        return _LoadOutcome(None, False)
    if isinstance(error, TritonRequestError):
        return _LoadOutcome(error.triton_message, False)
    if isinstance(error, TritonRuntimeError):
        return _LoadOutcome(str(error), False)
    raise error


def _wait_ready(
    runtime: ServingRuntime,
    name: str,
    versions: Sequence[int] | None,
    deadline: float,
    poll_s: float,
) -> tuple[bool, str]:
    """Polls the index until every version in ``versions`` is READY (any one when None).

    Called after Triton's load call returned successfully, so an UNAVAILABLE row with a
    reason (other than a leftover "unloaded") is a failure, not a state to wait out.

    Returns:
        ``(True, "")``, or ``(False, reason)`` on failure or when ``deadline`` passes.
    """
    versions = list(versions) if versions else None  # an empty pin means "whatever loads"
    last = "no answer from Triton yet"
    while True:
        try:
            rows = model_rows(runtime, name)
        except TritonRuntimeError as exc:
            rows, last = [], str(exc)
        else:
            ready = ready_versions(rows)
            if (versions is None and ready) or (versions and set(versions) <= set(ready)):
                return True, ""
            for version in versions or []:
                row = row_for(rows, version)
                reason = (row or {}).get("reason", "")
                if row and row.get("state") == UNAVAILABLE and reason and reason != "unloaded":
                    return False, plain_reason(reason)
            states = {r.get("version", "?"): r.get("state") or "not loaded" for r in rows}
            last = ", ".join(f"v{v} {s}" for v, s in sorted(states.items())) or "not loaded"
        if time.monotonic() >= deadline:
            return False, f"not READY in time (Triton reports: {last})"
        time.sleep(poll_s)


def load_and_wait(
    runtime: ServingRuntime,
    name: str,
    versions: Sequence[int] | None,
    timeout_s: float,
    poll_s: float,
) -> tuple[bool, str, bool]:
    """Loads ``name`` and waits for ``versions`` READY; returns ``(ok, reason, timed_out)``."""
    deadline = time.monotonic() + timeout_s
    outcome = _load_bounded(runtime, name, timeout_s)
    if outcome.timed_out:
        return (
            False,
            f"Triton was still loading {name} after {timeout_s:g} s; the load was abandoned",
            True,
        )
    if outcome.error is not None:
        version = versions[0] if versions else 0
        return False, _failure_reason(runtime, name, version, outcome.error), False
    ok, reason = _wait_ready(runtime, name, versions, deadline, poll_s)
    return ok, reason, not ok and time.monotonic() >= deadline


class LoadResult(NamedTuple):
    """Outcome of :func:`load_serving`; unpacks as ``ok, reason``."""

    ok: bool
    reason: Said


def load_serving(
    store: ModelStore,
    runtime: ServingRuntime,
    name: str,
    timeout_s: float = 120.0,
    poll_s: float = 0.05,
) -> LoadResult:
    """Loads whatever ``repository/<name>/config.pbtxt`` says and waits for READY.

    Used after a Triton restart (explicit mode forgets every model) and by "load" in the UI.
    The files are not changed.

    Args:
        store: The model store.
        runtime: The Triton client.
        name: Model name.
        timeout_s: How long to wait for READY.
        poll_s: Interval between repository index polls.

    Returns:
        ``(True, "")`` once the configured version(s) are READY, else ``(False, reason)``
        with Triton's reason in plain words (callers prefix the model name).
    """
    path = store.config_path(name)
    try:
        cfg = parse_pbtxt(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return LoadResult(False, f"{name} has no config.pbtxt in the repository; serve a version.")
    except InvalidConfig as exc:
        return LoadResult(False, exc.message)
    versions = cfg.version_policy_specific
    ok, reason, _ = load_and_wait(runtime, name, versions, timeout_s, poll_s)
    if ok:
        note_loaded(store, name, backend=cfg.backend)
    else:
        note_failed_load(store, name, reason, backend=cfg.backend)
    return LoadResult(ok, reason)


def load_alongside(
    store: ModelStore,
    runtime: ServingRuntime,
    name: str,
    serving: int,
    extra: int | None,
    timeout_s: float = 120.0,
    poll_s: float = 0.05,
) -> LoadResult:
    """Keeps ``serving`` loaded and loads ``extra`` beside it (None: ``serving`` alone again).

    This is how two versions answer side by side for a comparison: the config's version policy
    lists both. Triton loads the added version while the serving one keeps answering, and
    dropping it again unloads only that one. For side-by-side layouts only (not ``npu_ge``).
    If the load fails, the previous config comes back and is loaded again.

    Returns:
        ``(True, "")`` once every listed version is READY, else ``(False, reason)``.
    """
    cfg = serving_config(store, name, serving)
    if extra is not None and extra != serving:
        serving_config(store, name, extra)  # NotFound when that version is not packaged
        install_version(store, name, validate_version(extra))
        cfg.version_policy_specific = sorted({serving, extra})
    path = store.config_path(name)
    before = path.read_text(encoding="utf-8") if path.exists() else None
    atomic_write_text(path, render_pbtxt(cfg))
    ok, reason, _ = load_and_wait(runtime, name, cfg.version_policy_specific, timeout_s, poll_s)
    if not ok and before is not None:
        atomic_write_text(path, before)
        load_and_wait(runtime, name, None, timeout_s, poll_s)
    return LoadResult(ok, reason)


def unload_model(
    runtime: ServingRuntime, name: str, timeout_s: float = 60.0, poll_s: float = 0.05
) -> None:
    """Asks Triton to unload ``name`` and waits until no version of it is loaded or in transit.

    Requests already running finish; new ones are refused. The files are not changed, so
    :func:`load_serving` (or a Triton restart with the model listed) brings it back.

    Raises:
        ServingTimeout: If a version is still READY, LOADING or UNLOADING after ``timeout_s``.
        TritonRuntimeError: If Triton refuses the unload or cannot be reached.
    """
    runtime.unload(name)
    deadline = time.monotonic() + timeout_s
    while True:
        busy = [
            row
            for row in model_rows(runtime, name)
            if row.get("state") in (READY, "UNLOADING", "LOADING")
        ]
        if not busy:
            return
        if time.monotonic() >= deadline:
            shown = ", ".join(f"v{r.get('version')} {r.get('state')}" for r in busy)
            raise ServingTimeout(
                f"{name} was not unloaded within {timeout_s:.0f} s ({shown}). "
                "Check the Triton log; a restart of Triton unloads everything."
            )
        time.sleep(poll_s)

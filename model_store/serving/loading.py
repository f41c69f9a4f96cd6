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
from collections.abc import Callable, Sequence
from typing import NamedTuple

from model_store.config import parse_pbtxt, render_pbtxt
from model_store.errors import InvalidConfig, ModelStoreError
from model_store.file_io import atomic_write_text
from model_store.load_timeouts import CEILING_FACTOR
from model_store.names import validate_version
from model_store.runtime.errors import TritonRequestError, TritonRuntimeError, TritonUnavailable
from model_store.serving.packages import install_version, serving_config
from model_store.serving.restart_needed import note_failed_load, note_loaded
from model_store.serving.triton_index import (
    LOADING,
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

#: How often the index is asked once a load has outlived its timeout (it may take minutes more).
LATE_POLL_S = 1.0


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
    """How Triton's load call ended: ``error`` is its refusal; ``no_answer`` means the call
    itself got no answer (e.g. the client's own time-out), which says nothing about the load."""

    error: str | None
    no_answer: bool = False


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


class _LoadCall:
    """``runtime.load(name)`` in a helper thread.

    Triton's load call blocks until the load has finished (the GE backend compiles the model
    during it, which can take minutes), so it runs beside the caller, who waits on it in
    bounded steps. If the caller stops waiting, Triton keeps loading; the thread ends when
    Triton answers.
    """

    def __init__(self, runtime: ServingRuntime, name: str) -> None:
        self._runtime, self._name = runtime, name
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._call, name=f"triton-load-{name}", daemon=True)
        self._thread.start()

    def _call(self) -> None:
        try:
            self._runtime.load(self._name)
        except Exception as exc:  # reported to the caller's thread by outcome()
            self._error = exc
        finally:
            _release_gevent_hub()

    def outcome(self, wait_s: float) -> _LoadOutcome | None:
        """How the call ended, waiting up to ``wait_s``; None while it still runs."""
        self._thread.join(max(wait_s, 0.0))
        if self._thread.is_alive():
            return None
        error = self._error
        if error is None:
            return _LoadOutcome(None)
        if isinstance(error, TritonUnavailable):
            # No answer (refused, reset, the client's own time-out): not Triton's verdict.
            return _LoadOutcome(str(error), no_answer=True)
        if isinstance(error, TritonRequestError):
            return _LoadOutcome(error.triton_message)
        if isinstance(error, TritonRuntimeError):
            return _LoadOutcome(str(error))
        raise error


def _shows_loading(rows: list[dict[str, str]], versions: Sequence[int] | None) -> bool:
    """Whether the index shows a version in ``versions`` (any, when None) LOADING."""
    wanted = rows if not versions else [row_for(rows, v) for v in versions]
    return any(row is not None and row.get("state") == LOADING for row in wanted)


def _index_shows_ready(runtime: ServingRuntime, name: str, versions: Sequence[int]) -> bool:
    try:
        return set(versions) <= set(ready_versions(model_rows(runtime, name)))
    except TritonRuntimeError:
        return False


def _index_shows_loading(
    runtime: ServingRuntime, name: str, versions: Sequence[int] | None
) -> bool:
    """:func:`_shows_loading` asked of Triton now; False when the index does not answer."""
    try:
        return _shows_loading(model_rows(runtime, name), versions)
    except TritonRuntimeError:
        return False


def _outlast(
    call: _LoadCall,
    runtime: ServingRuntime,
    name: str,
    versions: Sequence[int] | None,
    ceiling: float,
    poll_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> _LoadOutcome | None:
    """Past the timeout, Triton has not answered the load call: it is still loading (that
    is not a failure), so wait on, until the call ends, the index shows ``versions`` READY,
    or ``ceiling`` passes (None then)."""
    while clock() < ceiling:
        sleep(max(poll_s, LATE_POLL_S))  # minutes may remain: no need to ask 20 times a second
        outcome = call.outcome(0.0)
        if outcome is not None:
            return outcome
        if versions and _index_shows_ready(runtime, name, versions):
            return _LoadOutcome(None)  # READY before the answer reached us
    return None


def _wait_ready(
    runtime: ServingRuntime,
    name: str,
    versions: Sequence[int] | None,
    deadline: float,
    ceiling: float,
    poll_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[bool, str, bool]:
    """Polls the index until every version in ``versions`` is READY (any one when None).

    Called after Triton's load call returned, so an UNAVAILABLE row with a reason (other
    than a leftover "unloaded") is a failure, not a state to wait out. Past ``deadline``, a
    version the index shows LOADING is waited for until ``ceiling``: running out of time
    while Triton is still loading is not a failure of the load.

    Returns:
        ``(ok, reason, still_loading)``: ``(True, "", False)``; ``(False, reason, False)``
        on a failure or when ``deadline`` passes; ``(False, reason, True)`` when Triton was
        still loading at ``ceiling``.
    """
    versions = list(versions) if versions else None  # an empty pin means "whatever loads"
    last, loading = "no answer from Triton yet", False
    while True:
        try:
            rows = model_rows(runtime, name)
        except TritonRuntimeError as exc:
            rows, last, loading = [], str(exc), False
        else:
            ready = ready_versions(rows)
            if (versions is None and ready) or (versions and set(versions) <= set(ready)):
                return True, "", False
            for version in versions or []:
                row = row_for(rows, version)
                reason = (row or {}).get("reason", "")
                if row and row.get("state") == UNAVAILABLE and reason and reason != "unloaded":
                    return False, plain_reason(reason), False
            states = {r.get("version", "?"): r.get("state") or "not loaded" for r in rows}
            last = ", ".join(f"v{v} {s}" for v, s in sorted(states.items())) or "not loaded"
            loading = _shows_loading(rows, versions)
        now = clock()
        if now >= (ceiling if loading else deadline):
            if loading:
                return False, f"Triton still reports: {last}", True
            return False, f"not READY in time (Triton reports: {last})", False
        sleep(poll_s if now < deadline else max(poll_s, LATE_POLL_S))


def _still_loading(name: str, timeout_s: float, waited_s: float, seen: str = "") -> str:
    """The reason given when Triton was still loading at the ceiling: not a failure."""
    text = (
        f"Triton was still loading {name} after {waited_s:.0f} s (its load timeout is "
        f"{timeout_s:.0f} s); the load has not failed and may still finish"
    )
    return f"{text} ({seen})" if seen else text


def load_and_wait(
    runtime: ServingRuntime,
    name: str,
    versions: Sequence[int] | None,
    timeout_s: float,
    poll_s: float,
    *,
    ceiling_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[bool, str, bool]:
    """Loads ``name`` and waits for ``versions`` READY; returns ``(ok, reason, still_loading)``.

    ``timeout_s`` is how long the load should take (per target: :mod:`model_store.load_timeouts`).
    A load Triton is still working on when it passes is waited out up to ``ceiling_s``
    (default ``CEILING_FACTOR`` x ``timeout_s``): the GE backend compiles for minutes, and a
    load the hub stopped waiting for has not failed. Only Triton's refusal (its load error, an
    UNAVAILABLE version with a reason) fails; still loading at the ceiling comes back as
    ``still_loading`` True, never as a failed load (callers must not note one).
    """
    began = clock()
    ceiling = began + (ceiling_s if ceiling_s is not None else CEILING_FACTOR * timeout_s)
    call = _LoadCall(runtime, name)
    outcome = call.outcome(timeout_s)
    if outcome is None:
        outcome = _outlast(call, runtime, name, versions, ceiling, poll_s, clock, sleep)
    if outcome is None:
        return False, _still_loading(name, timeout_s, clock() - began), True
    # A load call that got no answer (the client's own time-out) while the index shows the
    # load going on is not a verdict; with Triton gone too, it fails as any load error does.
    waiting_on = outcome.no_answer and _index_shows_loading(runtime, name, versions)
    if outcome.error is not None and not waiting_on:
        version = versions[0] if versions else 0
        return False, _failure_reason(runtime, name, version, outcome.error), False
    ok, reason, loading = _wait_ready(
        runtime, name, versions, began + timeout_s, ceiling, poll_s, clock=clock, sleep=sleep
    )
    if loading:
        return False, _still_loading(name, timeout_s, clock() - began, reason), True
    return ok, reason, False


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
        timeout_s: How long the load should take (the target's load timeout); a load still
            in progress then is waited out longer (:func:`load_and_wait`).
        poll_s: Interval between repository index polls.

    Returns:
        ``(True, "")`` once the configured version(s) are READY, else ``(False, reason)``
        with Triton's reason in plain words (callers prefix the model name), or saying that
        Triton was still loading (no restart is noted then).
    """
    path = store.config_path(name)
    try:
        cfg = parse_pbtxt(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return LoadResult(False, f"{name} has no config.pbtxt in the repository; serve a version.")
    except InvalidConfig as exc:
        return LoadResult(False, exc.message)
    versions = cfg.version_policy_specific
    ok, reason, still_loading = load_and_wait(runtime, name, versions, timeout_s, poll_s)
    if ok:
        note_loaded(store, name, backend=cfg.backend)
    elif not still_loading:
        # Only a load Triton refused wedges the GE backend; one still compiling has not.
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

"""Switching the version Triton serves, with the previous one back on failure.

Serving a version means (Triton's side: docs/triton.md#load-and-unload-api):
write ``repository/<name>/config.pbtxt`` with ``version_policy { specific { versions: [N] } }``,
ask Triton to load the model (explicit control mode re-reads the config), wait until the
repository index shows version N READY, and only then call it done. If anything fails the
previous files come back and the previous version is reloaded, so a failed switch leaves the
model serving what it served before.

Two layouts, chosen by the model's target:

* ``onnxruntime`` and ``acl``: every packaged version sits side by side in the repository;
  switching only rewrites config.pbtxt. Triton loads the new version before it unloads the
  old one, so requests in flight during a switch never fail (docs/triton.md#version-switches).
* ``npu_ge``: the model directory must hold exactly one version, so a new one is built and
  swapped in whole (:mod:`model_store.serving.directory_swap`).

This module takes no lock. Callers serialise switches of one model across processes and
hosts (the web layer holds a per-model lock around :func:`switch_version`).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from model_store.config import ModelConfig, render_pbtxt
from model_store.file_io import atomic_write_bytes, fsync_dir
from model_store.names import validate_model_name, validate_version
from model_store.runtime.errors import TritonRuntimeError
from model_store.serving.directory_swap import (
    RETIRED_ROOT,
    aside_path,
    stage_model_dir,
    swap_back,
    swap_in,
)
from model_store.serving.loading import load_and_wait
from model_store.serving.packages import (
    InvalidPackage,
    install_version,
    package_files,
    serving_config,
)
from model_store.serving.restart_needed import note_failed_load, note_loaded
from model_store.serving.triton_index import (
    ServingRuntime,
    model_rows,
    ready_versions,
    versions_text,
)
from model_store.store import ModelStore
from model_store.targets import UnknownTarget, get_target

log = logging.getLogger(__name__)


def _ignore_log(_line: str) -> None:
    """Default ``on_log``: drop the line."""


@dataclass(frozen=True)
class SwitchResult:
    """How a switch went.

    Attributes:
        ok: The target version is READY and the files say it serves.
        to_version: The version asked for.
        from_version: The version the caller said was serving (None: none).
        duration_s: The whole switch, preparing files to cleaning up.
        load_s: From Triton's load call to READY (or to the failure); None if Triton was
            never asked to load.
        reason: Why it failed: Triton's own reason in plain words (e.g. "onnxruntime could
            not load .../2/model.onnx: ... Protobuf parsing failed."), plus a sentence when
            the restore failed too; "" when ok.
        restored: After a failure, whether the previous files are back and the previously
            serving version is READY again (True also when nothing served before).
        phases: Seconds spent per phase (``prepare``, ``load``, ``restore``, ``cleanup``).
    """

    ok: bool
    to_version: int
    from_version: int | None
    duration_s: float
    load_s: float | None
    reason: str = ""
    restored: bool = False
    phases: dict[str, float] = field(default_factory=dict)


@dataclass
class _Switch:
    """The state one call of :func:`switch_version` carries between its steps."""

    store: ModelStore
    runtime: ServingRuntime
    name: str
    to_version: int
    from_version: int | None
    timeout_s: float
    poll_s: float
    on_log: Callable[[str], None]
    hand_over: Callable[[], None] | None = None
    started: float = field(default_factory=time.monotonic)
    phases: dict[str, float] = field(default_factory=dict)
    load_s: float | None = None
    #: Versions Triton served before the switch: the ones to bring back on failure.
    ready_before: list[int] = field(default_factory=list)

    def phase(self, label: str, since: float) -> float:
        elapsed = time.monotonic() - since
        self.phases[label] = self.phases.get(label, 0.0) + elapsed
        return elapsed

    def load_target(self) -> tuple[bool, str, bool]:
        self.on_log(f"Asked Triton to load {self.name} (version {self.to_version}).")
        began = time.monotonic()
        ok, reason, timed_out = load_and_wait(
            self.runtime, self.name, [self.to_version], self.timeout_s, self.poll_s
        )
        self.load_s = self.phase("load", began)
        if ok:
            self.on_log(f"Version {self.to_version} is READY after {self.load_s:.2f} s.")
            note_loaded(self.store, self.name)
        elif timed_out:
            # Triton is still compiling (npu_ge): not a failed load, so the GE backend is not
            # wedged and no restart is noted; the previous state still comes back.
            self.on_log(f"Version {self.to_version} is not READY yet: {reason}")
        else:
            self.on_log(f"Version {self.to_version} did not become READY: {reason}")
            if note_failed_load(self.store, self.name, reason):
                self.on_log(
                    "An npu_ge load failed: Triton needs a restart before it can load another "
                    "npu_ge model (docs/ge-backend.md#statistics-reload-and-unload)."
                )
        return ok, reason, timed_out

    def reload_previous(self, timed_out: bool, had_files: bool) -> tuple[bool, str]:
        """Brings back what served before (the previous files must be back already).

        That is what Triton served before the switch; when it served nothing (e.g. after a
        restart) but there were files for ``from_version``, that version is loaded, so that
        Triton agrees with the caller's records again.
        """
        versions = self.ready_before
        if not versions and had_files and self.from_version is not None:
            versions = [self.from_version]
        if not versions:
            if timed_out:
                # Nothing served before, but Triton may still finish the load it was still
                # doing and serve a version nobody asked for any more.
                try:
                    self.runtime.unload(self.name)
                except TritonRuntimeError as exc:
                    return False, f"could not cancel the abandoned load: {exc}"
            return True, ""
        shown = ", ".join(str(v) for v in versions)
        ok, reason, _ = load_and_wait(
            self.runtime, self.name, versions, self.timeout_s, self.poll_s
        )
        if ok:
            self.on_log(f"Version {shown} is READY again.")
        else:
            self.on_log(f"Version {shown} did not come back: {reason}")
        return ok, reason

    def put_back(
        self,
        undo: Callable[[], None],
        undone: str,
        *,
        had_files: bool,
        reason: str,
        timed_out: bool,
    ) -> SwitchResult:
        """After a failed load: the previous files back (``undo``, then the line ``undone``),
        what served before reloaded, and the failure reported."""
        began = time.monotonic()
        undo()
        self.on_log(undone)
        restored, problem = self.reload_previous(timed_out, had_files=had_files)
        self.phase("restore", began)
        return self.failure(reason, restored, problem)

    def result(self, ok: bool, reason: str = "", restored: bool = False) -> SwitchResult:
        duration = time.monotonic() - self.started
        verdict = "done" if ok else "failed"
        if not ok:
            log.warning(
                "switch of %s to version %s failed (restored: %s): %s",
                self.name, self.to_version, restored, reason,
            )  # fmt: skip
        self.on_log(f"Switch to version {self.to_version} {verdict} in {duration:.2f} s.")
        return SwitchResult(
            ok=ok,
            to_version=self.to_version,
            from_version=self.from_version,
            duration_s=duration,
            load_s=self.load_s,
            reason=reason,
            restored=restored,
            phases={k: round(v, 4) for k, v in self.phases.items()},
        )

    def failure(self, reason: str, restored: bool, restore_problem: str) -> SwitchResult:
        # The reason is Triton's own (callers prefix it with "v2 did not become ready: ");
        # only a failed restore adds a sentence, because then the operator must act.
        text = reason.rstrip(".") + "."
        if not restored:
            text += f" Restoring the previous state failed too: {restore_problem}"
        return self.result(False, text, restored)


def switch_version(
    store: ModelStore,
    runtime: ServingRuntime,
    *,
    name: str,
    target: str,
    to_version: int,
    from_version: int | None,
    timeout_s: float = 120.0,
    poll_s: float = 0.05,
    on_log: Callable[[str], None] = _ignore_log,
    hand_over: Callable[[], None] | None = None,
) -> SwitchResult:
    """Makes ``to_version`` the version Triton serves, or leaves the previous one serving.

    ``onnxruntime``/``acl``: installs the version directory from its package if it is
    missing, writes config.pbtxt atomically (version_policy specific [to]), loads and waits
    for READY. ``npu_ge``: builds a new model directory holding only that version outside
    the repository, swaps it in, loads and waits for READY. On failure (load error, timeout,
    UNAVAILABLE) the previous config (byte for byte) or model directory comes back and the
    previously serving version is reloaded.

    Hold the model's lock around this call; two switches of one model must not overlap.

    Args:
        store: The model store (its ``repository`` is what Triton reads).
        runtime: The Triton client.
        name: Model name.
        target: ``onnxruntime``, ``acl`` or ``npu_ge``.
        to_version: The version to serve; it must be packaged.
        from_version: The version the caller believes serves now (None: none). On failure,
            this version is reloaded when Triton itself was serving nothing.
        timeout_s: How long the load should take: the target's load timeout
            (:mod:`model_store.load_timeouts`). A load Triton is still doing then is waited
            out a few times as long, and is not a failed load if it outlives that too (no
            restart is noted). The reload after a failure gets as long.
        poll_s: Interval between repository index polls.
        on_log: Receives one plain-words line per step (for the job log).
        hand_over: For a router that names the version it sends each call to (the hub's
            ``/v2`` gateway does): called once ``to_version`` is READY *beside* the versions
            that served before, to route new calls to it; only then are the old versions
            unloaded. Without it, calls routed to an old version after Triton unloaded it
            would fail (side-by-side targets only; ``npu_ge`` swaps whole directories).
            Raising in it puts the previous state back.

    Returns:
        The outcome, with timings. Failures of the switch itself are results, not exceptions.

    Raises:
        NotFound, InvalidConfig, InvalidPackage: The version's package is missing or
            unusable, or the target is unknown. Nothing was changed.
        TritonUnavailable: Triton did not answer before anything was changed.
    """
    name = validate_model_name(name)
    to_version = validate_version(to_version)
    try:
        # Whether versions sit side by side or the directory is swapped whole is the target's.
        side_by_side = get_target(target).versions_side_by_side
    except UnknownTarget as exc:
        raise InvalidPackage(exc.message) from None
    switch = _Switch(
        store, runtime, name, to_version, from_version, timeout_s, poll_s, on_log, hand_over
    )
    began = time.monotonic()
    cfg = serving_config(store, name, to_version)
    files = package_files(store, name, to_version)
    # Asking Triton first means an unreachable Triton raises before any file is touched.
    ready_before = ready_versions(model_rows(runtime, name))
    switch.ready_before = ready_before
    on_log(
        f"Switching {name} to version {to_version} (target {target}); "
        f"Triton serves {versions_text(ready_before)} now."
    )
    switch.phase("prepare", began)
    if not side_by_side:
        return _switch_single(switch, cfg, files)
    return _switch_side_by_side(switch, cfg, files)


def _switch_side_by_side(switch: _Switch, cfg: ModelConfig, files: list[Path]) -> SwitchResult:
    """onnxruntime/acl: every version stays in place; config.pbtxt decides which one serves."""
    store, name, to_version = switch.store, switch.name, switch.to_version
    began = time.monotonic()
    config_path = store.config_path(name)
    if not store.version_dir(name, to_version).is_dir():
        # Packaging installs it; it can be missing after a manual cleanup or a restore.
        switch.on_log(f"Installing version {to_version} into the repository from its package.")
        install_version(store, name, to_version)
    try:
        previous: bytes | None = config_path.read_bytes()
    except FileNotFoundError:
        previous = None
    others = [v for v in switch.ready_before if v != to_version]
    handing_over = switch.hand_over is not None and bool(others)
    # With a router to hand over to, the old versions stay loaded until calls go to the new
    # one: first a config that lists them all, then, after the hand-over, the new one alone.
    first = (
        replace(cfg, version_policy_specific=sorted({*others, to_version})) if handing_over else cfg
    )
    store.write_config(name, render_pbtxt(first))
    undo = partial(_restore_config, config_path, previous)
    with _undone_on_crash(undo):
        switch.on_log(
            "Wrote config.pbtxt: version_policy specific "
            f"[{', '.join(str(v) for v in first.version_policy_specific or [])}]."
        )
        switch.phase("prepare", began)
        # Triton re-reads config.pbtxt: it loads the new version first and unloads the old
        # one only once the new one is READY, so requests in flight are served throughout.
        ok, reason, timed_out = switch.load_target()
    if ok and handing_over:
        ok, reason = _hand_over(switch, cfg, others)
    if ok:
        return switch.result(True)
    had_files = previous is not None
    undone = (
        "Restored the previous config.pbtxt."
        if had_files
        else "Removed config.pbtxt (there was none before)."
    )
    return switch.put_back(undo, undone, had_files=had_files, reason=reason, timed_out=timed_out)


def _hand_over(switch: _Switch, cfg: ModelConfig, others: list[int]) -> tuple[bool, str]:
    """The new version is READY beside ``others``: the router moves to it, then the config
    that lists it alone unloads them. A failed unload leaves them loaded (calls already go to
    the new version): a note, not a failure."""
    assert switch.hand_over is not None
    shown = ", ".join(str(v) for v in others)
    began = time.monotonic()
    try:
        switch.hand_over()
    except Exception as exc:  # the router did not move: nothing may be unloaded
        switch.on_log(f"Calls could not be handed over to version {switch.to_version}: {exc}")
        return False, f"the hand-over to version {switch.to_version} failed: {exc}"
    switch.phase("hand_over", began)
    switch.on_log(f"Calls now go to version {switch.to_version}; unloading version {shown}.")
    began = time.monotonic()
    switch.store.write_config(switch.name, render_pbtxt(cfg))
    ok, reason, _ = load_and_wait(
        switch.runtime, switch.name, [switch.to_version], switch.timeout_s, switch.poll_s
    )
    switch.phase("unload", began)
    if ok:
        switch.on_log(f"Wrote config.pbtxt: version_policy specific [{switch.to_version}].")
    else:
        switch.on_log(f"Version {shown} may still be loaded beside it: {reason}")
    return True, ""


@contextmanager
def _undone_on_crash(undo: Callable[[], None]) -> Iterator[None]:
    """Runs ``undo`` if the block raises: a crash of ours (or Ctrl-C), not a failed load, must
    leave the previous files, not a half-done switch, in the repository."""
    try:
        yield
    except BaseException:
        undo()
        raise


def _restore_config(path: Path, previous: bytes | None) -> None:
    """Puts back the exact bytes of the previous config.pbtxt, or removes it if there was none."""
    if previous is not None:
        atomic_write_bytes(path, previous)
        return
    path.unlink(missing_ok=True)
    fsync_dir(path.parent)


def _switch_single(switch: _Switch, cfg: ModelConfig, files: list[Path]) -> SwitchResult:
    """npu_ge: swap in a model directory that holds only the new version."""
    store, name, to_version = switch.store, switch.name, switch.to_version
    began = time.monotonic()
    model_dir = store.model_dir(name)
    staged = stage_model_dir(store, cfg, to_version, files)
    # Moving the old directory away does not disturb the version Triton is serving: Triton
    # holds that model in memory (the GE backend compiled the .onnx into a graph at load;
    # our onnxruntime backend holds an ORT session), and neither reads the files again until
    # the next load. The staging and retired folders are outside the repository, so the GE
    # backend's recursive .onnx search never sees a second model file.
    try:
        previous = swap_in(staged, model_dir, aside_path(store, RETIRED_ROOT, name))
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    undo = partial(swap_back, store, name, model_dir, previous)
    with _undone_on_crash(undo):
        fsync_dir(model_dir.parent)
        switch.on_log(
            f"Swapped in a model directory holding only version {to_version}"
            + (" (the previous one is set aside)." if previous else ".")
        )
        switch.phase("prepare", began)
        ok, reason, timed_out = switch.load_target()
    if ok:
        began = time.monotonic()
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
        switch.phase("cleanup", began)
        return switch.result(True)
    had_files = previous is not None
    undone = (
        "Put the previous model directory back."
        if had_files
        else "Removed the model directory (there was none before)."
    )
    return switch.put_back(undo, undone, had_files=had_files, reason=reason, timed_out=timed_out)

"""Which version of a model Triton serves: switch, roll back, load, unload, inspect.

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
* ``npu_ge``: the real GE backend runs the first ``.onnx`` it finds anywhere under the model
  directory, whatever the version (docs/ge-backend.md#how-the-model-file-is-found), so that
  directory must hold exactly one version. A new model directory is built outside the
  repository and swapped in whole (docs/ge-backend.md#one-version-per-model-directory).

This module takes no lock. Callers serialise switches of one model across processes and
hosts (the web layer holds a per-model lock around :func:`switch_version`).

Example::

    result = switch_version(store, runtime, name="resnet", target="onnxruntime",
                            to_version=3, from_version=2, on_log=job_log)
    if not result.ok:   # version 2 serves again when result.restored
        report(result.reason)
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import re
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, Protocol, TypedDict

from model_store.config import ModelConfig, parse_pbtxt, render_pbtxt
from model_store.errors import InvalidConfig, ModelStoreError, NotFound
from model_store.names import validate_model_name, validate_version
from model_store.runtime.errors import TritonRequestError, TritonRuntimeError
from model_store.store import (
    CONFIG_FILE,
    DIR_MODE,
    REMOVING_PREFIX,
    STAGING_PREFIX,
    ModelStore,
    atomic_write_bytes,
    atomic_write_text,
    fsync_dir,
)

log = logging.getLogger(__name__)

#: Targets whose versions sit side by side in the repository (config.pbtxt picks one).
SIDE_BY_SIDE_TARGETS = frozenset({"onnxruntime", "acl"})
#: Targets whose model directory holds only the serving version (swapped in whole).
SINGLE_VERSION_TARGETS = frozenset({"npu_ge"})
#: Folders under the store root, beside ``repository/``, for whole model directories on the
#: way in and on the way out. Outside the repository so that neither Triton nor the GE
#: backend's recursive ``*.onnx`` search ever sees them; on the same filesystem so that
#: moving them in and out is a rename.
STAGING_ROOT = "staging"
RETIRED_ROOT = "retired"
#: Leftovers younger than this are assumed to belong to work in progress (a packaging job
#: stages versions without the switch lock), so :func:`repository_state` does not list them.
DEFAULT_STALE_AFTER_S = 600.0

READY = "READY"
UNAVAILABLE = "UNAVAILABLE"

ChangeKind = Literal["breaking", "warning", "info"]


class InvalidPackage(ModelStoreError):
    """A packaged version cannot be served as it is (missing files, several .onnx, ...)."""

    code = "invalid_package"


class ServingTimeout(ModelStoreError):
    """Triton did not reach the expected state in time."""

    code = "serving_timeout"


class ServingRuntime(Protocol):
    """What this module needs from :class:`model_store.runtime.client.TritonRuntime`."""

    def load(self, name: str, config: dict[str, Any] | None = None) -> None: ...

    def unload(self, name: str, unload_dependents: bool = False) -> None: ...

    def repository_index(self) -> list[dict[str, str]]: ...


def _ignore_log(_line: str) -> None:
    """Default ``on_log``: drop the line."""


# --------------------------------------------------------------------------- signature changes


@dataclass(frozen=True)
class Change:
    """One difference between the interfaces of two versions.

    Attributes:
        kind: ``breaking`` (existing clients will get errors), ``warning`` (some clients
            may get errors or different shapes) or ``info`` (nothing changes for clients).
        tensor: The input or output concerned, as named in the old version ("" for the
            whole model).
        message: What changed and what it means for clients, in plain words.
    """

    kind: ChangeKind
    tensor: str
    message: str


def _is_fixed(dim: object) -> bool:
    """A dim is fixed when it is a positive int; -1, 0, None and names are dynamic."""
    return isinstance(dim, int) and not isinstance(dim, bool) and dim > 0


def _show_dims(dims: Sequence[object] | None) -> str:
    if dims is None:
        return "unknown"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _tensors(signature: Mapping[str, Any], role: str) -> list[Mapping[str, Any]]:
    return [t for t in signature.get(role) or [] if isinstance(t, Mapping) and "name" in t]


def _dims_change(role: str, name: str, old: Any, new: Any) -> Change | None:
    """Compares the shapes of one tensor present in both versions."""
    label = f"{role} {name!r}"
    if old is None and new is None:
        return None
    if old is None or new is None:
        return Change(
            "warning",
            name,
            f"{label}: the shape changes from {_show_dims(old)} to {_show_dims(new)}; "
            "check what clients send and expect.",
        )
    if len(old) != len(new):
        return Change(
            "breaking",
            name,
            f"{label} changes rank from {len(old)} to {len(new)} "
            f"({_show_dims(old)} -> {_show_dims(new)}); clients built for the old shape "
            "will be rejected.",
        )
    axes = []
    for axis, (a, b) in enumerate(zip(old, new, strict=True)):
        if _is_fixed(a) and _is_fixed(b) and a != b:
            axes.append(f"axis {axis} {a} -> {b}")
        elif _is_fixed(a) != _is_fixed(b):
            before = a if _is_fixed(a) else "any size"
            after = b if _is_fixed(b) else "any size"
            axes.append(f"axis {axis} {before} -> {after}")
    if not axes:
        return None
    consequence = (
        "clients sending the old size will be rejected"
        if role == "Input"
        else "clients that rely on the old size must be checked"
    )
    return Change(
        "warning",
        name,
        f"{label} changes shape from {_show_dims(old)} to {_show_dims(new)} "
        f"({'; '.join(axes)}); {consequence}.",
    )


def _tensor_changes(
    role: str, old: Mapping[str, Any], new: Mapping[str, Any], new_name: str | None = None
) -> list[Change]:
    """Changes of one tensor found in both versions (possibly under a new name)."""
    name = str(old["name"])
    label = f"{role} {name!r}"
    changes = []
    if new_name is not None:
        who = "send" if role == "Input" else "ask for"
        changes.append(
            Change(
                "breaking",
                name,
                f"{label} is renamed to {new_name!r}; clients that {who} {name!r} "
                "will be rejected.",
            )
        )
    if old.get("dtype") != new.get("dtype"):
        changes.append(
            Change(
                "breaking",
                name,
                f"{label} changes data type from {old.get('dtype')} to {new.get('dtype')}; "
                "clients using the old type will be rejected or misread the data.",
            )
        )
    dims = _dims_change(role, name, old.get("dims"), new.get("dims"))
    if dims is not None:
        changes.append(dims)
    return changes


def _role_changes(
    role: str, old_list: list[Mapping[str, Any]], new_list: list[Mapping[str, Any]]
) -> list[Change]:
    """Changes among the inputs (or the outputs) of two versions."""
    new_by_name = {str(t["name"]): t for t in new_list}
    old_names = {str(t["name"]) for t in old_list}
    added = {i: t for i, t in enumerate(new_list) if str(t["name"]) not in old_names}
    changes: list[Change] = []
    for index, old in enumerate(old_list):
        name = str(old["name"])
        if name in new_by_name:
            changes += _tensor_changes(role, old, new_by_name[name])
        elif index in added:
            # Same position, different name: most likely a rename (an exporter that names
            # tensors differently), which is still a break for clients using the old name.
            new = added.pop(index)
            changes += _tensor_changes(role, old, new, new_name=str(new["name"]))
        else:
            consequence = (
                "clients that send it will be rejected"
                if role == "Input"
                else "clients that ask for it will get an error"
            )
            changes.append(Change("breaking", name, f"{role} {name!r} is removed; {consequence}."))
    for new in added.values():
        name = str(new["name"])
        if role == "Input":
            changes.append(
                Change(
                    "breaking",
                    name,
                    f"New input {name!r} is required; existing clients do not send it and "
                    "will be rejected.",
                )
            )
        else:
            changes.append(
                Change(
                    "info",
                    name,
                    f"New output {name!r}; existing clients are not affected.",
                )
            )
    return changes


def signature_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Lists how the interface of ``new`` differs from ``old``, most relevant first per tensor.

    Signatures are ``{"inputs": [{"name", "dtype", "dims"}], "outputs": [...]}`` as recorded
    for each version; dims are full shapes (batch included), each an int, or -1 / None / a
    symbolic name for a dynamic axis; ``dims`` None means even the rank is unknown.

    Breaking: a removed or renamed input or output, a new input (clients do not send it),
    a changed data type, a changed rank. Warning: a fixed size that changes, or an axis that
    turns dynamic or fixed. Info: a new output. Renaming one symbolic axis into another
    (``batch`` -> ``N``) is not a change.

    Args:
        old: The signature of the version serving now.
        new: The signature of the version about to serve.

    Returns:
        The changes, inputs first; empty when the interfaces match. When either signature
        was never recorded, a single warning says the two cannot be compared.
    """
    known = all(("inputs" in s or "outputs" in s) for s in (old, new))
    if not known:
        return [
            Change(
                "warning",
                "",
                "The interface of one of the two versions was not recorded, so they cannot be "
                "compared; check inputs and outputs by hand.",
            )
        ]
    inputs = _role_changes("Input", _tensors(old, "inputs"), _tensors(new, "inputs"))
    outputs = _role_changes("Output", _tensors(old, "outputs"), _tensors(new, "outputs"))
    return inputs + outputs


# --------------------------------------------------------------------------- config


def serving_config(store: ModelStore, name: str, version: int) -> ModelConfig:
    """The config that serves ``version``: its packaged config, pinned to that version.

    Parsing drops fields :class:`ModelConfig` does not model; package configs are generated
    from that same dataclass, so nothing of ours is lost.

    Args:
        store: The model store.
        name: Model name.
        version: Version number.

    Returns:
        The packaged config with ``version_policy_specific=[version]`` and ``name`` set to
        the model name (Triton refuses a config whose name differs from its directory).

    Raises:
        NotFound: If the version has no packaged config.pbtxt.
        InvalidConfig: If that file cannot be parsed.
    """
    version = validate_version(version)
    path = store.package_dir(name, version) / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NotFound(
            f"Version {version} of {name!r} has no packaged config.pbtxt ({path}). "
            "Package the version again."
        ) from None
    cfg = parse_pbtxt(text)
    cfg.name = validate_model_name(name)
    cfg.version_policy_specific = [version]
    return cfg


def _package_files(store: ModelStore, name: str, version: int) -> list[Path]:
    """The files of the packaged version directory (artifact plus any external data)."""
    folder = store.package_dir(name, version) / str(version)
    files = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    if not files:
        raise NotFound(
            f"Version {version} of {name!r} has no packaged files ({folder}). "
            "Package the version again."
        )
    return files


def _link_or_copy(src: Path, dst: Path) -> None:
    """Hard-links ``src`` to ``dst`` (no copy of big weights), copying when links are refused."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
        fd = os.open(dst, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------- Triton state


def _rows(runtime: ServingRuntime, name: str) -> list[dict[str, str]]:
    return [row for row in runtime.repository_index() if row.get("name") == name]


def _ready_versions(rows: Iterable[Mapping[str, str]]) -> list[int]:
    return sorted(
        int(row["version"])
        for row in rows
        if row.get("state") == READY and str(row.get("version", "")).isdigit()
    )


def _row_for(rows: Iterable[Mapping[str, str]], version: int) -> Mapping[str, str] | None:
    return next((row for row in rows if row.get("version") == str(version)), None)


_STATUS_PREFIX = re.compile(
    r"^(?:Internal|Invalid argument|Not found|Unavailable|Unsupported|Already exists|Unknown|"
    r"Cancelled|Failed precondition): "
)
_EXCEPTION_PREFIX = re.compile(r"^[A-Z][A-Za-z0-9_]*(?:Error|Exception): ")


def plain_reason(reason: str) -> str:
    """Triton's reason without the noise: status words, Python tracebacks, blank lines.

    The message itself is kept verbatim: it is usually the most precise explanation an
    operator gets (e.g. ``onnxruntime could not load .../model.onnx: ... Protobuf parsing
    failed``).
    """
    text = reason.split("\n\nAt:\n", 1)[0]  # the Python backend appends the stub's traceback
    text = " ".join(text.split())
    for prefix in (_STATUS_PREFIX, _EXCEPTION_PREFIX):
        text = prefix.sub("", text, count=1)
    return text.rstrip(" ;")


def _failure_reason(
    runtime: ServingRuntime, name: str, version: int, load_error: str | None
) -> str:
    """Why ``version`` is not READY: the index's reason for it, else the load call's error.

    The index reason is used only when it is current: when the load call failed with a
    message that does not contain it (e.g. "at least one version must be available"), the
    row may be left over from an earlier attempt.
    """
    try:
        row = _row_for(_rows(runtime, name), version)
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
            rows = _rows(runtime, name)
        except TritonRuntimeError as exc:
            rows, last = [], str(exc)
        else:
            ready = _ready_versions(rows)
            if (versions is None and ready) or (versions and set(versions) <= set(ready)):
                return True, ""
            for version in versions or []:
                row = _row_for(rows, version)
                reason = (row or {}).get("reason", "")
                if row and row.get("state") == UNAVAILABLE and reason and reason != "unloaded":
                    return False, plain_reason(reason)
            states = {r.get("version", "?"): r.get("state") or "not loaded" for r in rows}
            last = ", ".join(f"v{v} {s}" for v, s in sorted(states.items())) or "not loaded"
        if time.monotonic() >= deadline:
            return False, f"not READY in time (Triton reports: {last})"
        time.sleep(poll_s)


def _load_and_wait(
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


# --------------------------------------------------------------------------- switching


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
        ok, reason, timed_out = _load_and_wait(
            self.runtime, self.name, [self.to_version], self.timeout_s, self.poll_s
        )
        self.load_s = self.phase("load", began)
        if ok:
            self.on_log(f"Version {self.to_version} is READY after {self.load_s:.2f} s.")
        else:
            self.on_log(f"Version {self.to_version} did not become READY: {reason}")
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
                # Nothing served before, but Triton may still finish the abandoned load
                # and serve a version nobody asked for any more.
                try:
                    self.runtime.unload(self.name)
                except TritonRuntimeError as exc:
                    return False, f"could not cancel the abandoned load: {exc}"
            return True, ""
        shown = ", ".join(str(v) for v in versions)
        ok, reason, _ = _load_and_wait(
            self.runtime, self.name, versions, self.timeout_s, self.poll_s
        )
        if ok:
            self.on_log(f"Version {shown} is READY again.")
        else:
            self.on_log(f"Version {shown} did not come back: {reason}")
        return ok, reason

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
        timeout_s: How long to wait for READY (the reload after a failure gets as long).
        poll_s: Interval between repository index polls.
        on_log: Receives one plain-words line per step (for the job log).

    Returns:
        The outcome, with timings. Failures of the switch itself are results, not exceptions.

    Raises:
        NotFound, InvalidConfig, InvalidPackage: The version's package is missing or
            unusable, or the target is unknown. Nothing was changed.
        TritonUnavailable: Triton did not answer before anything was changed.
    """
    name = validate_model_name(name)
    to_version = validate_version(to_version)
    if target not in SIDE_BY_SIDE_TARGETS | SINGLE_VERSION_TARGETS:
        known = ", ".join(sorted(SIDE_BY_SIDE_TARGETS | SINGLE_VERSION_TARGETS))
        raise InvalidPackage(f"Unknown target {target!r}; use one of: {known}.")
    switch = _Switch(store, runtime, name, to_version, from_version, timeout_s, poll_s, on_log)
    began = time.monotonic()
    cfg = serving_config(store, name, to_version)
    files = _package_files(store, name, to_version)
    # Asking Triton first means an unreachable Triton raises before any file is touched.
    ready_before = _ready_versions(_rows(runtime, name))
    switch.ready_before = ready_before
    on_log(
        f"Switching {name} to version {to_version} (target {target}); "
        f"Triton serves {_versions_text(ready_before)} now."
    )
    switch.phase("prepare", began)
    if target in SINGLE_VERSION_TARGETS:
        return _switch_single(switch, cfg, files)
    return _switch_side_by_side(switch, cfg, files)


def _versions_text(versions: Sequence[int]) -> str:
    if not versions:
        return "no version"
    return "version " + ", ".join(str(v) for v in versions)


def _switch_side_by_side(switch: _Switch, cfg: ModelConfig, files: list[Path]) -> SwitchResult:
    """onnxruntime/acl: every version stays in place; config.pbtxt decides which one serves."""
    store, name, to_version = switch.store, switch.name, switch.to_version
    began = time.monotonic()
    config_path = store.config_path(name)
    if not store.version_dir(name, to_version).is_dir():
        # Packaging installs it; it can be missing after a manual cleanup or a restore.
        switch.on_log(f"Installing version {to_version} into the repository from its package.")
        with store.stage_version(name, to_version) as staging:
            for path in files:
                _link_or_copy(path, staging / path.name)
    try:
        previous: bytes | None = config_path.read_bytes()
    except FileNotFoundError:
        previous = None
    store.write_config(name, render_pbtxt(cfg))
    try:
        switch.on_log(f"Wrote config.pbtxt: version_policy specific [{to_version}].")
        switch.phase("prepare", began)
        # Triton re-reads config.pbtxt: it loads the new version first and unloads the old
        # one only once the new one is READY, so requests in flight are served throughout.
        ok, reason, timed_out = switch.load_target()
    except BaseException:
        # A crash of ours (or Ctrl-C), not a failed load: put the old config back anyway.
        _restore_config(config_path, previous)
        raise
    if ok:
        return switch.result(True)

    began = time.monotonic()
    _restore_config(config_path, previous)
    switch.on_log(
        "Restored the previous config.pbtxt."
        if previous is not None
        else "Removed config.pbtxt (there was none before)."
    )
    restored, problem = switch.reload_previous(timed_out, had_files=previous is not None)
    switch.phase("restore", began)
    return switch.failure(reason, restored, problem)


def _restore_config(path: Path, previous: bytes | None) -> None:
    """Puts back the exact bytes of the previous config.pbtxt, or removes it if there was none."""
    if previous is not None:
        atomic_write_bytes(path, previous)
        return
    path.unlink(missing_ok=True)
    fsync_dir(path.parent)


# --------------------------------------------------------------------------- npu_ge: one version


def _aside_path(store: ModelStore, folder: str, name: str) -> Path:
    """A fresh ``<root>/<folder>/<name>-<random>`` path (not created)."""
    parent = store.root / folder
    parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    return parent / f"{name}-{secrets.token_hex(8)}"


def _stage_model_dir(store: ModelStore, cfg: ModelConfig, version: int, files: list[Path]) -> Path:
    """Builds ``config.pbtxt`` + ``<version>/<files>`` in a staging dir outside the repository."""
    onnx_files = [p.name for p in files if p.name.endswith(".onnx")]
    if len(onnx_files) > 1:
        raise InvalidPackage(
            f"The package of version {version} holds {len(onnx_files)} .onnx files "
            f"({', '.join(onnx_files)}); the GE backend would run an arbitrary one. "
            "Package the version again with a single model file."
        )
    staged = _aside_path(store, STAGING_ROOT, cfg.name)
    try:
        (staged / str(version)).mkdir(mode=DIR_MODE, parents=True)
        for path in files:
            _link_or_copy(path, staged / str(version) / path.name)
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


def _swap_in(staged: Path, model_dir: Path, retired: Path) -> Path | None:
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


def _swap_back(store: ModelStore, name: str, model_dir: Path, previous: Path | None) -> None:
    """Undoes :func:`_swap_in`: the previous directory returns, the new one is deleted."""
    discard = _aside_path(store, RETIRED_ROOT, name)
    if previous is None:
        model_dir.rename(discard)
    elif _exchange(previous, model_dir):
        discard = previous
    else:
        model_dir.rename(discard)
        previous.rename(model_dir)
    fsync_dir(model_dir.parent)
    shutil.rmtree(discard, ignore_errors=True)


def _switch_single(switch: _Switch, cfg: ModelConfig, files: list[Path]) -> SwitchResult:
    """npu_ge: swap in a model directory that holds only the new version."""
    store, name, to_version = switch.store, switch.name, switch.to_version
    began = time.monotonic()
    model_dir = store.model_dir(name)
    staged = _stage_model_dir(store, cfg, to_version, files)
    # Moving the old directory away does not disturb the version Triton is serving: Triton
    # holds that model in memory (the GE backend compiled the .onnx into a graph at load;
    # our onnxruntime backend holds an ORT session), and neither reads the files again until
    # the next load. The staging and retired folders are outside the repository, so the GE
    # backend's recursive .onnx search never sees a second model file.
    try:
        previous = _swap_in(staged, model_dir, _aside_path(store, RETIRED_ROOT, name))
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    try:
        fsync_dir(model_dir.parent)
        switch.on_log(
            f"Swapped in a model directory holding only version {to_version}"
            + (" (the previous one is set aside)." if previous else ".")
        )
        switch.phase("prepare", began)
        ok, reason, timed_out = switch.load_target()
    except BaseException:
        # Not a failed load but a crash of ours (or Ctrl-C): leave the previous files, not
        # a half-done switch, in the repository.
        _swap_back(store, name, model_dir, previous)
        raise

    began = time.monotonic()
    if ok:
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
        switch.phase("cleanup", began)
        return switch.result(True)

    _swap_back(store, name, model_dir, previous)
    switch.on_log(
        "Put the previous model directory back."
        if previous is not None
        else "Removed the model directory (there was none before)."
    )
    restored, problem = switch.reload_previous(timed_out, had_files=previous is not None)
    switch.phase("restore", began)
    return switch.failure(reason, restored, problem)


# --------------------------------------------------------------------------- load / unload


class LoadResult(NamedTuple):
    """Outcome of :func:`load_serving`; unpacks as ``ok, reason``."""

    ok: bool
    reason: str


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
    ok, reason, _ = _load_and_wait(runtime, name, versions, timeout_s, poll_s)
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
        if not (store.model_dir(name) / str(validate_version(extra))).is_dir():
            raise NotFound(f"Version {extra} of {name!r} is not in the repository.")
        cfg.version_policy_specific = sorted({serving, extra})
    path = store.config_path(name)
    before = path.read_text(encoding="utf-8") if path.exists() else None
    atomic_write_text(path, render_pbtxt(cfg))
    ok, reason, _ = _load_and_wait(runtime, name, cfg.version_policy_specific, timeout_s, poll_s)
    if not ok and before is not None:
        atomic_write_text(path, before)
        _load_and_wait(runtime, name, None, timeout_s, poll_s)
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
            for row in _rows(runtime, name)
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


# --------------------------------------------------------------------------- state


class TritonVersionState(TypedDict):
    """One version in Triton's repository index."""

    state: str
    reason: str


class RepositoryState(TypedDict):
    """What the files and Triton say about one model; see :func:`repository_state`."""

    name: str
    model_dir_present: bool
    config_present: bool
    config_error: str
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
    problems: list[str]


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
        rows = _rows(runtime, name)
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
    state["ready_versions"] = _ready_versions(rows)


def _problems(state: RepositoryState) -> list[str]:
    """Disagreements between files and Triton, in plain words, for the reconcile page."""
    problems = []
    policy = state["policy_versions"]
    if state["config_error"]:
        problems.append(f"config.pbtxt cannot be read: {state['config_error']}")
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
        problems.append(f"Triton serves {_versions_text(extra)}, which config.pbtxt does not pin.")
    if state["backend"] == "npu_ge" and len(state["onnx_files"]) > 1:
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

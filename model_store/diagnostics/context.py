"""What a diagnostics check is, and the context through which it sees the host.

A check is a function of a :class:`DiagnosticsContext` returning a :class:`Check` (a state,
what it found, what to do). All outside contact goes through the context (environment,
``which``, ``run`` for subprocesses, the Triton calls, the devices report, ``/dev``), so
tests pass plain functions and temporary directories instead of a real host. The check
modules (:mod:`~model_store.diagnostics.cann_checks`,
:mod:`~model_store.diagnostics.device_checks`, :mod:`~model_store.diagnostics.ge_backend_checks`,
:mod:`~model_store.diagnostics.triton_checks`) build their results with :func:`make_check`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from model_store import spawn
from model_store.devices import read_devices
from model_store.devices.reading import probe_timeout
from model_store.diagnostics.triton_log import read_log_tail
from model_store.text import Message, Said, as_json, say

CheckState = Literal["ok", "warning", "failing", "not_applicable"]
TritonProtocol = Literal["http", "grpc"]
#: Every state, from best to worst; ``not_applicable`` is listed last, it is neither.
STATES: tuple[CheckState, ...] = ("ok", "warning", "failing", "not_applicable")
_SEVERITY = {"ok": 0, "not_applicable": 0, "warning": 1, "failing": 2}

#: Seconds any one subprocess (npu-smi, atc, ldd) may take (HOST_PROBE_TIMEOUT_SECONDS, 15 s).
COMMAND_TIMEOUT = probe_timeout()


@dataclass
class Check:
    """The result of one check.

    ``title``, ``found`` and ``advice`` are messages made with :func:`model_store.text.say`, so
    the web layer can say them in the reader's language.

    Attributes:
        id: Stable machine name, e.g. ``cann_env``.
        title: Short human title.
        state: ``ok``, ``warning``, ``failing`` or ``not_applicable``.
        found: What the check found, in plain words with concrete values.
        advice: What to do; ``""`` when there is nothing to do.
        details: Supporting lines (ldd output, log lines, one line per chip...).
    """

    id: str
    title: Said
    state: CheckState
    found: Said
    advice: Said = ""
    details: list[Said] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The check as JSON-ready data, its sentences as messages, so that a report sent as
        JSON from a node is still said in the reader's language."""
        return as_json(asdict(self))


def run_bounded(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """:func:`subprocess.run` capturing text output, with a timeout, no check, never a shell."""
    kwargs.setdefault("timeout", COMMAND_TIMEOUT)
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("check", False)
    return spawn.run(list(argv), **kwargs)


@dataclass
class DiagnosticsContext:
    """Everything the checks read from the outside world.

    Attributes:
        env: The environment to judge (the web process's own, usually).
        backends_dir: Triton's ``--backend-directory``; ``None`` when not known here.
        triton_url: Triton's HTTP address, for the messages.
        is_live / is_ready: Triton liveness and readiness; ``None`` when no Triton is configured.
        repository_index: Triton's repository index rows (``name``, ``version``,
            ``state``, ``reason``), asked with the hub's key; may raise when Triton does
            not answer, ``TritonAccessDenied`` when it refuses the key.
        repository_index_without_key: The same question asked over ``"http"`` or
            ``"grpc"`` without any key, as anyone on the network could.
        grpc_url: Triton's gRPC address, for the messages ("" when none is configured).
        api_key_set: Whether the hub has a TRITON_API_KEY (its value is never needed here).
        triton_log_path: Triton's log file, if this host has one.
        devices: A :func:`model_store.devices.read_devices` report, or a callable
            returning one; ``None`` runs ``read_devices`` with ``which`` and ``run``.
        which: Finds a program on PATH (:func:`shutil.which`).
        run: Runs a program (signature of :func:`subprocess.run`).
        dev_dir: Where device nodes live.
        ascend_root: Where CANN and the driver are installed by default.
        timeout: Seconds any one subprocess may take.
        oidc_issuer / oidc_probe: The OpenID Connect issuer, and a call that reads its
            discovery document and keys (what it found in a line; raises when it cannot);
            ``None`` when OIDC sign-in is not set up.
        ldap_uri / ldap_probe: The LDAP server, and a call that binds as the service account
            and reads the user search base (who it bound as); ``None`` without LDAP sign-in.
    """

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    backends_dir: Path | None = None
    triton_url: str = ""
    is_live: Callable[[], bool] | None = None
    is_ready: Callable[[], bool] | None = None
    repository_index: Callable[[], list[dict[str, str]]] | None = None
    repository_index_without_key: Callable[[TritonProtocol], list[dict[str, str]]] | None = None
    grpc_url: str = ""
    api_key_set: bool = False
    triton_log_path: Path | None = None
    devices: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None
    which: Callable[[str], str | None] = shutil.which
    run: Callable[..., Any] = run_bounded
    dev_dir: Path = Path("/dev")
    ascend_root: Path = Path("/usr/local/Ascend")
    timeout: float = COMMAND_TIMEOUT
    oidc_issuer: str = ""
    oidc_probe: Callable[[], str] | None = None
    ldap_uri: str = ""
    ldap_probe: Callable[[], str] | None = None
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def _once(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per context (several checks share Triton and npu-smi answers).

        An exception is remembered too and raised again for every caller.
        """
        if key not in self._memo:
            try:
                self._memo[key] = (True, compute())
            except Exception as exc:
                self._memo[key] = (False, exc)
        ok, value = self._memo[key]
        if not ok:
            raise value
        return value

    def device_report(self) -> Mapping[str, Any]:
        """The npu-smi report (``available``, ``npus``, ``reason``...)."""

        def compute() -> Mapping[str, Any]:
            if self.devices is None:
                return read_devices(runner=self.run, which=self.which, timeout=self.timeout)
            if callable(self.devices):
                return self.devices()
            return self.devices

        report: Mapping[str, Any] = self._once("devices", compute)
        return report

    def triton_live(self) -> bool:
        return self.is_live is not None and bool(self._once("live", self.is_live))

    def triton_ready(self) -> bool:
        return self.is_ready is not None and bool(self._once("ready", self.is_ready))

    def index(self) -> list[dict[str, str]]:
        """The repository index; raises when Triton is not configured or does not answer."""
        if self.repository_index is None:
            raise LookupError(say("no Triton is configured"))
        if not self.triton_live():
            raise LookupError(say("Triton at %(url)s is not reachable", url=self.triton_url))
        rows: list[dict[str, str]] = self._once("index", self.repository_index)
        return rows

    def log_lines(self) -> list[str]:
        """Lines of the end of Triton's log since its last start (``[]`` when there is none)."""
        if self.triton_log_path is None:
            return []
        path = self.triton_log_path
        lines: list[str] = self._once("log", lambda: read_log_tail(path))
        return lines


TITLES: dict[str, Message] = {
    "cann_env": say("CANN environment"),
    "atc": say("ATC (Ascend Tensor Compiler)"),
    "atc_python": say("ATC Python interpreter"),
    "npu_ge_backend": say("npu_ge backend library"),
    "davinci_devices": say("NPU device nodes"),
    "npu_smi": say("NPUs (npu-smi)"),
    "triton_reachable": say("Triton reachable"),
    "triton_access": say("Triton repository API restricted to the hub"),
    "stuck_loading": say("Models stuck LOADING"),
    "load_failures": say("Model load failures"),
    "oidc_discovery": say("OpenID Connect provider"),
    "ldap_bind": say("LDAP directory bind"),
}


def make_check(
    cid: str, state: CheckState, found: Said, advice: Said = "", details: Any = ()
) -> Check:
    """The result of check ``cid``, titled from :data:`TITLES`; an ok check gives no advice."""
    return Check(cid, TITLES[cid], state, found, advice if state != "ok" else "", list(details))


def worst_state(states: Sequence[CheckState]) -> CheckState:
    """The most severe of ``states`` (``ok`` when there are none)."""
    return max(states, key=lambda s: _SEVERITY[s], default="ok")

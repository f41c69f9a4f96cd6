"""Run npu-smi and describe the NPUs of this host as one JSON-ready dict (Django-free).

:func:`read_devices` runs ``npu-smi info`` and reads its table
(:mod:`~model_store.devices.info_table`); when the table prints no device id it asks
``npu-smi info -m`` (:mod:`~model_store.devices.mapping`), and it asks ``-t usages`` for each
chip (:mod:`~model_store.devices.usages`). npu-smi missing, failing or timing out makes the
report say why; a failure of the extra calls is a warning. Every call holds the host's npu-smi
lock (:mod:`~model_store.devices.npu_smi_lock`): npu-smi must not run twice at once, so a call
that cannot have the lock within the timeout is reported busy instead. An npu-smi that prints
dcmi's ``-8005`` could not open the NPU, which another container usually holds
(:mod:`~model_store.devices.held_elsewhere`). The command runner is a parameter, so tests pass
a fake instead of starting npu-smi.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from model_store import spawn
from model_store.devices.held_elsewhere import npu_smi_held_reason, npu_smi_says_held
from model_store.devices.info_table import parse_npu_smi_info
from model_store.devices.mapping import parse_npu_smi_mapping
from model_store.devices.memory import device_memory
from model_store.devices.npu_smi_lock import NPU_SMI_BUSY, NpuSmiBusy, npu_smi_lock
from model_store.devices.usages import merge_usages, parse_npu_smi_usages
from model_store.text import Said, say

#: Why a host without npu-smi has no devices (the diagnostics recognise it by its template).
NO_NPU_SMI = say("no Ascend NPU on this host (npu-smi not found)")

__all__ = ["read_devices"]


def _first_line(text: str | bytes | None) -> str:
    """Return the first non-empty line of a command's output, or ``""``."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def probe_timeout(env: Mapping[str, str] | None = None) -> float:
    """Seconds one probe command (npu-smi, ``atc --help``, ldd) may take:
    ``HOST_PROBE_TIMEOUT_SECONDS``, default 15. Upstream's own tools give npu-smi 5 to 10 s
    (hicann/ge ``examples/dflow/tools/create_numa_config.py``: 10; mind-cluster's fault
    diagnosis: 5); a host with many cards, or ATC's first start on aarch64, can take longer,
    and a timeout reads as "npu-smi did not answer"."""
    import os

    raw = (env if env is not None else os.environ).get("HOST_PROBE_TIMEOUT_SECONDS") or ""
    try:
        return max(1.0, float(raw)) if raw.strip() else 15.0
    except ValueError:
        return 15.0


def read_devices(
    runner: Callable[..., Any] = spawn.run,
    which: Callable[[str], str | None] = shutil.which,
    timeout: float | None = None,
    *,
    usages: bool = True,
    mapping: bool = True,
) -> dict[str, Any]:
    """Run ``npu-smi info`` and describe the NPUs of this host as a JSON-ready dict.

    Args:
        runner: Function with the signature of :func:`subprocess.run` (replaced in tests).
        which: Function with the signature of :func:`shutil.which`.
        timeout: Seconds to wait for each npu-smi call (None: :func:`probe_timeout`).
        usages: Also run ``npu-smi info -t usages -i N -c C`` per chip (one after another) and
            merge it (:func:`merge_usages`); a failure there is a warning, not an error.
        mapping: When the table prints no device id for some chip (the HBM layout of 910
            and 910B), run ``npu-smi info -m`` and take it from the ``Chip Logic ID``
            column (:func:`parse_npu_smi_mapping`); a failure there is a warning.

    Every npu-smi call holds the host's npu-smi lock, waiting for it at most ``timeout``
    seconds (:func:`~model_store.devices.npu_smi_lock.npu_smi_lock`).

    Returns:
        ``{"available": False, "reason": ..., "npus": []}`` when npu-smi is missing,
        fails, times out or is busy (:data:`~model_store.devices.npu_smi_lock.NPU_SMI_BUSY`;
        when its output has dcmi's ``-8005`` the reason says that another container holds
        the NPU, :func:`~model_store.devices.held_elsewhere.npu_smi_held_reason`); otherwise
        ``{"available": True, "npus": [...], "processes": [...], "warnings": [...],
        "version": ...}`` with one dict per chip. Each chip dict also has ``device_memory``
        (:func:`device_memory`) and, with ``usages``, ``usages`` (raw) and ``usage`` (known
        figures by short name).
    """
    timeout = probe_timeout() if timeout is None else timeout
    path = which("npu-smi")
    if not path:
        return {
            "available": False,
            "reason": NO_NPU_SMI,
            "npus": [],
        }
    locked = _Locked(runner, timeout)
    try:
        done = locked(
            [path, "info"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except NpuSmiBusy:
        return {"available": False, "reason": NPU_SMI_BUSY, "npus": []}
    except subprocess.TimeoutExpired:
        return {
            "available": False,
            "reason": say(
                "npu-smi info did not answer within %(seconds)s s", seconds=f"{timeout:g}"
            ),
            "npus": [],
        }
    except OSError as exc:
        return {
            "available": False,
            "reason": say("npu-smi could not be started: %(error)s", error=str(exc)),
            "npus": [],
        }
    code = getattr(done, "returncode", 1)
    if code != 0:
        detail = _first_line(getattr(done, "stderr", None)) or _first_line(
            getattr(done, "stdout", None)
        )
        reason = (
            say("npu-smi info failed with exit code %(code)s: %(detail)s", code=code, detail=detail)
            if detail
            else say("npu-smi info failed with exit code %(code)s", code=code)
        )
        if npu_smi_says_held(getattr(done, "stderr", None)) or npu_smi_says_held(
            getattr(done, "stdout", None)
        ):
            reason = npu_smi_held_reason(reason)
        return {"available": False, "reason": reason, "npus": []}
    stdout = getattr(done, "stdout", "") or ""
    if isinstance(stdout, bytes):
        stdout = stdout.decode("utf-8", "replace")
    report = parse_npu_smi_info(stdout)
    npus = [asdict(chip) for chip in report.chips]
    warnings = list(report.warnings)
    more = _MoreCalls(path, locked, timeout, warnings)
    if mapping and any(npu["device_id"] is None for npu in npus):
        more.add_device_ids(npus)
    if usages and npus:
        more.add_usages(npus)
    for npu in npus:
        npu["device_memory"] = device_memory(npu)
    warnings[:0] = locked.notes
    return {
        "available": True,
        "version": report.version,
        "npus": npus,
        "processes": [asdict(proc) for proc in report.processes],
        "warnings": warnings,
    }


def _usages_command(path: str, npu: Mapping[str, Any]) -> list[str]:
    args = [path, "info", "-t", "usages", "-i", str(npu["npu_id"])]
    if npu.get("chip_id") is not None:
        args += ["-c", str(npu["chip_id"])]
    return args


class _Locked:
    """``runner`` with the host's npu-smi lock held around each call (waiting at most
    ``wait`` seconds, then :class:`NpuSmiBusy`); ``notes`` says why a call ran without it."""

    def __init__(self, runner: Callable[..., Any], wait: float) -> None:
        self.runner = runner
        self.wait = wait
        self.notes: list[Said] = []

    def __call__(self, args: list[str], **kwargs: Any) -> Any:
        with npu_smi_lock(self.wait) as note:
            if note is not None and note not in self.notes:
                self.notes.append(note)
            return self.runner(args, **kwargs)


def _run_npu_smi(runner: Callable[..., Any], args: list[str], timeout: float) -> tuple[str, Said]:
    """``(stdout, problem)``: the output, or why there is none (never raises)."""
    try:
        done = runner(args, capture_output=True, text=True, timeout=timeout, check=False)
    except NpuSmiBusy:
        return "", say("was not run: %(busy)s", busy=NPU_SMI_BUSY)
    except subprocess.TimeoutExpired:
        return "", say("did not answer within %(seconds)s s", seconds=f"{timeout:g}")
    except OSError as exc:
        return "", say("could not be started: %(error)s", error=str(exc))
    code = getattr(done, "returncode", 1)
    stdout = getattr(done, "stdout", "") or ""
    if isinstance(stdout, bytes):
        stdout = stdout.decode("utf-8", "replace")
    if code != 0:
        detail = _first_line(getattr(done, "stderr", None)) or _first_line(stdout)
        if detail:
            return "", say("failed with exit code %(code)s: %(detail)s", code=code, detail=detail)
        return "", say("failed with exit code %(code)s", code=code)
    return stdout, ""


@dataclass(frozen=True)
class _MoreCalls:
    """The npu-smi calls that fill in what the table left out; a failed call is a warning."""

    path: str
    runner: Callable[..., Any]
    timeout: float
    warnings: list[Said]

    def ask(self, commands: list[list[str]]) -> list[tuple[str, str, Said]]:
        """``(command as shown, stdout, problem)`` per command, in order. The calls run one
        after another, each under the host's npu-smi lock: Huawei's npu-smi reference says
        npu-smi must not be run several times at once (docs/npu-smi.md#one-npu-smi-at-a-time);
        a ``-t usages`` call answers for one chip."""
        return [
            (" ".join(["npu-smi", *args[1:]]), *_run_npu_smi(self.runner, args, self.timeout))
            for args in commands
        ]

    def add_device_ids(self, npus: list[dict[str, Any]]) -> None:
        """Fill the missing ``device_id`` of each chip from ``npu-smi info -m``."""
        [(shown, stdout, problem)] = self.ask([[self.path, "info", "-m"]])
        if problem:
            self.warnings.append(
                say("%(command)s %(problem)s; the device ids are not known.",
                    command=shown, problem=problem)
            )  # fmt: skip
            return
        logical = parse_npu_smi_mapping(stdout)
        missing = []
        for npu in npus:
            if npu["device_id"] is None:
                npu["device_id"] = logical.get((npu["npu_id"], npu["chip_id"]))
                if npu["device_id"] is None:
                    missing.append(f"NPU {npu['npu_id']} chip {npu['chip_id']}")
        if missing:
            self.warnings.append(
                say("%(command)s gave no Chip Logic ID for %(chips)s; its device id is not known.",
                    command=shown, chips=", ".join(missing))
            )  # fmt: skip

    def add_usages(self, npus: list[dict[str, Any]]) -> None:
        """Run ``-t usages`` for every chip (one npu-smi call each) and merge."""
        answers = self.ask([_usages_command(self.path, npu) for npu in npus])
        for npu, (shown, stdout, problem) in zip(npus, answers, strict=True):
            if problem:
                self.warnings.append(
                    say("%(command)s %(problem)s; usage rates are not shown.",
                        command=shown, problem=problem)
                )  # fmt: skip
                npu["usages"], npu["usage"] = {}, {}
            elif not merge_usages(npu, parse_npu_smi_usages(stdout)):
                self.warnings.append(
                    say("%(command)s printed no usage figures that the hub knows.", command=shown)
                )

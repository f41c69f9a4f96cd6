"""Which Ascend INT8 tools a host has: AMCT for ONNX and msModelSlim (docs/quantise-ascend.md).

A build host's worker asks each tool's interpreter, in its own process with a time limit, and
the answer goes into the host report under ``quantise``; the web process only reads it. A
check killed by a signal reads "broken" (an installed tool whose native library does not
load), not "absent", so the person fixes the install instead of installing again.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from model_store import spawn
from model_store.text import as_json, say

#: Seconds each probe may take (an import of AMCT loads its native library and CANN's).
PROBE_TIMEOUT_S = 60.0
#: The interpreters, by the variables a deployment sets; both fall back to ATC's Python.
AMCT_PYTHON_VAR = "AMCT_PYTHON"
MSMODELSLIM_PYTHON_VAR = "MSMODELSLIM_PYTHON"
ATC_PYTHON_VAR = "ATC_PYTHON"

_AMCT_PROBE = (
    "import importlib.metadata as m, amct_onnx\n"
    "try:\n    print(m.version('amct-onnx'))\nexcept m.PackageNotFoundError:\n    print('')\n"
)
_MSMODELSLIM_PROBE = (
    "import sys, importlib.metadata as m\n"
    "from msmodelslim.onnx.post_training_quant import run_quantize\n"
    "try:\n    print(m.version('msmodelslim'))\nexcept m.PackageNotFoundError:\n    print('')\n"
    "print('%d.%d' % sys.version_info[:2])\n"
)

Runner = Callable[..., subprocess.CompletedProcess[str]]


def detect_quantisers(env: Mapping[str, str], run: Runner = spawn.run) -> dict[str, Any]:
    """``{"amct": tool, "msmodelslim": tool}``, each ``{"state": "present" | "absent" |
    "broken", "version": str, "python": str, "reason": str}``."""
    amct_python = _python(env, AMCT_PYTHON_VAR)
    slim_python = _python(env, MSMODELSLIM_PYTHON_VAR)
    amct = _probe(run, amct_python, _AMCT_PROBE, env, "AMCT")
    if amct["state"] == "present":
        # The import alone is not the tool: its command (installed beside the interpreter by
        # pip, docs/quantise-ascend.md) must start too.
        amct = _check_command(run, amct_python, env) or amct
    slim = _probe(run, slim_python, _MSMODELSLIM_PROBE, env, "msModelSlim")
    if slim["state"] == "present":
        lines = slim.pop("lines", [])
        python_version = lines[1] if len(lines) > 1 else ""
        if python_version and tuple(int(p) for p in python_version.split(".")) >= (3, 12):
            slim = _tool("broken", slim["version"], slim["python"], say(
                "msModelSlim supports Python below 3.12; %(python)s is %(version)s.",
                python=slim["python"], version=python_version,
            ))  # fmt: skip
    amct.pop("lines", None)
    slim.pop("lines", None)
    return {"amct": amct, "msmodelslim": slim}


def _check_command(run: Runner, python: str, env: Mapping[str, str]) -> dict[str, Any] | None:
    """None when ``amct_onnx calibration --help`` exits 0, else the tool as broken."""
    command = str(Path(python).parent / "amct_onnx")
    try:
        done = run(
            [command, "calibration", "--help"], timeout=PROBE_TIMEOUT_S, env=dict(env),
            capture_output=True, text=True,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return _tool("broken", "", python, say(
            "AMCT imports, but its command %(command)s does not start: %(error)s",
            command=command, error=str(exc)[:200],
        ))  # fmt: skip
    if done.returncode != 0:
        return _tool("broken", "", python, say(
            "AMCT imports, but %(command)s calibration --help ended with %(exit)s: %(error)s",
            command=command, exit=spawn.describe_exit(done.returncode),
            error=_last_line(done.stderr),
        ))  # fmt: skip
    return None


def _python(env: Mapping[str, str], variable: str) -> str:
    return (env.get(variable) or env.get(ATC_PYTHON_VAR) or "").strip()


def _tool(state: str, version: str, python: str, reason: Any) -> dict[str, Any]:
    return {"state": state, "version": version, "python": python, "reason": as_json(reason)}


def _probe(
    run: Runner, python: str, script: str, env: Mapping[str, str], what: str
) -> dict[str, Any]:
    if not python:
        return _tool("absent", "", "", say(
            "%(what)s: no interpreter is named (set %(amct)s, %(slim)s or %(atc)s).",
            what=what, amct=AMCT_PYTHON_VAR, slim=MSMODELSLIM_PYTHON_VAR, atc=ATC_PYTHON_VAR,
        ))  # fmt: skip
    try:
        done = run(
            [python, "-c", script], timeout=PROBE_TIMEOUT_S, env=dict(env),
            capture_output=True, text=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return _tool("broken", "", python, say(
            "%(what)s did not answer within %(seconds)s s.", what=what, seconds=int(PROBE_TIMEOUT_S)
        ))  # fmt: skip
    except OSError as exc:
        return _tool("absent", "", python, say(
            "%(python)s cannot be run: %(error)s", python=python, error=str(exc)
        ))  # fmt: skip
    if done.returncode < 0:
        return _tool("broken", "", python, say(
            "%(what)s is installed but its import was killed by %(exit)s.",
            what=what, exit=spawn.describe_exit(done.returncode),
        ))  # fmt: skip
    if done.returncode != 0:
        last = _last_line(done.stderr)
        return _tool("absent", "", python, say(
            "%(what)s is not importable by %(python)s: %(error)s",
            what=what, python=python, error=last,
        ))  # fmt: skip
    lines = [line.strip() for line in (done.stdout or "").splitlines()]
    found = _tool("present", lines[0] if lines else "", python, "")
    found["lines"] = lines
    return found


def _last_line(text: str | None) -> str:
    lines: Sequence[str] = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""

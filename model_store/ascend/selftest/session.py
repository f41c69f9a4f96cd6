"""One self-test session from a command line: run the stages, print them, write the report.

Shared by the hub's ``manage.py ascend_selftest`` and a node's ``python -m
workers.node.selftest`` (docs/selftest.md): each gathers its own settings into a
:class:`~model_store.ascend.selftest.context.SelftestContext` and hands it here, so both print
the same lines and write the same report. Django-free.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from model_store import spawn
from model_store.ascend.selftest.console import result_line, stage_lines
from model_store.ascend.selftest.context import SelftestContext
from model_store.ascend.selftest.report import build_report
from model_store.ascend.selftest.runner import exit_status, run_selftest
from model_store.ascend.selftest.stage import Stage

#: Set in the environment of the command run again under the worker's environment.
REEXEC_MARK = "HUB_SELFTEST_IN_WORKER_ENV"


def entrypoint_environment(entrypoint: Path) -> dict[str, str]:
    """The environment the worker itself runs with. `docker compose exec worker ...` starts
    a command without the image's entrypoint, which sources CANN's set_env.sh under
    ASCEND_ROOT; so where that has not happened, the entrypoint is run here for its
    environment (and this command's own is kept if it refuses, e.g. closed device nodes)."""
    env = dict(os.environ)
    if not env.get("ASCEND_ROOT") or env.get("ASCEND_TOOLKIT_HOME") or env.get(REEXEC_MARK):
        return env
    try:
        done = spawn.run(
            ["bash", str(entrypoint), "env", "-0"], env=env, capture_output=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return env
    if done.returncode != 0:
        return env
    pairs = (item.partition("=") for item in done.stdout.decode().split("\0") if "=" in item)
    return {key: value for key, _, value in pairs}


def rerun_in(env: dict[str, str]) -> None:
    """Starts this command again with ``env`` when it differs from this process's: the loader
    reads LD_LIBRARY_PATH (pyACL's libraries) only at start. Returns only when it is the same."""
    if env == os.environ:
        return
    env[REEXEC_MARK] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)  # noqa: S606 (itself)


class ReportNotWritten(OSError):
    """The JSON report could not be written where ``--json`` said."""


def run_session(
    ctx: SelftestContext,
    *,
    hub_version: str,
    json_target: str | None,
    console: TextIO,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Runs every stage with ``ctx``, printing each as it ends on ``console``; writes the
    report to ``json_target`` (a path, ``-`` for standard output, or None); returns the exit
    status (0 passed, 1 not). Raises InvalidDevice for a bad ``--device`` (exit status 2)."""
    started_at, started = datetime.now(UTC), clock()
    console.write(f"Ascend self-test, hub {hub_version}, on {os.uname().nodename}\n")

    def show(stage: Stage) -> None:
        for line in stage_lines(stage):
            console.write(line + "\n")
        console.flush()

    stages = run_selftest(ctx, on_stage=show)
    report = build_report(
        ctx, stages, hub_version=hub_version, started_at=started_at, seconds=clock() - started
    )
    shown = write_report(report, json_target)
    console.write(result_line(stages, shown) + "\n")
    console.write("Still to look at by hand (a program here cannot; the report lists them):\n")
    for step in report["by_hand"]:
        console.write(f"  - {step}\n")
    console.flush()
    return exit_status(stages)


def write_report(report: dict[str, Any], target: str | None) -> str | None:
    """Writes the report; returns where, as the result line shows it."""
    if target is None:
        return None
    text = json.dumps(report, indent=2, default=str) + "\n"
    if target == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return "standard output"
    path = Path(target)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ReportNotWritten(f"Cannot write the report to {path}: {exc}") from exc
    return str(path)

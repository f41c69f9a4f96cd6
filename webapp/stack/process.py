"""A child process we start, health-check and stop, with its output in a log file.

Each child runs in its own session (process group) so that stopping it stops everything it
started, and asks Linux to kill it if this supervisor dies, so nothing outlives ``make run``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from model_store import spawn


class StartError(Exception):
    """A component did not come up; the message names it and says why."""


class ManagedProcess:
    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_path: Path,
        env: dict[str, str],
        cwd: Path,
        ready: Callable[[], bool],
        stop_signal: int = signal.SIGTERM,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self.ready = ready
        self.stop_signal = stop_signal
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.proc = spawn.start(
            self.argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
            env=self.env,
            new_session=True,
            die_with_parent=signal.SIGTERM,
        )

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def wait_ready(self, timeout: float) -> float:
        """Seconds until ``ready()`` held; StartError if the process died or time ran out."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            code = self.exit_code()
            if code is not None:
                how = spawn.describe_exit(code)
                raise StartError(
                    f"{self.name} ended ({how}) before it was ready.\n{self.log_tail()}"
                )
            with contextlib.suppress(Exception):  # probes fail until the service listens
                if self.ready():
                    return time.monotonic() - started
            time.sleep(0.1)
        raise StartError(f"{self.name} was not ready after {timeout:.0f} s.\n{self.log_tail()}")

    def stop(self, timeout: float = 10.0) -> None:
        """Signal the whole process group, wait, then SIGKILL what is left."""
        if self.proc is None:
            return
        pgid = self.proc.pid  # start_new_session: the group id is the child's pid
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, self.stop_signal)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        # Grandchildren (worker pool processes, stubs) may outlive the leader; end them too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return f"(no log at {self.log_path})"
        tail = text.splitlines()[-lines:]
        return f"--- last lines of {self.log_path} ---\n" + "\n".join(tail)

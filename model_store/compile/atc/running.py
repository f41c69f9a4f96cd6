"""Running ATC: its own process group, output streamed line by line, cancel and timeout.

:func:`run_atc` starts the argument list from :mod:`~model_store.compile.atc.options` through
:mod:`model_store.spawn`, hands every output line to the caller and to the log reader, stops
ATC and the operator-compile workers it forks on cancel or timeout, and checks that a new
``.om`` file was written. :class:`AtcResult` says how the run ended; :class:`AtcFailed`,
raised from it, carries it.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from model_store import spawn
from model_store.compile.atc.environment import MISSING_HINT, AtcUnavailable
from model_store.compile.atc.messages import AtcMessage, parse_atc_line
from model_store.errors import ModelStoreError
from model_store.text import Message, Said, say


@dataclass
class AtcResult:
    """How one ATC run ended.

    ``success`` means: exit status 0, not cancelled, not timed out, and the
    ``.om`` file really exists (``om_path``).
    """

    returncode: int
    success: bool
    om_path: Path | None
    messages: list[AtcMessage]
    duration_s: float
    cancelled: bool
    timed_out: bool

    @property
    def errors(self) -> list[AtcMessage]:
        """The coded error lines, in order."""
        return [m for m in self.messages if m.kind == "error"]

    @property
    def warnings(self) -> list[AtcMessage]:
        """The coded warning lines, in order."""
        return [m for m in self.messages if m.kind == "warning"]

    def summary(self) -> Message:
        """One paragraph for the job page: what happened and, on failure, what to do
        (a :func:`~model_store.text.say` sentence, so the page can translate it)."""
        if self.success:
            seconds = f"{self.duration_s:.1f}"
            if self.warnings:
                return say(
                    "ATC compiled the model in %(seconds)s s with %(count)s warning(s): %(om)s.",
                    count=len(self.warnings),
                    seconds=seconds,
                    om=str(self.om_path),
                )
            return say(
                "ATC compiled the model in %(seconds)s s: %(om)s.",
                seconds=seconds,
                om=str(self.om_path),
            )
        if self.cancelled:
            return say("ATC was cancelled after %(seconds)s s.", seconds=f"{self.duration_s:.1f}")
        if self.timed_out:
            return say(
                "ATC did not finish within %(seconds)s s and was stopped. Large models can take "
                "long; raise the timeout or simplify the model first.",
                seconds=f"{self.duration_s:.0f}",
            )
        errors = self.errors
        if errors:
            first = errors[0]
            return say(
                "ATC failed with %(code)s: %(text)s — %(explanation)s",
                code=first.code,
                text=first.text,
                explanation=first.explanation,
            )
        if self.returncode == 0:
            return say("ATC exited with status 0 but wrote no .om file; see the log.")
        return say(
            "ATC failed with exit status %(status)s and no error code; see the log.",
            status=self.returncode,
        )

    def raise_for_failure(self) -> None:
        """Raises :class:`AtcFailed` (carrying this result) unless the run succeeded."""
        if not self.success:
            raise AtcFailed(self.summary(), self)


class AtcFailed(ModelStoreError):
    """ATC ran and did not produce an ``.om`` file (errors, cancel or timeout)."""

    code = "atc_failed"

    def __init__(self, message: Said, result: AtcResult | None = None) -> None:
        super().__init__(message)
        self.result = result


_POLL_S = 0.1
#: How long ATC gets after SIGTERM before SIGKILL.
_KILL_GRACE_S = 3.0
#: How long to wait for the pipe to close after ATC exited (a leftover child
#: holding it open must not hang the worker).
_DRAIN_GRACE_S = 2.0


def _pump(stream: IO[bytes], lines: queue.Queue[str | None]) -> None:
    """Reader thread: one decoded line at a time into ``lines``; None at end of output."""
    try:
        for raw in iter(stream.readline, b""):
            lines.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
    finally:
        lines.put(None)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    # ATC forks operator-compile workers; they are in its group (start_new_session).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _output_stem(argv: Sequence[str], cwd: Path | None) -> Path | None:
    for arg in reversed(argv):
        if arg.startswith("--output="):
            stem = Path(arg.split("=", 1)[1])
            if not stem.is_absolute() and cwd is not None:
                stem = cwd / stem
            return stem
    return None


def _om_candidates(stem: Path) -> list[Path]:
    # ATC writes <stem>.om, on some versions <stem>_<os>_<arch>.om (docs/atc.md#command-line).
    exact = stem.with_name(stem.name + ".om")
    try:
        others = sorted(stem.parent.glob(glob_escape(stem.name) + "_*.om"))
    except OSError:
        others = []
    return [exact, *others]


def glob_escape(text: str) -> str:
    """``text`` with glob metacharacters escaped (``[`` -> ``[[]``)."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def _file_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _snapshot(stem: Path | None) -> dict[Path, tuple[int, int, int] | None]:
    if stem is None:
        return {}
    return {p: _file_key(p) for p in _om_candidates(stem)}


def _find_om(stem: Path | None, before: dict[Path, tuple[int, int, int] | None]) -> Path | None:
    """The .om this run wrote: exists, non-empty, and not the same file as before the run."""
    if stem is None:
        return None
    for path in _om_candidates(stem):
        key = _file_key(path)
        if key is not None and key[2] > 0 and key != before.get(path):
            return path
    return None


def run_atc(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None,
    on_line: Callable[[str], None],
    cancelled: Callable[[], bool] = lambda: False,
    timeout: float = 3600,
) -> AtcResult:
    """Runs ATC and reports its output line by line as it comes.

    ATC runs in its own process group so that cancelling or timing out stops
    the operator-compile workers it forks too (SIGTERM, then SIGKILL after a
    grace period). stdout and stderr are merged so errors appear in order.
    ``on_line`` and ``cancelled`` are called from the calling thread.

    Args:
        argv: From :func:`build_atc_command`.
        env: From :func:`atc_environment`.
        cwd: Working directory (ATC writes fusion_result.json and kernel_meta there).
        on_line: Gets every output line, without its newline.
        cancelled: Polled about ten times a second; True stops ATC.
        timeout: Seconds before ATC is stopped.

    Returns:
        An :class:`AtcResult`; call ``raise_for_failure()`` to turn failure into AtcFailed.

    Raises:
        AtcUnavailable: If the binary cannot be started at all.
    """
    argv = [str(a) for a in argv]
    stem = _output_stem(argv, cwd)
    before = _snapshot(stem)
    started = time.monotonic()
    try:
        proc = spawn.start(
            argv,
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            new_session=True,
        )
    except OSError as exc:
        raise AtcUnavailable(
            say(
                "ATC could not be started (%(atc)s): %(error)s; %(hint)s.",
                atc=argv[0],
                error=str(exc),
                hint=MISSING_HINT,
            )
        ) from exc
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
    reader.start()

    messages: list[AtcMessage] = []
    last: AtcMessage | None = None
    was_cancelled = timed_out = eof = False
    stop_sent_at: float | None = None
    exited_at: float | None = None
    deadline = started + timeout
    next_check = started
    try:
        while True:
            line: str | None = None
            idle = False
            if eof:
                time.sleep(_POLL_S)  # output closed; wait for the exit itself
                idle = True
            else:
                try:
                    line = lines.get(timeout=_POLL_S)
                except queue.Empty:
                    idle = True
                else:
                    eof = line is None
            if line is not None:
                on_line(line)
                message = parse_atc_line(line)
                if message is not None:
                    messages.append(message)
                    last = message if message.code else None
                elif last is not None and line[:1] in (" ", "\t") and line.strip():
                    last.details.append(line.strip())
                else:
                    last = None
            now = time.monotonic()
            # While output streams in, look at the clock every _POLL_S only.
            if not (idle or eof) and now < next_check:
                continue
            next_check = now + _POLL_S
            if stop_sent_at is None:
                if cancelled():
                    was_cancelled = True
                elif now >= deadline:
                    timed_out = True
                if was_cancelled or timed_out:
                    _signal_group(proc, signal.SIGTERM)
                    stop_sent_at = now
            elif now - stop_sent_at > _KILL_GRACE_S and proc.poll() is None:
                _signal_group(proc, signal.SIGKILL)
            if proc.poll() is not None:
                if eof:
                    break
                exited_at = exited_at or now
                if now - exited_at > _DRAIN_GRACE_S:
                    _signal_group(proc, signal.SIGKILL)  # a leftover child holds the pipe
                    break
    finally:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGKILL)
        returncode = proc.wait()
        reader.join(timeout=_DRAIN_GRACE_S)
        proc.stdout.close()

    duration = time.monotonic() - started
    om_path = None
    if returncode == 0 and not (was_cancelled or timed_out):
        om_path = _find_om(stem, before)
        if om_path is None:
            messages.append(
                AtcMessage(
                    "failure",
                    None,
                    f"ATC exited with status 0 but no new .om file appeared for {stem}",
                    "",
                )
            )
    return AtcResult(
        returncode=returncode,
        success=om_path is not None,
        om_path=om_path,
        messages=messages,
        duration_s=duration,
        cancelled=was_cancelled,
        timed_out=timed_out,
    )

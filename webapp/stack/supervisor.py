"""Keep the stack's parts running: restart a crashed part with backoff, give up on a crash loop.

``make run`` is left running for weeks on a workstation or a lab server; one crashed part (a
segfaulting backend takes Triton down, the OOM killer picks the worker) must not end the rest.
Each :class:`Part` knows how to (re)start itself and wait until it is ready, how to tell that
it still runs, and its exit status. :meth:`Supervisor.tick` is called about twice a second:

* a part that exited unexpectedly is marked down and restarted after a backoff (1 s, then
  doubling up to ``backoff_max_s``), its log tail kept for the message;
* more than ``max_restarts`` crashes within ``window_s`` seconds mean the part cannot stay up:
  :class:`GiveUp` names it, its exit status and its log's last lines, and the caller stops
  every part;
* every change is written to a small JSON status file (``var/run/stack.json``) that the web
  process reads for ``/api/v1/health`` and the banner on every page.

Nothing here knows what the parts are; ``webapp.stack.__main__`` builds them.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_store import spawn


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5
    window_s: float = 120.0
    backoff_start_s: float = 1.0
    backoff_max_s: float = 30.0

    def backoff(self, crashes_in_window: int) -> float:
        return min(self.backoff_max_s, self.backoff_start_s * 2 ** max(0, crashes_in_window - 1))


class GiveUp(Exception):
    """A part crashed too often; the message says which, how, and shows its log's end."""


@dataclass
class Part:
    """One supervised process (or group of them).

    Attributes:
        name: Shown in messages and the status file.
        start: Starts the part and waits until it is ready; raises on failure.
        stop: Stops it and everything it started (safe to call when it is not running).
        exit_status: None while it runs, else its exit status.
        log_tail: The last lines of its log, for messages.
        on_restarted: Called with the seconds it was down, after a restart succeeded.
    """

    name: str
    start: Callable[[], None]
    stop: Callable[[], object]
    exit_status: Callable[[], int | None]
    log_tail: Callable[[], str]
    on_restarted: Callable[[float, str], None] | None = None
    state: str = "up"
    since: float = field(default_factory=time.time)
    restarts: int = 0
    last_exit: str = ""
    crashes: deque[float] = field(default_factory=deque)
    next_try: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "since": self.since,
            "restarts": self.restarts,
            "last_exit": self.last_exit,
        }


class Supervisor:
    def __init__(
        self,
        parts: list[Part],
        policy: RestartPolicy,
        status_path: Path,
        tell: Callable[[str], None],
    ) -> None:
        self.parts = parts
        self.policy = policy
        self.status_path = status_path
        self.tell = tell
        self.write_status()

    def tick(self, now: float | None = None) -> None:
        """Notice crashes and restart what is due; raises :class:`GiveUp`."""
        for part in self.parts:
            now = time.time() if now is None else now
            if part.state == "up":
                status = part.exit_status()
                if status is not None:
                    self._crashed(part, status, now)
            elif part.state == "down" and now >= part.next_try:
                self._restart(part)
                now = None  # a restart takes time: read the clock again

    def _crashed(self, part: Part, status: int, now: float) -> None:
        part.last_exit = spawn.describe_exit(status)
        tail = part.log_tail()
        part.crashes.append(now)
        while part.crashes and part.crashes[0] < now - self.policy.window_s:
            part.crashes.popleft()
        part.stop()  # whatever it left behind (worker pool children, Triton's stubs)
        if len(part.crashes) > self.policy.max_restarts:
            part.state = "given_up"
            self.write_status()
            raise GiveUp(
                f"{part.name} exited ({part.last_exit}) {len(part.crashes)} times within "
                f"{self.policy.window_s:.0f} s; it cannot stay up, so the stack stops.\n{tail}"
            )
        delay = self.policy.backoff(len(part.crashes))
        if part.state == "up":
            part.since = now
        part.state = "down"
        part.next_try = now + delay
        self.write_status()
        self.tell(
            f"{part.name} exited unexpectedly ({part.last_exit}); restarting it in {delay:.0f} s "
            f"(crash {len(part.crashes)} of at most {self.policy.max_restarts} in "
            f"{self.policy.window_s:.0f} s)."
        )

    def _restart(self, part: Part) -> None:
        self.tell(f"{part.name}: restarting…")
        try:
            part.start()
        except Exception as exc:
            status = part.exit_status()
            self.tell(f"{part.name} did not come back: {str(exc).splitlines()[0]}")
            self._crashed(part, status if status is not None else 1, time.time())
            return
        down_s = time.time() - part.since
        part.state, part.since = "up", time.time()
        part.restarts += 1
        self.write_status()
        self.tell(f"{part.name}: back after {down_s:.1f} s.")
        if part.on_restarted is not None:
            try:
                part.on_restarted(down_s, part.last_exit)
            except Exception as exc:  # the part is up; a failed follow-up is only reported
                self.tell(f"{part.name}: after its restart, {exc}")

    def write_status(self) -> None:
        """The parts' states as JSON, replaced atomically (the web process reads it)."""
        self.status_path.parent.mkdir(parents=True, exist_ok=True)
        data = {"updated": time.time(), "pid": os.getpid()}
        data["parts"] = {p.name: p.as_dict() for p in self.parts}  # type: ignore[assignment]
        fd, tmp = tempfile.mkstemp(dir=self.status_path.parent, prefix=".stack-")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh)
        Path(tmp).replace(self.status_path)


def rotate_log(path: Path, max_bytes: int, backups: int) -> bool:
    """Copy ``path`` to ``path.1`` (shifting older copies) and truncate it, once it is large.

    The parts write their logs through inherited descriptors opened for appending, so the
    file cannot be renamed under them; copy-then-truncate keeps them writing to the same
    file, which O_APPEND makes continue at its new, empty end. A few lines written between
    the copy and the truncation may be lost; that is the usual price of this method.
    """
    try:
        if path.stat().st_size < max_bytes:
            return False
    except FileNotFoundError:
        return False
    for n in range(backups - 1, 0, -1):
        older = path.with_name(f"{path.name}.{n}")
        if older.exists():
            older.replace(path.with_name(f"{path.name}.{n + 1}"))
    with path.open("rb") as src, path.with_name(f"{path.name}.1").open("wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    os.truncate(path, 0)
    return True

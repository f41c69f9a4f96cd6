"""What the launcher (``make run``) says about its parts, for health checks and page banners.

The launcher writes ``$HUB_VAR_DIR/run/stack.json`` whenever a part goes down, comes back or
is given up on (``webapp/stack/supervisor.py``). A deployment without the launcher (compose,
several hosts) has no such file, and nothing here says anything.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from django.conf import settings

from model_store.text import Message, say

CACHE_SECONDS = 1.0
_lock = threading.Lock()
_cached: tuple[float, list[dict[str, Any]]] | None = None


def _status_path() -> Path:
    return Path(settings.VAR_DIR) / "run" / "stack.json"


def _launcher_alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def launched() -> bool:
    """True when this web process runs under the launcher (its status file exists)."""
    return _status_path().is_file()


def parts_down(now: float | None = None) -> list[dict[str, Any]]:
    """Parts not up right now: name, state, seconds down, last exit, restarts so far."""
    global _cached
    with _lock:
        if _cached is not None and time.monotonic() - _cached[0] < CACHE_SECONDS:
            return _cached[1]
    try:
        data = json.loads(_status_path().read_text())
    except (OSError, ValueError):
        data = {}
    down: list[dict[str, Any]] = []
    if isinstance(data, dict) and _launcher_alive(data.get("pid")):
        now = now or time.time()
        for name, part in (data.get("parts") or {}).items():
            if isinstance(part, dict) and part.get("state") != "up":
                down.append(
                    {
                        "name": name,
                        "state": part.get("state"),
                        "down_s": round(now - float(part.get("since") or now), 1),
                        "last_exit": part.get("last_exit") or "",
                        "restarts": part.get("restarts", 0),
                    }
                )
    with _lock:
        _cached = (time.monotonic(), down)
    return down


def describe(part: dict[str, Any]) -> Message:
    """One sentence for a part that is down: the page's banner and the health check say it."""
    name, seconds, exit_ = part["name"], f"{part['down_s']:.0f}", part["last_exit"]
    if part["state"] == "given_up":
        if exit_:
            return say(
                "%(part)s has been down for %(seconds)s s after it exited (%(exit)s); "
                "the launcher gave up on it.",
                part=name,
                seconds=seconds,
                exit=exit_,
            )
        return say(
            "%(part)s has been down for %(seconds)s s; the launcher gave up on it.",
            part=name,
            seconds=seconds,
        )
    if exit_:
        return say(
            "%(part)s has been down for %(seconds)s s after it exited (%(exit)s); "
            "the launcher is restarting it.",
            part=name,
            seconds=seconds,
            exit=exit_,
        )
    return say(
        "%(part)s has been down for %(seconds)s s; the launcher is restarting it.",
        part=name,
        seconds=seconds,
    )


def forget_cached() -> None:
    global _cached
    with _lock:
        _cached = None

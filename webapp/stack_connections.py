"""How commands run by hand reach the services a running ``make run`` started.

The embedded stack picks Redis's port, and Triton's API key, when it starts, and passes them to
the processes it starts through their environment. ``python manage.py ...`` typed in another
shell (``ascend_selftest``, ``reconcile``, ``adopt``) would not know them and would look for
Triton on the default port without a key. So the stack writes them to
``$HUB_VAR_DIR/run/connections.json`` (mode 0600, in the 0700 var folder: only the user who
runs the stack can read it, the same user who could read the processes' environment anyway),
and settings take them as defaults while that stack is alive. Anything set in the environment
wins; a file left by a stack that died is ignored.

Plain Python, no Django: settings read it while Django is still loading.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from webapp.private_files import FILE_MODE

#: The settings a running stack shares with commands run by hand.
SHARED = (
    "HUB_URL",
    "REDIS_URL",
    "LIMITS_REDIS_URL",
    "TRITON_URL",
    "TRITON_GRPC_URL",
    "TRITON_METRICS_URL",
    "TRITON_API_KEY",
    "HUB_TRITON_EMBEDDED",
)


def connections_path(var_dir: Path) -> Path:
    return Path(var_dir) / "run" / "connections.json"


def write_connections(var_dir: Path, env: Mapping[str, str], pid: int) -> None:
    """Records the shared settings of the stack running as ``pid``; replaces the file whole."""
    path = connections_path(var_dir)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = {"pid": pid, "settings": {k: env[k] for k in SHARED if env.get(k)}}
    partial = path.with_name(f".{path.name}.{pid}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out)
    partial.replace(path)


def remove_connections(var_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        connections_path(var_dir).unlink()


def _is_running_stack(pid: object) -> bool:
    """Whether ``pid`` is alive and is ``python -m webapp.stack`` (not a reused pid)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"webapp.stack" in cmdline


def running_stack_settings(var_dir: Path) -> dict[str, str]:
    """The shared settings of the stack running on ``var_dir``; empty when none is running."""
    try:
        data = json.loads(connections_path(var_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or not _is_running_stack(data.get("pid")):
        return {}
    settings = data.get("settings")
    if not isinstance(settings, dict):
        return {}
    return {k: v for k, v in settings.items() if k in SHARED and isinstance(v, str)}


def adopt_running_stack(var_dir: Path, environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """Puts a running stack's settings into ``environ`` where it sets none; the names added."""
    added = []
    for key, value in running_stack_settings(var_dir).items():
        if not environ.get(key, "").strip():
            environ[key] = value
            added.append(key)
    return added

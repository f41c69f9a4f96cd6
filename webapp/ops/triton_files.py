"""Where Triton's files are as this process sees them: its backend directory and its log.

Both are read by checks that must run next to Triton: the worker on Triton's host reads the
backend directory for the npu_ge check of its host report, the web process reads the log of the
Triton that `make run` started.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

from webapp.ops.triton import is_embedded

#: Where the GE backend's Dockerfile installs Triton (TRITON_HOME_PATH;
#: docs/ge-backend.md#runtime-environment).
DEFAULT_TRITON_HOME = Path("/opt/tritonserver")


def triton_backends_dir() -> Path | None:
    """Triton's ``--backend-directory`` as seen from here, or None when it cannot be known.

    The embedded Triton gets ``MODEL_STORE_ROOT/backends`` (webapp/stack); a Triton built as
    the GE backend's guide does keeps its backends in ``$TRITON_HOME_PATH/backends``.
    """
    explicit = getattr(settings, "TRITON_BACKENDS_DIR", None)
    if explicit:
        return Path(explicit)
    if is_embedded():
        return Path(settings.MODEL_STORE_ROOT) / "backends"
    home = os.environ.get("TRITON_HOME_PATH", "").strip()
    if home:
        return Path(home) / "backends"
    default = DEFAULT_TRITON_HOME / "backends"
    return default if default.is_dir() else None


def triton_log_path() -> Path | None:
    """The log file of the Triton that `make run` started (``VAR_DIR/log/triton.log``)."""
    explicit = getattr(settings, "TRITON_LOG_PATH", None)
    if explicit:
        return Path(explicit)
    if is_embedded():
        return Path(settings.VAR_DIR) / "log" / "triton.log"
    return None

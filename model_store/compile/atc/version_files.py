"""The CANN version files: which release a toolkit, ops package or driver install says it is.

The install-info files' ``version=`` first, then the toolkit's ``version.cfg`` release and a
component ``version.info``'s ``version_dir=``; never a component's inner ``Version=``
(docs/cann.md#toolkit-version-files). Used by discovery (:mod:`.environment`) and by the
serving side's facts, which read the same files inside Triton.
"""

from __future__ import annotations

import contextlib
import platform
import re
from pathlib import Path


def _version_file(home: Path, info: str = "ascend_toolkit_install.info") -> Path | None:
    """The toolkit's (or ops package's) install-info file, if any: the place public CANN
    install guides read (docs/cann.md#toolkit-version-files),
    ``<home>/<arch>-linux/ascend_toolkit_install.info`` (``version=...``), and
    ``ascend_ops_install.info`` beside it for the 8.5 ops package."""
    candidates = [home / f"{platform.machine()}-linux" / info]
    with contextlib.suppress(OSError):
        candidates += sorted(home.glob(f"*-linux/{info}"))
    return next((c for c in candidates if c.is_file()), None)


def _toolkit_version(home: Path | None, info: str = "ascend_toolkit_install.info") -> str | None:
    """The release of the toolkit (or ops package) at ``home``, or None when no file says it.

    The install-info file's ``version=`` first; for the toolkit, then ``<home>/version.cfg``'s
    ``toolkit_running_version=[<inner>:<release>]`` and a component ``version.info``'s
    ``version_dir=``. Never a component's ``Version=``: that is an inner number (7.6.0.1.220
    for the 8.0.0 release) that would make the version checks reason about "7.6"
    (docs/cann.md#toolkit-version-files).
    """
    if home is None:
        return None
    path = _version_file(home, info)
    found = None if path is None else version_in_info_file(path)
    if found or info != "ascend_toolkit_install.info":
        return found
    return release_in_version_cfg(_read_text(home / "version.cfg")) or version_dir_in_info(
        _read_text(home / "compiler" / "version.info")
    )


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def version_in_info_file(path: Path) -> str | None:
    """The ``version=`` (any case) value of a CANN or driver info file, or None.

    Toolkit, ops package and driver all record their version this way
    (docs/cann.md#toolkit-version-files).
    """
    return version_in_info_text(_read_text(path))


def version_in_info_text(text: str | None) -> str | None:
    """The ``version=`` (any case) value of an info file's text, or None."""
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "version" and value.strip():
            return value.strip()
    return None


_RUNNING_VERSION = re.compile(r"^toolkit_running_version=\[(?:[^:\]]*:)?([^\]:]+)\]", re.M)


def release_in_version_cfg(text: str | None) -> str | None:
    """The release in a toolkit ``version.cfg``: ``toolkit_running_version=[7.6.0.1.220:8.0.0]``
    gives ``8.0.0`` (the part after ``:``; a file with one value gives that value)."""
    found = _RUNNING_VERSION.search(text or "")
    return found.group(1).strip() if found else None


def version_dir_in_info(text: str | None) -> str | None:
    """A component ``version.info``'s ``version_dir=`` (the release, e.g. ``8.0.0``)."""
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "version_dir" and value.strip():
            return value.strip()
    return None

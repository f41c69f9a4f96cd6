"""The hub's code version, and which node versions it can work with.

The version is the one in the checkout's ``pyproject.toml`` (the hub runs from its checkout).
A node worker sends the version of the code it runs with every report; the hub works with a
node of the same major.minor (``0.1.x`` with ``0.1.y``): patch releases do not change what a
node and the hub say to each other, a minor release may (docs/nodes.md#built).
"""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path

_MAJOR_MINOR = re.compile(r"(\d+)\.(\d+)(?:\.|$)")


@functools.cache
def hub_version() -> str:
    """``project.version`` of pyproject.toml, or ``"unknown"`` when it cannot be read."""
    try:
        with (Path(__file__).resolve().parent.parent / "pyproject.toml").open("rb") as fh:
            return str(tomllib.load(fh)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


def major_minor(version: str) -> tuple[int, int] | None:
    """``(0, 1)`` for ``"0.1.3"`` or ``"0.1"``; None for text that is not such a version."""
    found = _MAJOR_MINOR.match(version.strip())
    return (int(found[1]), int(found[2])) if found else None


def incompatibility(node_version: str, hub: str | None = None) -> str | None:
    """Why the hub cannot work with a node running ``node_version``, or None if it can."""
    hub = hub or hub_version()
    theirs, ours = major_minor(node_version), major_minor(hub)
    if theirs is None:
        return f"the node runs hub code version {node_version[:40]!r}, which is not a version"
    if ours is not None and theirs != ours:
        return (
            f"the node runs hub code {node_version[:40]}, this hub runs {hub}: the major.minor "
            "versions must match; update the node"
        )
    return None

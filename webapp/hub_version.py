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

from django.utils.translation import gettext_noop

from model_store.text import Message

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


#: Why the hub refuses a node's report, as templates (gettext_noop marks them for the
#: catalogue; :class:`~model_store.text.Message` fills them in; ``Node.refused_reason`` keeps
#: the message, said in each reader's language).
NOT_A_VERSION = gettext_noop("the node runs hub code version %(version)s, which is not a version")
OTHER_VERSION = gettext_noop(
    "the node runs hub code %(node)s, this hub runs %(hub)s: the major.minor versions must "
    "match; update the node"
)
OTHER_PROTOCOL = gettext_noop(
    "the node speaks report protocol %(theirs)s, this hub speaks %(ours)s; run the same hub "
    "code version on the node"
)


def incompatibility(node_version: str, hub: str | None = None) -> Message | None:
    """Why the hub cannot work with a node running ``node_version``, or None if it can."""
    hub = hub or hub_version()
    theirs, ours = major_minor(node_version), major_minor(hub)
    if theirs is None:
        return Message(NOT_A_VERSION, {"version": repr(node_version[:40])})
    if ours is not None and theirs != ours:
        return Message(OTHER_VERSION, {"node": node_version[:40], "hub": hub})
    return None

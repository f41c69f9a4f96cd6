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

from model_store.text import Text

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
#: catalogue; :class:`~model_store.text.Text` fills them in). ``Node.refused_reason`` keeps the
#: English; :func:`refusal_text` finds its template again when a page shows it.
NOT_A_VERSION = gettext_noop("the node runs hub code version %(version)s, which is not a version")
OTHER_VERSION = gettext_noop(
    "the node runs hub code %(node)s, this hub runs %(hub)s: the major.minor versions must "
    "match; update the node"
)
OTHER_PROTOCOL = gettext_noop(
    "the node speaks report protocol %(theirs)s, this hub speaks %(ours)s; run the same hub "
    "code version on the node"
)
REFUSALS = (NOT_A_VERSION, OTHER_VERSION, OTHER_PROTOCOL)


def incompatibility(node_version: str, hub: str | None = None) -> Text | None:
    """Why the hub cannot work with a node running ``node_version``, or None if it can."""
    hub = hub or hub_version()
    theirs, ours = major_minor(node_version), major_minor(hub)
    if theirs is None:
        return Text(NOT_A_VERSION, {"version": repr(node_version[:40])})
    if ours is not None and theirs != ours:
        return Text(OTHER_VERSION, {"node": node_version[:40], "hub": hub})
    return None


def refusal_text(stored: str) -> Text | str:
    """A stored refusal reason (English) as the :class:`Text` it was made from, so that a page
    says it in its language; text that fits none of :data:`REFUSALS` is returned as stored."""
    for template in REFUSALS:
        names = re.findall(r"%\((\w+)\)s", template)
        pattern = re.escape(template)
        for name in names:
            pattern = pattern.replace(re.escape(f"%({name})s"), f"(?P<{name}>.+?)", 1)
        found = re.fullmatch(pattern, stored, re.DOTALL)
        if found is not None:
            said = Text(template, found.groupdict())
            if str(said) == stored:
                return said
    return stored

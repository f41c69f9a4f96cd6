"""Where a model is served: its placement, and the nodes it names now.

See docs/nodes.md#placement-and-rollouts.

A placement is either a list of node names, ``{"nodes": ["local", "b"]}``, or a label
selector, ``{"labels": {"soc": "Ascend310P3"}}``, which matches every node whose labels (its
operator's, plus ``soc`` and ``cann`` from its report) include each pair; ``{"labels": {}}``
matches every node. A model without one is served on ``local`` alone, as before nodes existed.

Resolving a placement gives the nodes a rollout goes through, in order: ``local`` first (the
stack's own Triton, which the hub's gateway uses), then the others by name. A draining node
takes nothing new, so it is left out; a node that is down stays in (the rollout stops there
with the reason, and reconcile brings it in line when it is back).
"""

from __future__ import annotations

import re
from typing import Any

from django.utils.translation import gettext

from model_store.text import Message, say
from webapp.errors import HubError

LOCAL = "local"
DEFAULT: dict[str, Any] = {"nodes": [LOCAL]}
MAX_NODES = 256
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
_LABEL_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")


def of(model: Any) -> dict[str, Any]:
    """The model's placement (the default when it has none), labels in key order.

    PostgreSQL's jsonb keeps object keys in its own order (shorter keys first), so the order a
    placement was saved in is not the order it is read back in; sorting here keeps pages and
    answers the same on every database.
    """
    placement = getattr(model, "placement", None)
    if not isinstance(placement, dict) or not placement:
        return dict(DEFAULT)
    if isinstance(placement.get("labels"), dict):
        return {"labels": dict(sorted(placement["labels"].items()))}
    return placement


def checked(body: object) -> dict[str, Any]:
    """A placement as the API takes it, normalised (names sorted and unique).

    Raises:
        HubError: 400 ``invalid_placement`` naming what is wrong.
    """
    if not isinstance(body, dict) or len(body) != 1 or not ({"nodes", "labels"} & set(body)):
        raise _invalid(
            gettext('Send {"nodes": ["name", ...]} or {"labels": {"key": "value", ...}}.')
        )
    if "nodes" in body:
        names = body["nodes"]
        if not isinstance(names, list) or not names or len(names) > MAX_NODES:
            raise _invalid(
                gettext('"nodes" is a list of 1 to %(max)s node names.') % {"max": MAX_NODES}
            )
        for name in names:
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise _invalid(
                    gettext("%(name)s is not a node name.") % {"name": repr(str(name)[:80])}
                )
        return {"nodes": sorted(set(names), key=_order)}
    labels = body["labels"]
    if not isinstance(labels, dict) or len(labels) > 32:
        raise _invalid(gettext('"labels" is an object of at most 32 key/value pairs.'))
    for key, value in labels.items():
        if not _LABEL_KEY.fullmatch(str(key)) or not isinstance(value, str) or len(value) > 128:
            raise _invalid(
                gettext("Label %(key)s: the key is a name, the value a string.")
                % {"key": repr(str(key)[:64])}
            )
    return {"labels": dict(sorted(labels.items()))}


def resolve(placement: dict[str, Any], nodes: list[dict[str, Any]]) -> list[str]:
    """The names of ``nodes`` (``webapp.nodes.summaries.summaries()``) the placement selects, in
    rollout order, draining ones left out."""
    by_name = {n["name"]: n for n in nodes}
    if "nodes" in placement:
        chosen = [name for name in placement["nodes"] if name in by_name or name == LOCAL]
    else:
        wanted = placement.get("labels") or {}
        chosen = [
            n["name"]
            for n in nodes
            if all(str((n.get("labels") or {}).get(k)) == v for k, v in wanted.items())
        ]
    return sorted(
        (name for name in chosen if by_name.get(name, {}).get("state") != "draining"), key=_order
    )


def describe(placement: dict[str, Any]) -> Message:
    """``nodes local, b`` or ``nodes labelled soc=Ascend310P3`` (``every node`` for ``{}``):
    a :class:`~model_store.text.Message`, stored in events and said in the reader's language."""
    if "nodes" in placement:
        return say("nodes %(nodes)s", nodes=", ".join(placement["nodes"]))
    labels = placement.get("labels") or {}
    if not labels:
        return say("every node")
    return say("nodes labelled %(labels)s", labels=", ".join(f"{k}={v}" for k, v in labels.items()))


def _order(name: str) -> tuple[int, str]:
    return (0 if name == LOCAL else 1, name)


def _invalid(message: str) -> HubError:
    return HubError(message, "invalid_placement", 400)

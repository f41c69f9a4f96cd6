"""While a canary runs: which version answers an unpinned call, and how the call is counted.

Every path that answers inference (the ``/v2`` fast path, Django's ``/v2`` and the infer API)
asks :func:`choose` for the version of a call that names none and counts the call it made
with :func:`count_commands`, in Redis, under the step's window: the candidate's and the serving
version's numbers on the same window are what the canary decides on
(``model_store.canary.decide``). A call that names a version goes there and is counted for it.

Django-free, like the rest of the fast path: the split is the model row's ``canary`` record,
read with the model.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from model_store.canary import bucket_of

#: A window's counts outlive any step (steps last at most a day), then go by themselves.
WINDOW_TTL_SECONDS = 3 * 24 * 3600


@dataclass(frozen=True)
class Split:
    candidate: int
    weight: int  # percent of unpinned calls
    window: str


def split_of(record: Mapping[str, Any] | None) -> Split | None:
    """The split a model row's ``canary`` record describes, or None (no traffic is split)."""
    if not record:
        return None
    try:
        split = Split(int(record["candidate"]), int(record["weight"]), str(record["window"]))
    except (KeyError, TypeError, ValueError):
        return None
    return split if 0 < split.weight <= 100 else None


def choose(
    serving: int | None, split: Split | None, draw: Callable[[], float] = random.random
) -> int | None:
    """The version an unpinned call goes to: the candidate with the step's probability."""
    if serving is None or split is None or split.candidate == serving:
        return serving
    return split.candidate if draw() * 100 < split.weight else serving


def window_key(window: str, version: int | str) -> str:
    """The Redis hash that counts one version's calls in one step's window."""
    return f"hub:canary:{window}:{version}"


def count_commands(
    split: Split | None, version: int | str, ms: float, ok: bool
) -> list[tuple[str, str, str]]:
    """``(key, field, "1")`` increments that count one call; empty when nothing is split.

    Field ``n`` counts calls, ``e`` the failed ones, ``b<i>`` the answered ones in latency
    bucket ``i`` (``model_store.canary.bucket_of``).
    """
    if split is None:
        return []
    key = window_key(split.window, version)
    field = f"b{bucket_of(ms)}" if ok else "e"
    return [(key, "n", "1"), (key, field, "1")]


def side_counts(raw: Mapping[Any, Any]) -> tuple[int, int, dict[int, int]]:
    """``(requests, errors, latency buckets)`` from a window hash as Redis returns it."""
    requests = errors = 0
    buckets: dict[int, int] = {}
    for name, value in raw.items():
        field = name.decode() if isinstance(name, bytes) else str(name)
        count = int(value)
        if field == "n":
            requests = count
        elif field == "e":
            errors = count
        elif field.startswith("b") and field[1:].isdigit():
            buckets[int(field[1:])] = count
    return requests, errors, buckets

"""Reading Triton's repository index: which versions of a model are READY, and why not.

The protocol the serving code needs from the Triton client, the index states it compares
against, and :func:`plain_reason`, which turns Triton's failure reasons into one readable
line. Every other serving module reads Triton's state through these helpers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

READY = "READY"
LOADING = "LOADING"
UNAVAILABLE = "UNAVAILABLE"

#: Names of temporary models loaded beside the serving ones (:mod:`model_store.serving.trial`).
#: Hub model names start with a letter or digit (:mod:`model_store.names`), so no hub model
#: ever has this prefix.
TRIAL_PREFIX = "_trial-"


def is_trial_name(name: str) -> bool:
    """Whether ``name`` is a temporary trial model, which repository and index readers skip."""
    return name.startswith(TRIAL_PREFIX)


class ServingRuntime(Protocol):
    """What the serving modules need from :class:`model_store.runtime.client.TritonRuntime`."""

    def load(self, name: str, config: dict[str, Any] | None = None) -> None: ...

    def unload(self, name: str, unload_dependents: bool = False) -> None: ...

    def repository_index(self) -> list[dict[str, str]]: ...


def model_rows(runtime: ServingRuntime, name: str) -> list[dict[str, str]]:
    """The index rows of ``name`` (one per version Triton knows of)."""
    return [row for row in runtime.repository_index() if row.get("name") == name]


def ready_versions(rows: Iterable[Mapping[str, str]]) -> list[int]:
    """The versions READY in ``rows``, sorted."""
    return sorted(
        int(row["version"])
        for row in rows
        if row.get("state") == READY and str(row.get("version", "")).isdigit()
    )


def row_for(rows: Iterable[Mapping[str, str]], version: int) -> Mapping[str, str] | None:
    """The row of ``version`` in ``rows``, or None."""
    return next((row for row in rows if row.get("version") == str(version)), None)


_STATUS_PREFIX = re.compile(
    r"^(?:Internal|Invalid argument|Not found|Unavailable|Unsupported|Already exists|Unknown|"
    r"Cancelled|Failed precondition): "
)
_EXCEPTION_PREFIX = re.compile(r"^[A-Z][A-Za-z0-9_]*(?:Error|Exception): ")


def plain_reason(reason: str) -> str:
    """Triton's reason without the noise: status words, Python tracebacks, blank lines.

    The message itself is kept verbatim: it is usually the most precise explanation an
    operator gets (e.g. ``onnxruntime could not load .../model.onnx: ... Protobuf parsing
    failed``).
    """
    text = reason.split("\n\nAt:\n", 1)[0]  # the Python backend appends the stub's traceback
    text = " ".join(text.split())
    for prefix in (_STATUS_PREFIX, _EXCEPTION_PREFIX):
        text = prefix.sub("", text, count=1)
    return text.rstrip(" ;")


def versions_text(versions: Sequence[int]) -> str:
    """``version 1, 2`` or ``no version``, for log lines and problems."""
    if not versions:
        return "no version"
    return "version " + ", ".join(str(v) for v in versions)

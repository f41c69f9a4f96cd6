"""Findings: one problem a target sees in a model, with a stable code and advice.

``message`` and ``advice`` are :class:`~model_store.text.Message` sentences, so the web layer can
show them in the reader's language; :meth:`Finding.to_dict` stores them as messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from model_store.text import Said, as_json

FindingLevel = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One problem found in a model for a target.

    Attributes:
        level: ``error`` (the build would fail or the model would not serve)
            or ``warning`` (it works, but not as the user may expect).
        code: Stable machine identifier, e.g. ``"unnamed_dynamic_output_dim"``.
        message: What is wrong, in plain words (a ``say()`` sentence).
        advice: What to do about it (a ``say()`` sentence).
    """

    level: FindingLevel
    code: str
    message: Said
    advice: Said

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON-able data, its sentences as stored messages."""
        return {
            "level": self.level,
            "code": self.code,
            "message": as_json(self.message),
            "advice": as_json(self.advice),
        }


def error(code: str, message: Said, advice: Said) -> Finding:
    """Shorthand for an error finding."""
    return Finding("error", code, message, advice)


def warning(code: str, message: Said, advice: Said) -> Finding:
    """Shorthand for a warning finding."""
    return Finding("warning", code, message, advice)

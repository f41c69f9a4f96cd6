"""Findings: one problem a target sees in a model, with a stable code and advice."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

FindingLevel = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One problem found in a model for a target.

    Attributes:
        level: ``error`` (the build would fail or the model would not serve)
            or ``warning`` (it works, but not as the user may expect).
        code: Stable machine identifier, e.g. ``"unnamed_dynamic_output_dim"``.
        message: What is wrong, in plain words.
        advice: What to do about it.
    """

    level: FindingLevel
    code: str
    message: str
    advice: str

    def to_dict(self) -> dict[str, str]:
        """The finding as JSON-able data."""
        return asdict(self)


def error(code: str, message: str, advice: str) -> Finding:
    """Shorthand for an error finding."""
    return Finding("error", code, message, advice)


def warning(code: str, message: str, advice: str) -> Finding:
    """Shorthand for a warning finding."""
    return Finding("warning", code, message, advice)

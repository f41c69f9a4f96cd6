"""Findings: one problem a target sees in a model, with a stable code and advice.

``message`` and ``advice`` are :class:`~model_store.text.Text` sentences (English ``str`` that
remember their gettext template), so the web layer can show them in the reader's language;
:meth:`Finding.to_dict` keeps the plain English and adds their templates under ``texts``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from model_store.text import with_texts

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
    message: str
    advice: str

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON-able data: the English as plain strings, and under ``texts``
        the templates of the sentences that have them (:func:`model_store.text.with_texts`)."""
        plain = {key: str(value) for key, value in asdict(self).items()}
        return with_texts({**plain, "message": self.message, "advice": self.advice}) | plain


def error(code: str, message: str, advice: str) -> Finding:
    """Shorthand for an error finding."""
    return Finding("error", code, message, advice)


def warning(code: str, message: str, advice: str) -> Finding:
    """Shorthand for a warning finding."""
    return Finding("warning", code, message, advice)

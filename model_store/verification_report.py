"""What a verification reports: :class:`VerificationReport` and one :class:`OutputComparison`
per output, with their JSON-safe forms.

Apart from the comparison (:mod:`model_store.verification_compare`) and from running the models
(:mod:`model_store.verify`) because these are plain data: whoever only builds, stores or shows
a report needs neither the numpy maths nor ONNX Runtime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from model_store.text import Said, as_json

__all__ = ["OutputComparison", "VerificationReport"]


@dataclass
class OutputComparison:
    """How one output of the artifact compares with the source's.

    Metrics are None when they do not apply (top-k for non-classifier outputs)
    or could not be computed (non-finite values; ``problem`` then says so).
    """

    name: str
    max_abs: float | None = None
    max_rel: float | None = None
    cosine: float | None = None
    top1_agreement: float | None = None
    topk_overlap: float | None = None
    passed: bool = False
    problem: Said | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (finite floats or null)."""
        return {
            "name": self.name,
            "max_abs": _finite(self.max_abs),
            "max_rel": _finite(self.max_rel),
            "cosine": _finite(self.cosine),
            "top1_agreement": _finite(self.top1_agreement),
            "topk_overlap": _finite(self.topk_overlap),
            "passed": self.passed,
            "problem": as_json(self.problem),
        }


@dataclass
class VerificationReport:
    """The outcome of :func:`verify`.

    Attributes:
        status: ``passed``, ``failed`` or ``not_run`` (the artifact could not
            be executed here; ``reason`` says why).
        precision: The tolerance set applied.
        tolerances: ``TOLERANCES[precision]``.
        samples_used: Number of input samples both models ran.
        outputs: One comparison per output of the source.
        reason: One sentence: why it passed, failed or did not run.
        duration_s: Wall time of the whole verification.
        via: Where the artifact ran (:data:`VIA_CPU`, :data:`VIA_NPU`, :data:`VIA_TRITON`),
            "" when it did not run.
    """

    status: Literal["passed", "failed", "not_run"]
    precision: str
    tolerances: dict[str, float | None]
    samples_used: int = 0
    outputs: list[OutputComparison] = field(default_factory=list)
    reason: Said = ""
    duration_s: float = 0.0
    via: str = ""

    @property
    def passed(self) -> bool:
        """True only for a measured pass."""
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: finite floats or null, plain types only."""
        return {
            "status": self.status,
            "precision": self.precision,
            "tolerances": {k: _finite(v) for k, v in self.tolerances.items()},
            "samples_used": self.samples_used,
            "outputs": [o.to_dict() for o in self.outputs],
            "reason": as_json(self.reason),
            "duration_s": round(self.duration_s, 3),
            "via": self.via,
        }


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)

"""What one stage of the self-test reports, and how a stage is declared.

A stage is a function of the :class:`~model_store.ascend.selftest.context.SelftestContext`
returning an :class:`Outcome` (a verdict, one sentence, the next step when it failed, and its
evidence); the runner adds the stage's id, title and time and makes a :class:`Stage` of it.
A stage is *skipped* for one of two reasons, which the exit status tells apart: it does not
apply to this host (``blocked_by`` is None: fine), or a stage it needs did not pass
(``blocked_by`` names that stage: the self-test has not proven it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from model_store.text import Said

if TYPE_CHECKING:
    from model_store.ascend.selftest.context import SelftestContext

Verdict = Literal["passed", "failed", "skipped"]
#: Every verdict, as the console and the JSON report spell them.
VERDICTS: tuple[Verdict, ...] = ("passed", "failed", "skipped")


@dataclass
class Outcome:
    """What a stage function found (the runner turns it into a :class:`Stage`)."""

    verdict: Verdict
    summary: Said
    next_step: Said = ""
    evidence: dict[str, Any] = field(default_factory=dict)


def passed(summary: Said, **evidence: Any) -> Outcome:
    """The stage proved what it checks."""
    return Outcome("passed", summary, "", evidence)


def failed(summary: Said, next_step: Said, **evidence: Any) -> Outcome:
    """The stage found a problem; ``next_step`` says what the operator should do."""
    return Outcome("failed", summary, next_step, evidence)


def not_applicable(summary: Said, **evidence: Any) -> Outcome:
    """The stage does not apply to this host (e.g. no npu_ge backend installed): not a failure."""
    return Outcome("skipped", summary, "", evidence)


@dataclass
class Stage:
    """The result of one stage, as printed and as written into the JSON report.

    Attributes:
        id: Stable machine name, e.g. ``atc_compile``.
        title: What the stage checks, in a few words.
        verdict: ``passed``, ``failed`` or ``skipped``.
        summary: One or two sentences with the concrete values found.
        next_step: What to do when it failed; ``""`` otherwise.
        evidence: What an engineer needs to see in a bug report (versions, command lines,
            log lines, top-5 with scores...); JSON-ready.
        seconds: How long the stage took.
        blocked_by: For a stage skipped because a stage it needs did not pass, that stage's
            id; None for every other stage (a skipped one then does not apply here).
    """

    id: str
    title: Said
    verdict: Verdict
    summary: Said
    next_step: Said = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    blocked_by: str | None = None

    @property
    def acceptable(self) -> bool:
        """Passed, or skipped because it does not apply here (the exit status may be 0)."""
        return self.verdict == "passed" or (self.verdict == "skipped" and self.blocked_by is None)

    def to_dict(self) -> dict[str, Any]:
        """The stage as JSON-ready data for the report an operator attaches to a bug: its
        sentences in English, which is what the people reading those reports share."""
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        data |= {"title": str(self.title), "summary": str(self.summary)}
        data["next_step"] = str(self.next_step)
        return data


StageFn = Callable[["SelftestContext"], Outcome]


@dataclass(frozen=True)
class StageSpec:
    """A stage as the runner knows it: its id, title, the stages it needs, and its function."""

    id: str
    title: Said
    needs: tuple[str, ...]
    run: StageFn

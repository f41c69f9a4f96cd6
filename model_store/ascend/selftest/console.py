"""The self-test's console lines: one block per stage as it finishes, and the result.

Plain text that reads the same without colour: the verdict in capitals, the stage's title and
summary, and "Next step: ..." under a failure.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from model_store.ascend.selftest.stage import Stage

_WIDTH = 100
_INDENT = " " * 10


def stage_lines(stage: Stage) -> list[str]:
    """E.g. ``PASSED    CANN environment and version: CANN 8.0.RC3 at ... (0.4 s)``."""
    # The console speaks English, like the report (Stage.to_dict).
    head = f"{stage.verdict.upper():<9} {stage.title!s}: {stage.summary!s} ({stage.seconds:.1f} s)"
    lines = _wrap(head, "", _INDENT) or [head]
    if stage.verdict == "failed" and stage.next_step:
        lines += _wrap(f"Next step: {stage.next_step!s}", _INDENT, _INDENT + "  ")
    return lines


def _wrap(text: str, first: str, rest: str) -> list[str]:
    # Paths and command lines stay whole: a break at a hyphen would make them uncopyable.
    return textwrap.wrap(
        text,
        _WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    )


def result_line(stages: Sequence[Stage], report_path: str | None) -> str:
    """The last line: the overall verdict, the counts, and where the report went."""
    failed = [s for s in stages if s.verdict == "failed"]
    blocked = [s for s in stages if s.verdict == "skipped" and s.blocked_by]
    not_applicable = [s for s in stages if s.verdict == "skipped" and not s.blocked_by]
    ok = not failed and not blocked
    counts = f"{sum(s.verdict == 'passed' for s in stages)} passed"
    if failed:
        counts += f", {len(failed)} failed"
    if blocked:
        counts += f", {len(blocked)} skipped (a stage they need did not pass)"
    if not_applicable:
        counts += f", {len(not_applicable)} not applicable here"
    where = f" Report: {report_path}." if report_path else ""
    verdict = "PASSED" if ok else "FAILED"
    return f"Ascend self-test {verdict}: {counts}.{where}"

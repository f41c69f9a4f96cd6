"""A canary release, the decisions: is the candidate as good as the serving version, by the numbers.

Both versions answer side by side; the candidate gets a share of the requests that grows step
by step (for example 10%, 50%, then 100%, which is the promotion itself). At any moment of a
step, :func:`decide` looks at what each side did on the same window and says one of:

* ``fail``: a gate failed (the candidate's error rate above the limit, or its p99 above the
  limit times the serving version's). A gate fails only with at least ``min_requests`` on
  each side, so a handful of slow calls decides nothing; it fails at once, not at the step's
  end, so a broken candidate hurts as few requests as possible.
* ``wait``: the step is not over and no gate failed.
* ``extend``: the step is over but one side had too few requests to decide: the step goes on
  rather than deciding on noise.
* ``pass``: the step is over, both sides had enough requests, every gate held.

Latency is kept as a histogram of log-spaced buckets (:func:`bucket_of`), which the gateway
adds to per call and which sums across processes and nodes; quantiles read from it are within
5% of the true value. Everything here is plain Python: the hub records, this decides.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from model_store.text import Message, say

# -- latency histogram --------------------------------------------------------------------------

#: The lowest bucket's upper edge, and how much wider each next bucket is: 10% steps keep a
#: quantile within 5% of the truth, and 160 buckets reach past ten minutes.
FLOOR_MS = 0.05
GROWTH = 1.1
BUCKETS = 160


def bucket_of(ms: float) -> int:
    """The bucket a latency of ``ms`` milliseconds falls in (0 .. BUCKETS - 1)."""
    if not ms > FLOOR_MS:  # also NaN
        return 0
    return min(BUCKETS - 1, 1 + int(math.log(ms / FLOOR_MS) / math.log(GROWTH)))


def bucket_ms(index: int) -> float:
    """A bucket's representative latency: the geometric middle of its edges."""
    if index <= 0:
        return FLOOR_MS
    return FLOOR_MS * GROWTH ** (index - 0.5)


def quantile(buckets: Mapping[int, int], q: float) -> float | None:
    """The ``q`` quantile (0-1) of the latencies counted in ``buckets``; None when empty."""
    total = sum(count for count in buckets.values() if count > 0)
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for index in sorted(buckets):
        seen += max(0, buckets[index])
        if seen >= rank:
            return bucket_ms(index)
    return bucket_ms(max(buckets))


# -- the plan -----------------------------------------------------------------------------------

MIN_STEP_SECONDS = 5
MAX_STEP_SECONDS = 24 * 3600
DEFAULT_MIN_REQUESTS = 50


@dataclass(frozen=True)
class Gates:
    """What the candidate must hold to at each step."""

    max_error_rate: float  # a fraction, 0-1
    max_p99_ratio: float  # the candidate's p99 over the serving version's, > 1
    min_requests: int = DEFAULT_MIN_REQUESTS  # per side, before any gate may fail


def plan_problems(steps: Sequence[Any], step_seconds: Any, gates: Gates) -> list[Message]:
    """Why a canary with these settings cannot start; empty when it can."""
    problems: list[Message] = []
    if not steps or not all(isinstance(s, int) and not isinstance(s, bool) for s in steps):
        problems.append(say("steps must be a list of whole percentages, e.g. [10, 50, 100]"))
    else:
        if any(s < 1 or s > 100 for s in steps):
            problems.append(say("every step must be between 1 and 100 percent"))
        if any(b <= a for a, b in itertools.pairwise(steps)):
            problems.append(say("steps must increase, each above the one before"))
        if steps[-1] != 100:
            problems.append(say("the last step must be 100 (the promotion)"))
        if len(steps) < 2:
            problems.append(say("give at least one step before 100, e.g. [10, 100]"))
    if (
        not isinstance(step_seconds, int)
        or isinstance(step_seconds, bool)
        or not MIN_STEP_SECONDS <= step_seconds <= MAX_STEP_SECONDS
    ):
        problems.append(
            say(
                "step_seconds must be a whole number from %(low)s to %(high)s",
                low=MIN_STEP_SECONDS,
                high=MAX_STEP_SECONDS,
            )
        )
    if not 0 <= gates.max_error_rate <= 1:
        problems.append(say("max_error_rate is a fraction from 0 to 1, e.g. 0.01 for 1%"))
    if not gates.max_p99_ratio > 1 or math.isinf(gates.max_p99_ratio):
        problems.append(say("max_p99_ratio must be above 1, e.g. 1.5"))
    if not 1 <= gates.min_requests <= 1_000_000:
        problems.append(say("min_requests must be from 1 to 1000000"))
    return problems


# -- the decision -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """What one version did on the window: requests, failed ones, latency of the answered."""

    version: int
    requests: int
    errors: int
    latency: Mapping[int, int] = field(default_factory=dict)  # bucket -> successful calls

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    @property
    def p50_ms(self) -> float | None:
        return quantile(self.latency, 0.50)

    @property
    def p99_ms(self) -> float | None:
        return quantile(self.latency, 0.99)

    def summary(self) -> dict[str, Any]:
        """The numbers a person reads (and the history keeps)."""
        p50, p99 = self.p50_ms, self.p99_ms
        return {
            "version": self.version,
            "requests": self.requests,
            "errors": self.errors,
            "error_rate": round(self.error_rate, 4),
            "p50_ms": None if p50 is None else round(p50, 2),
            "p99_ms": None if p99 is None else round(p99, 2),
        }


class Verdict(StrEnum):
    WAIT = "wait"
    EXTEND = "extend"
    PASS = "pass"  # noqa: S105 - a verdict, not a password
    FAIL = "fail"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: Message | None
    gate: str = ""  # "errors", "latency" or "traffic": what decided
    numbers: dict[str, Any] = field(default_factory=dict)


def decide(candidate: Side, serving: Side, gates: Gates, *, step_over: bool) -> Decision:
    """The step's verdict from both sides' numbers on the same window."""
    numbers: dict[str, Any] = {"candidate": candidate.summary(), "serving": serving.summary()}
    enough = candidate.requests >= gates.min_requests and serving.requests >= gates.min_requests
    if enough and candidate.error_rate > gates.max_error_rate:
        reason = say(
            "%(errors)s of v%(version)s's %(requests)s requests failed (%(rate)s), above the "
            "limit of %(limit)s",
            errors=candidate.errors,
            version=candidate.version,
            requests=candidate.requests,
            rate=_percent(candidate.error_rate),
            limit=_percent(gates.max_error_rate),
        )
        return Decision(Verdict.FAIL, reason, "errors", numbers)
    ours, theirs = candidate.p99_ms, serving.p99_ms
    answered = sum(candidate.latency.values()) >= gates.min_requests and (
        sum(serving.latency.values()) >= gates.min_requests
    )
    if enough and answered and ours is not None and theirs is not None:
        ratio = ours / theirs
        numbers["p99_ratio"] = round(ratio, 3)
        if ratio > gates.max_p99_ratio:
            reason = say(
                "p99 %(ours)s ms is %(ratio)sx v%(serving)s's %(theirs)s ms, limit %(limit)sx",
                ours=f"{ours:.1f}",
                ratio=f"{ratio:.1f}",
                serving=serving.version,
                theirs=f"{theirs:.1f}",
                limit=f"{gates.max_p99_ratio:g}",
            )
            return Decision(Verdict.FAIL, reason, "latency", numbers)
    if not step_over:
        return Decision(Verdict.WAIT, None, "", numbers)
    if not enough:
        reason = say(
            "too little traffic to decide: v%(candidate)s had %(ours)s requests and "
            "v%(serving)s %(theirs)s, each needs %(least)s; the step goes on",
            candidate=candidate.version,
            ours=candidate.requests,
            serving=serving.version,
            theirs=serving.requests,
            least=gates.min_requests,
        )
        return Decision(Verdict.EXTEND, reason, "traffic", numbers)
    reason = say(
        "v%(candidate)s held every gate: %(errors)s errors in %(requests)s requests, p99 "
        "%(ours)s ms against v%(serving)s's %(theirs)s ms",
        candidate=candidate.version,
        errors=candidate.errors,
        requests=candidate.requests,
        ours=_ms(ours),
        serving=serving.version,
        theirs=_ms(theirs),
    )
    return Decision(Verdict.PASS, reason, "", numbers)


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.2g}%"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"

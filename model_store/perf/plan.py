"""What a sweep measures: :class:`SweepPlan`, its validation and its limits.

Apart from the sweep itself (:mod:`model_store.perf.sweep`) because a plan is plain data: a
page or a tuner builds and checks one without starting a thread or touching Triton.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

__all__ = ["DEFAULT_LEVELS", "MAX_CONCURRENCY", "MAX_RATE", "SweepPlan"]

MAX_CONCURRENCY = 64
#: The highest open-loop rate a plan accepts, in requests per second.
MAX_RATE = 10_000.0
DEFAULT_LEVELS = (1, 2, 4, 8)


@dataclass(frozen=True)
class SweepPlan:
    """What to measure. Validated on construction; every field has a sane default.

    ``levels`` (concurrencies, closed loop) drive the plan unless ``rates`` (requests per
    second, open loop) are given; then ``levels`` must be left alone and becomes ``()``.
    ``max_in_flight`` bounds the open loop's sender threads, hence its requests in flight; the
    closed loop ignores it (its concurrency is the bound).
    """

    levels: tuple[int, ...] = DEFAULT_LEVELS
    step_seconds: float = 3.0
    warmup_seconds: float = 0.5
    request_timeout: float = 10.0
    max_total_seconds: float = 120.0
    max_failures_per_level: int = 50
    stop_on_saturation: bool = True
    rates: tuple[float, ...] | None = None
    max_in_flight: int = MAX_CONCURRENCY

    def __post_init__(self) -> None:
        levels = tuple(self.levels)
        object.__setattr__(self, "levels", levels)  # accept a list, keep the plan hashable
        if self.rates is not None:
            self._check_rates(levels)
        elif (
            not levels
            or any(type(c) is not int or not 1 <= c <= MAX_CONCURRENCY for c in levels)
            or any(a >= b for a, b in pairwise(levels))
        ):
            raise ValueError(
                f"levels must be ascending, distinct concurrencies within 1..{MAX_CONCURRENCY}; "
                f"got {levels!r}"
            )
        if type(self.max_in_flight) is not int or not 1 <= self.max_in_flight <= MAX_CONCURRENCY:
            raise ValueError(f"max_in_flight must be an integer within 1..{MAX_CONCURRENCY}")
        _check_range("step_seconds", self.step_seconds, 0.0, 600.0, low_inclusive=False)
        _check_range("warmup_seconds", self.warmup_seconds, 0.0, 60.0)
        _check_range("request_timeout", self.request_timeout, 0.0, 600.0, low_inclusive=False)
        _check_range("max_total_seconds", self.max_total_seconds, 0.0, 3600.0, low_inclusive=False)
        if type(self.max_failures_per_level) is not int or self.max_failures_per_level < 0:
            raise ValueError("max_failures_per_level must be an integer >= 0")
        if self.estimated_seconds > self.max_total_seconds:
            raise ValueError(
                f"this plan needs about {self.estimated_seconds:g} s ({len(self.points)} levels x "
                f"({self.warmup_seconds:g} s warmup + {self.step_seconds:g} s measurement)), "
                f"more than max_total_seconds={self.max_total_seconds:g}; "
                "use fewer levels or shorter steps"
            )

    def _check_rates(self, levels: tuple[int, ...]) -> None:
        if levels not in ((), DEFAULT_LEVELS):
            raise ValueError("give levels (closed loop) or rates (open loop), not both")
        raw = tuple(self.rates or ())
        if not raw or any(
            isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r <= MAX_RATE
            for r in raw
        ):
            raise ValueError(
                f"rates must be requests per second within (0, {MAX_RATE:g}]; got {raw!r}"
            )
        rates = tuple(float(r) for r in raw)
        if any(a >= b for a, b in pairwise(rates)):
            raise ValueError(f"rates must be ascending and distinct; got {raw!r}")
        object.__setattr__(self, "levels", ())
        object.__setattr__(self, "rates", rates)

    @property
    def mode(self) -> str:
        """``"rate"`` (open loop) or ``"concurrency"`` (closed loop)."""
        return "concurrency" if self.rates is None else "rate"

    @property
    def points(self) -> tuple[float, ...]:
        """What each level is driven at: the rates in open loop, else the concurrencies."""
        return self.levels if self.rates is None else self.rates

    @property
    def estimated_seconds(self) -> float:
        """Nominal duration: warmup plus measurement for every level (overheads excluded; an
        open-loop level the server cannot keep up with may take up to one more step to
        send what is late)."""
        return len(self.points) * (self.warmup_seconds + self.step_seconds)

    @classmethod
    def doubling(cls, max_concurrency: int, **options: Any) -> SweepPlan:
        """Levels 1, 2, 4, ... up to ``max_concurrency``, which is included even if it is not
        a power of two (``doubling(6)`` → 1, 2, 4, 6). Other fields as keyword arguments."""
        if type(max_concurrency) is not int or not 1 <= max_concurrency <= MAX_CONCURRENCY:
            raise ValueError(f"max_concurrency must be within 1..{MAX_CONCURRENCY}")
        levels = [1 << i for i in range(max_concurrency.bit_length()) if 1 << i < max_concurrency]
        return cls(levels=(*levels, max_concurrency), **options)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["levels"] = list(self.levels)
        data["rates"] = None if self.rates is None else list(self.rates)
        data["mode"] = self.mode
        return data


def _check_range(
    name: str, value: float, low: float, high: float, *, low_inclusive: bool = True
) -> None:
    ok = math.isfinite(value) and (value >= low if low_inclusive else value > low)
    if not ok or value > high:
        bound = "[" if low_inclusive else "("
        raise ValueError(f"{name} must be within {bound}{low:g}, {high:g}], got {value!r}")

from __future__ import annotations

import math

from django import template

register = template.Library()


@register.filter
def sig(value: object, digits: int = 3) -> str:
    """A number with ``digits`` significant digits (errors span 1e-9 to 1e3)."""
    if value is None or value == "":
        return "-"
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number) or math.isinf(number):
        return str(number)
    return f"{number:.{int(digits)}g}"


@register.filter
def duration(seconds: object) -> str:
    """``3.2`` -> ``3.2 s``; ``95`` -> ``1 min 35 s``."""
    if seconds is None:
        return "-"
    value = float(seconds)  # type: ignore[arg-type]
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest} s"

from __future__ import annotations

import math

from django import template

register = template.Library()


@register.filter
def sig(value: object, digits: int = 3) -> str:
    """A number with ``digits`` significant digits (errors span 1e-9 to 1e3)."""
    if value is None or value == "":
        return "–"
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number) or math.isinf(number):
        return str(number)
    return f"{number:.{int(digits)}g}"

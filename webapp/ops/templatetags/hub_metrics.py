"""Numbers of the metrics pages, and the models list's throughput sparklines."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import template

from webapp.ops.metrics_read import HEIGHT, WIDTH, Sparkline, sparklines

register = template.Library()
NONE = "\u2013"  # an en dash where there is no number


def _number(value: object) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


@register.filter
def rate(value: object) -> str:
    """Requests per second with a precision that suits the size: 0.05, 3.21, 42.5, 1,204."""
    number = _number(value)
    if number is None:
        return NONE
    if number == 0:
        return "0"
    if number < 0.01:
        return "<0.01"
    if number < 10:
        return f"{number:.2f}"
    if number < 100:
        return f"{number:.1f}"
    return f"{number:,.0f}"


@register.filter
def ms(value: object) -> str:
    """Milliseconds: 0.042, 1.27, 12.3, 250."""
    number = _number(value)
    if number is None:
        return NONE
    if number < 1:
        return f"{number:.3f}"
    if number < 10:
        return f"{number:.2f}"
    if number < 100:
        return f"{number:.1f}"
    return f"{number:,.0f}"


@register.simple_tag
def throughput_sparklines(rows: Iterable[Any]) -> dict[str, Sparkline]:
    """``{% throughput_sparklines models as sparks %}`` for the models list's ``(model, state)``
    rows: the last hour of each model, read with two queries for the whole list."""
    return sparklines(m for m, _state in rows)


@register.inclusion_tag("ops/_throughput_cell.html")
def throughput_cell(sparks: dict[str, Sparkline], name: str) -> dict[str, Any]:
    return {"spark": sparks.get(name), "width": WIDTH, "height": HEIGHT}

"""The ASGI application answers under its new name and under the name deploy scripts know."""

from __future__ import annotations


def test_the_old_entry_point_is_the_same_application() -> None:
    from webapp.asgi import application as old
    from webapp.edge.asgi import application as new

    assert old is new

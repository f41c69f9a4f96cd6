"""Shared pytest configuration for the whole suite.

Markers: ``integration`` (starts real services), ``browser`` (headless Chromium). Unit tests
carry neither: ``make test-unit`` runs only them.
"""

pytest_plugins = ["tests.fixtures.triton", "tests.fixtures.services", "tests.fixtures.users"]


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _no_client_calls_from_earlier_tests() -> None:
    """The hub counts its own inference calls in memory and flushes them a second later; a
    count left by an earlier test in this process must not land in a later test's numbers."""
    from webapp.ops import metrics_store

    with metrics_store._lock:
        if metrics_store._timer is not None:
            metrics_store._timer.cancel()
    metrics_store._take_pending()

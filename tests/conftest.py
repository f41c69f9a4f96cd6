"""Shared pytest configuration for the whole suite.

Markers: ``integration`` (starts real services), ``browser`` (headless Chromium). Unit tests
carry neither: ``make test-unit`` runs only them. Heavy suites (``stress``) also carry one of
the heavy markers; ``--skip-heavy`` leaves them out, so that CI runs them once, not in both
database runs.
"""

pytest_plugins = [
    "tests.fixtures.triton",
    "tests.fixtures.services",
    "tests.fixtures.users",
    # Every /api/v1/ answer the suite sees is checked against the served OpenAPI document.
    "tests.fixtures.openapi",
    "tests.fixtures.api",
]


from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

HEAVY_MARKERS = ("stress", "faults", "nodes", "stack", "load", "language")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--skip-heavy",
        action="store_true",
        help=f"leave out the heavy suites (tests marked {', '.join(HEAVY_MARKERS)})",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--skip-heavy"):
        return
    heavy = [i for i in items if any(i.get_closest_marker(m) for m in HEAVY_MARKERS)]
    if heavy:
        config.hook.pytest_deselected(items=heavy)
        items[:] = [i for i in items if i not in heavy]


@pytest.fixture(autouse=True)
def _no_free_space_floor(settings) -> None:  # type: ignore[no-untyped-def]
    """The store's free-space floor (1 GiB by default) is off unless a test sets it: a full
    development disk must not fail tests about something else."""
    settings.STORE_MIN_FREE_BYTES = 0


@pytest.fixture(autouse=True)
def _fast_password_hashing(request: pytest.FixtureRequest, settings) -> None:  # type: ignore[no-untyped-def]
    """Unit tests hash passwords with MD5: PBKDF2's million rounds cost ~0.4 s per persona on
    these machines, for nothing a unit test checks. Tests with real services keep the real
    hashers, since a stack started in another process verifies the passwords made here."""
    if request.node.get_closest_marker("integration") or request.node.get_closest_marker("browser"):
        return
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        *settings.PASSWORD_HASHERS,
    ]


@pytest.fixture(autouse=True)
def _no_cached_reports_from_earlier_tests() -> None:
    """Health and diagnostics answer from a short-lived cache; each test starts without it."""
    from webapp.ops import diagnostics, health, stack_status

    health.forget_cached()
    diagnostics.forget_report()
    stack_status.forget_cached()


@pytest.fixture(autouse=True)
def _no_client_calls_from_earlier_tests() -> None:
    """The hub counts its own inference calls in memory and flushes them a second later; a
    count left by an earlier test in this process must not land in a later test's numbers."""
    from webapp.ops import metrics_store

    with metrics_store._lock:
        if metrics_store._timer is not None:
            metrics_store._timer.cancel()
    metrics_store._take_pending()


@pytest.fixture(autouse=True)
def _each_test_starts_in_english() -> Iterator[None]:
    """Django keeps the language a request activated in its thread after the response (the
    next request activates its own); a test that asked in Chinese must not leave the next
    test's plain calls speaking Chinese."""
    from django.utils import translation

    translation.deactivate()
    yield
    translation.deactivate()

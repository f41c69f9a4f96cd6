"""Shared pytest configuration for the whole suite.

Markers: ``integration`` (starts real services), ``browser`` (headless Chromium). Unit tests
carry neither: ``make test-unit`` runs only them. Heavy suites also carry one of the heavy
markers (tests/fixtures/parallel.py); ``--skip-heavy`` leaves them out, so that CI runs them
once, not in both database runs. docs/testing.md has the suites, their budgets and which run
where.
"""

import os

# A message formatted into a string by accident (an f-string, ``+``) raises under the tests, in
# this process and in every worker and server the tests start (model_store/text.py).
os.environ["HUB_STRICT_MESSAGES"] = "1"
from model_store.text import set_strict

set_strict(True)  # this process may have imported model_store.text already (Django's setup)

pytest_plugins = [
    "tests.fixtures.triton",
    "tests.fixtures.services",
    "tests.fixtures.users",
    # Every /api/v1/ answer the suite sees is checked against the served OpenAPI document.
    "tests.fixtures.openapi",
    "tests.fixtures.api",
    "tests.fixtures.web",
    "tests.fixtures.sso",
    "tests.fixtures.ldap_directory",
    # The suites: heavy ones skipped on request, workers of a parallel run kept apart, heavy
    # tests grouped, each suite's time reported.
    "tests.fixtures.suites",
]


from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402


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

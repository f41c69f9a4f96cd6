"""Shared pytest configuration for the whole suite.

Markers: ``integration`` (starts real services), ``browser`` (headless Chromium). Unit tests
carry neither: ``make test-unit`` runs only them.
"""

pytest_plugins = ["tests.fixtures.triton", "tests.fixtures.services", "tests.fixtures.users"]

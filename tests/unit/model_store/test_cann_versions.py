"""CANN version strings order as CANN releases do, and the skew rule refuses only what it must."""

from __future__ import annotations

import itertools

import pytest

from model_store.cann_versions import parse_cann_version, skew

# Oldest first: RCs before their line's final release, builds before what they name.
RELEASE_ORDER = [
    "6.3.RC2.B050",
    "6.3.RC2",
    "7.0.RC1.alpha003",
    "7.0.RC1.B010",
    "7.0.RC1",
    "7.0.0",
    "8.0.RC1",
    "8.0.RC2",
    "8.0.RC3.alpha001",
    "8.0.RC3",
    "8.0.0",
    "8.0.1",
    "8.1.RC1",
    "8.5.0",
    "9.0.0",
    "10.0.RC1",
]


def test_release_order() -> None:
    parsed = [parse_cann_version(text) for text in RELEASE_ORDER]
    assert all(parsed), dict(zip(RELEASE_ORDER, parsed, strict=True))
    assert sorted(parsed, key=lambda v: v.key) == parsed  # type: ignore[union-attr]
    for older, newer in itertools.pairwise(parsed):
        assert older < newer, (older, newer)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("a", "b"), [("8.0", "8.0.0"), (" 8.0.RC3 ", "8.0.RC3"), ("8.0.rc3", "8.0.RC3")]
)
def test_equivalent_spellings(a: str, b: str) -> None:
    assert parse_cann_version(a) == parse_cann_version(b)


@pytest.mark.parametrize("text", [None, "", "latest", "8", "8.0.RC", "8.0.RC3.beta", "8.0.0.0"])
def test_unreadable_versions_are_none(text: str | None) -> None:
    assert parse_cann_version(text) is None


def test_skew_refuses_an_om_built_with_a_newer_cann() -> None:
    result = skew("8.0.0", "8.0.RC3")
    assert result.state == "too_new"
    assert result.message == (
        "built with CANN 8.0.0, the serving host runs 8.0.RC3; an OM must not run on an older "
        "CANN: rebuild on a host with CANN <= 8.0.RC3 or upgrade the serving host"
    )


@pytest.mark.parametrize(("built", "serving"), [("8.0.RC3", "8.0.RC3"), ("7.0.RC1", "8.5.0")])
def test_skew_allows_a_runtime_as_new_or_newer(built: str, serving: str) -> None:
    assert skew(built, serving).state == "ok"


@pytest.mark.parametrize(("built", "serving"), [(None, "8.0.0"), ("8.0.0", None), ("x", "8.0.0")])
def test_skew_is_unknown_when_a_side_is_unknown(built: str | None, serving: str | None) -> None:
    result = skew(built, serving)
    assert result.state == "unknown" and "Cannot compare CANN versions" in result.message

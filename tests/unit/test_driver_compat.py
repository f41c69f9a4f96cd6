"""The NPU driver (Ascend HDK) against the CANN that serves: parsing, the table, the verdicts."""

from __future__ import annotations

import pytest

from model_store.driver_compat import (
    MINIMUM_DRIVER,
    check_driver,
    check_host_report,
    minimum_driver,
    parse_driver_version,
    report_cann,
    report_driver,
)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("24.1.rc2", (24, 1, 0, 2)),
        ("24.1.RC2", (24, 1, 0, 2)),
        (" 25.2.0 ", (25, 2, 1, 0)),
        ("23.0.6", (23, 0, 1, 6)),
        ("24.1.rc3.b999", (24, 1, 0, 3)),  # a build of 24.1.RC3 is 24.1.RC3
        ("25.0.RC1.1", (25, 0, 0, 1)),  # a patch of 25.0.RC1
        ("23.0.2.1", (23, 0, 1, 2)),
    ],
)
def test_driver_versions_parse(text: str, key: tuple[int, ...]) -> None:
    parsed = parse_driver_version(text)
    assert parsed is not None and parsed.key == key and parsed.text == text.strip()


@pytest.mark.parametrize("text", [None, "", "24.1", "latest", "24.x.rc1", "24.1.rc"])
def test_what_is_not_a_driver_version_is_none(text: str | None) -> None:
    assert parse_driver_version(text) is None


def test_driver_versions_order_numerically_rcs_before_the_release() -> None:
    order = ["23.0.6", "24.1.rc1", "24.1.RC2", "24.1.rc3.b999", "24.1.0", "24.1.1", "25.0.rc1"]
    parsed = [parse_driver_version(v) for v in order]
    assert all(p is not None for p in parsed)
    assert sorted(parsed) == parsed  # type: ignore[type-var]
    assert parse_driver_version("24.1.10") > parse_driver_version("24.1.9")  # type: ignore[operator]


@pytest.mark.parametrize(
    ("cann", "minimum", "old", "new"),
    [
        # 9.2.0 needs 25.3.X (N on 25.2.X) — CANN 9.2.0 release notes
        ("9.2.0", "25.3.X", "25.2.0", "25.3.RC1"),
        # 9.1.X needs 25.2.X (N on 25.0.X) — CANN 9.1.0 release notes
        ("9.1.0", "25.2.X", "25.0.rc1", "25.2.RC1"),
        ("9.1.1", "25.2.X", "25.0.RC1.1", "25.2.0"),
        # 9.0.X needs 25.0.X
        ("9.0.1", "25.0.X", "24.1.0", "25.0.rc1"),
        # 8.5.X needs 25.0.X — CANN 8.5.0 release notes, 9.1.0 release notes for 8.5.2
        ("8.5.0", "25.0.X", "24.1.0", "25.0.RC1"),
        ("8.5.2", "25.0.X", "24.1.rc3", "25.5.1"),
        # 8.2.RC1 from HDK 24.1.RC2 — MindIE 2.1.RC1 release notes
        ("8.2.RC1", "24.1.RC2", "24.1.rc1", "24.1.rc2"),
    ],
)
def test_each_row_of_the_table(cann: str, minimum: str, old: str, new: str) -> None:
    row = minimum_driver(cann)
    assert row is not None and row.driver == minimum and row.source
    too_old = check_driver(old, cann)
    assert too_old.state == "too_old" and too_old.minimum == minimum
    ok = check_driver(new, cann)
    assert ok.state == "ok" and ok.minimum == minimum


def test_every_row_cites_a_source_and_every_cell_reads() -> None:
    for row in MINIMUM_DRIVER:
        assert "release" in row.source  # release notes, each named
        assert minimum_driver(row.cann.replace("X", "0")) is row


@pytest.mark.parametrize("cann", ["8.3.RC2", "8.3.RC1", "8.0.RC1", "8.2.RC2", "7.0.0", "9.3.0"])
def test_a_cann_the_table_does_not_have_is_unknown(cann: str) -> None:
    assert minimum_driver(cann) is None
    found = check_driver("24.1.rc1", cann)
    assert found.state == "unknown" and found.minimum is None
    assert f"CANN {cann} is not in the hub's driver table" in str(found.message)


def test_a_pre_release_build_is_not_in_the_table() -> None:
    assert minimum_driver("8.5.0.alpha001") is None
    assert check_driver("25.2.0", "9.1.0.B050").state == "unknown"


def test_too_old_names_both_versions_the_minimum_and_the_fix() -> None:
    found = check_driver("24.1.rc1", "9.1.0")
    text = str(found.message)
    assert found.state == "too_old" and found.driver == "24.1.rc1" and found.cann == "9.1.0"
    assert "Ascend HDK 24.1.rc1" in text and "CANN 9.1.0" in text and "25.2.X or newer" in text
    assert "Upgrade the driver" in text and "Triton image" in text


@pytest.mark.parametrize(
    ("driver", "cann", "missing"),
    [
        (None, "8.5.0", "the NPU driver's version (not reported) unknown"),
        ("24.1.rc2", None, "the serving CANN's version (not reported) unknown"),
        ("driver?", "8.5.0", "the NPU driver's version (driver?)"),
        (None, "?", "the NPU driver's version (not reported) and the serving CANN's version (?)"),
    ],
)
def test_an_unknown_version_is_unknown(driver: str | None, cann: str | None, missing: str) -> None:
    found = check_driver(driver, cann)
    assert found.state == "unknown" and missing in str(found.message)


def test_a_host_report_gives_its_driver_and_the_serving_cann_first() -> None:
    report = {
        "cann": {"version": "8.5.0"},
        "devices": {"version": "24.1.rc2", "npus": []},
        "serving": {"cann": {"version": "9.1.0"}, "devices": {"version": "25.2.0"}},
    }
    assert report_driver(report) == "24.1.rc2"  # the worker's npu-smi first
    assert report_cann(report) == "9.1.0"  # the CANN beside Triton first
    assert check_host_report(report).state == "too_old"
    # Without Triton's word: the worker's CANN; npu-smi run in Triton gives the driver.
    alone = {"cann": {"version": "8.5.0"}, "serving": {"devices": {"version": "25.2.0"}}}
    assert report_cann(alone) == "8.5.0" and report_driver(alone) == "25.2.0"
    assert check_host_report(alone).state == "ok"
    assert check_host_report({}).state == "unknown"
    assert check_host_report({"devices": "junk", "serving": []}).state == "unknown"

"""Whether the host's NPU driver (Ascend HDK) is new enough for the CANN that serves.

The Triton image brings its own CANN whatever driver the host runs
(docs/ascend.md#the-serving-side). Huawei publishes which driver releases each CANN release
works with; a driver older than that fails at the first model load (``aclInit``: "init soc
version failed, ret = 507008", ``ACL_ERROR_RT_SOC_VERSION``). :data:`MINIMUM_DRIVER` holds
the oldest driver Huawei documents for each CANN line, every row with its source
(docs/cann.md#driver-and-cann lists them); :func:`check_driver` compares, and
:func:`check_host_report` does so for a stored host report.

Driver versions read like CANN's (``24.1.rc2``, ``24.1.RC2``, ``25.2.0``, ``23.0.6``; RCs before
the line's final release, :mod:`model_store.cann_versions`); a fourth part (``24.1.rc3.b999``,
``25.0.RC1.1``, a build or patch of that release) counts as the release it names. A table cell
``25.0.X`` means any release of the 25.0 line, as Huawei writes it.

Verdicts: ``ok``, ``too_old`` (name both versions, the minimum and the fix), ``unknown`` (either
version unknown or unreadable, or a CANN the table does not have; never a warning by itself).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from model_store.cann_versions import CannVersion, parse_cann_version
from model_store.text import Message, say

#: ``major.minor.(RCn|patch|X)`` and whatever follows (a build or patch of that release).
_DRIVER = re.compile(r"\s*v?(?P<release>\d+\.\d+\.(?:[Rr][Cc]\d+|\d+))(?:\.[0-9A-Za-z]+)*\s*")
_LINE = re.compile(r"(?P<major>\d+)\.(?P<minor>\d+)\.[Xx]")
#: The fourth element of a CannVersion key that marks a final build (not alpha, not B).
_FINAL_BUILD = 2


@dataclass(frozen=True)
class MinimumDriver:
    """One row: the CANN it covers, the oldest driver Huawei documents for it, and where.

    ``cann`` is one release (``8.2.RC1``) or a line (``9.1.X``: every release of 9.1);
    ``driver`` is a release (``24.1.RC2``) or a line (``25.0.X``: any 25.0 release).
    """

    cann: str
    driver: str
    source: str

    def covers(self, cann: CannVersion) -> bool:
        """Whether this row speaks of ``cann`` (a pre-release build is never covered)."""
        if cann.key[4] != _FINAL_BUILD:
            return False
        return cann.key[: len(_bound(self.cann))] == _bound(self.cann)

    def met_by(self, driver: CannVersion) -> bool:
        bound = _bound(self.driver)
        return driver.key[: len(bound)] >= bound


def _bound(text: str) -> tuple[int, ...]:
    """``9.1.X`` as ``(9, 1)``; ``24.1.RC2`` as the first four parts of its version key."""
    line = _LINE.fullmatch(text)
    if line:
        return (int(line["major"]), int(line["minor"]))
    parsed = parse_cann_version(text)
    assert parsed is not None, text  # the table's own cells
    return parsed.key[:4]


_RN_850 = (
    "CANN 8.5.0 release notes, 'CANN与驱动版本配套关系' (hiascend.com/document/detail/zh/"
    "canncommercial/850/releasenote): Ascend HDK 25.5.X, 25.3.X, 25.2.X, 25.0.X"
)
_RN_910 = (
    "CANN 9.1.0 and 9.2.0 release notes, 'CANN and Ascend HDK Version Compatibility' "
    "(hiascend.com/document/detail/en/CANNCommunityEdition/910/softwareinst/releasenote/9.1.0/"
    "release-notes.md, .../920/.../9.2.0/release-notes.md)"
)

#: The oldest driver (Ascend HDK) Huawei documents for each CANN; newest CANN first.
#: CANN 8.0.RC1 to 8.3.RC2 (other than 8.2.RC1) are left out: no Huawei page found states the
#: oldest driver they take (docs/cann.md#driver-and-cann).
MINIMUM_DRIVER: tuple[MinimumDriver, ...] = (
    MinimumDriver("9.2.0", "25.3.X", _RN_910 + ": 9.2.0 is N on 25.0.X and 25.2.X, Y from 25.3.X"),
    MinimumDriver("9.1.X", "25.2.X", _RN_910 + ": 9.1.X is N on 25.0.X, Y from 25.2.X"),
    MinimumDriver("9.0.X", "25.0.X", _RN_910 + ": 9.0.X is Y from 25.0.X"),
    MinimumDriver(
        "8.5.X",
        "25.0.X",
        _RN_850 + "; " + _RN_910 + ": 8.5.2 is Y from 25.0.X; MindIE 26.0.0 release notes "
        "(gitcode.com/Ascend/release-management, MindIE/26.0.0/release.md): CANN 8.5.1 takes "
        "the same HDK as 8.5.0",
    ),
    MinimumDriver(
        "8.2.RC1",
        "24.1.RC2",
        "MindIE 2.1.RC1 release notes, '版本兼容性说明' (hiascend.com/document/detail/zh/mindie/"
        "21RC1/releasenote/releasenote_0004.html): CANN 8.2.RC1 with Ascend HDK 25.2.0, "
        "25.0.RC1, 24.1.0, 24.1.RC3, 24.1.RC2",
    ),
)


def parse_driver_version(text: str | None) -> CannVersion | None:
    """The driver release in ``text`` (``"24.1.rc2"``, ``"25.2.0"``, ``"24.1.rc3.b999"``), or None.

    Its key has four parts (major, minor, RC-or-release, number): a build or patch suffix is
    the release it names.
    """
    if not text:
        return None
    match = _DRIVER.fullmatch(text)
    if match is None:
        return None
    parsed = parse_cann_version(match["release"])
    if parsed is None:
        return None
    return CannVersion(text.strip(), parsed.key[:4])


def minimum_driver(cann: str | None) -> MinimumDriver | None:
    """The table's row for ``cann``, or None when the table has none (or ``cann`` is unreadable)."""
    parsed = parse_cann_version(cann)
    if parsed is None:
        return None
    return next((row for row in MINIMUM_DRIVER if row.covers(parsed)), None)


@dataclass(frozen=True)
class DriverCheck:
    """How the host's driver compares with the CANN that serves.

    ``state``: ``"ok"``, ``"too_old"`` or ``"unknown"``; ``minimum`` the table's oldest driver
    for that CANN (None when it has no row); ``message`` says it, with the fix when too old.
    """

    state: str
    driver: str | None
    cann: str | None
    minimum: str | None
    message: Message

    def as_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "driver": self.driver,
            "cann": self.cann,
            "minimum": self.minimum,
            "message": self.message,
        }


def check_driver(driver: str | None, cann: str | None) -> DriverCheck:
    """Compare the host's driver (``driver/version.info``, npu-smi's ``Version``) with ``cann``."""
    found, serving = parse_driver_version(driver), parse_cann_version(cann)
    if found is None or serving is None:
        missing = []
        if found is None:
            missing.append(say("the NPU driver's version (%(v)s)", v=driver or say("not reported")))
        if serving is None:
            missing.append(say("the serving CANN's version (%(v)s)", v=cann or say("not reported")))
        which = missing[0] if len(missing) == 1 else say(
            "%(first)s and %(second)s", first=missing[0], second=missing[1]
        )  # fmt: skip
        message = say("Cannot check the NPU driver against CANN: %(which)s unknown.", which=which)
        return DriverCheck("unknown", driver, cann, None, message)
    row = minimum_driver(cann)
    if row is None:
        message = say(
            "CANN %(cann)s is not in the hub's driver table (docs/cann.md#driver-and-cann): "
            "check in Huawei's CANN release notes that driver %(driver)s supports it.",
            cann=str(serving),
            driver=str(found),
        )
        return DriverCheck("unknown", driver, cann, None, message)
    if not row.met_by(found):
        message = say(
            "The NPU driver (Ascend HDK %(driver)s) is older than CANN %(cann)s supports (HDK "
            "%(minimum)s or newer): models fail at their first load (ACL error 507008). Upgrade "
            "the driver to %(minimum)s or newer, or serve with a Triton image whose CANN this "
            "driver supports (docs/cann.md#driver-and-cann).",
            driver=str(found),
            cann=str(serving),
            minimum=row.driver,
        )
        return DriverCheck("too_old", driver, cann, row.driver, message)
    message = say(
        "The NPU driver (Ascend HDK %(driver)s) supports CANN %(cann)s (HDK %(minimum)s or newer).",
        driver=str(found),
        cann=str(serving),
        minimum=row.driver,
    )
    return DriverCheck("ok", driver, cann, row.driver, message)


def _object(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def report_driver(report: Mapping[str, Any]) -> str | None:
    """The driver's version in a host report: npu-smi's ``Version`` (the driver's,
    docs/npu-smi.md), from the worker's npu-smi or the one Triton ran; None when absent."""
    for devices in (report.get("devices"), _object(report.get("serving")).get("devices")):
        version = _object(devices).get("version")
        if isinstance(version, str) and version.strip():
            return version.strip()
    return None


def report_cann(report: Mapping[str, Any]) -> str | None:
    """The CANN that serves, from a host report: the one beside Triton (``serving.cann``), else
    the worker's (``cann``)."""
    for cann in (_object(report.get("serving")).get("cann"), report.get("cann")):
        version = _object(cann).get("version")
        if isinstance(version, str) and version.strip():
            return version.strip()
    return None


def check_host_report(report: Mapping[str, Any]) -> DriverCheck:
    """:func:`check_driver` on what a stored host report says."""
    return check_driver(report_driver(report), report_cann(report))

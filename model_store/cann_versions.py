"""Ordering CANN version strings, and the rule an OM's toolkit and its runtime must follow.

CANN names its releases ``<major>.<minor>.RC<n>`` (release candidates, e.g. ``8.0.RC3``) and
``<major>.<minor>.<patch>`` (the final release of that line, e.g. ``8.0.0``), and writes the
same text in ``ascend_toolkit_install.info`` (docs/cann.md#toolkit-version-files). Internal and
pre-release builds add a fourth part: ``7.0.RC1.alpha003``, ``6.3.RC2.B050``. Upstream does not
publish a grammar; the order below follows the published release sequence on hiascend.com,
where every line's RCs come before its final release (8.0.RC1, 8.0.RC2, 8.0.RC3, then 8.0.0,
then 8.1.RC1; docs/cann.md#version-compatibility lists the documentation used):

* major, then minor, numerically;
* within one ``major.minor``: ``RC1 < RC2 < ... < 0 < 1 < ...`` (RCs precede the final
  release, patches follow it);
* a fourth part marks a build *before* the version it names (``8.0.RC3.alpha001`` and
  ``8.0.RC3.B050`` come before ``8.0.RC3``): alpha builds before B builds, each by number.

The compatibility rule (docs/cann.md#version-compatibility, from hicann/ge's
``--soc_version.md``): an OM runs on a runtime CANN at least as new as the CANN that built it,
never on an older one. :func:`skew` applies it; a version it cannot read counts as unknown,
which never refuses by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from model_store.text import Message, Said, say

_VERSION = re.compile(
    r"""\s*v?(?P<major>\d+)\.(?P<minor>\d+)
        (?:\.(?:(?P<rc>[Rr][Cc])(?P<rc_n>\d+)|(?P<patch>\d+)))?
        (?:\.(?:(?P<alpha>alpha|ALPHA|Alpha)(?P<alpha_n>\d+)|(?P<b>[Bb])(?P<b_n>\d+)))?\s*""",
    re.VERBOSE,
)

#: Stage ranks within one major.minor: release candidates, then releases.
_RC, _RELEASE = 0, 1
#: Ranks of a fourth part: alpha builds, B builds, then the version itself.
_ALPHA, _BUILD, _FINAL = 0, 1, 2


@total_ordering
@dataclass(frozen=True)
class CannVersion:
    """A parsed CANN version; compare with ``<``, ``==``; ``text`` is what was read."""

    text: str
    key: tuple[int, ...]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, CannVersion):
            return NotImplemented
        return self.key < other.key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CannVersion):
            return NotImplemented
        return self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return self.text


def parse_cann_version(text: str | None) -> CannVersion | None:
    """The version in ``text`` (``"8.0.RC3"``, ``"8.5.0"``, ``"7.0.RC1.alpha003"``), or None.

    ``major.minor`` alone (``"8.0"``) reads as ``major.minor.0``.
    """
    if not text:
        return None
    match = _VERSION.fullmatch(text)
    if match is None:
        return None
    major, minor = int(match["major"]), int(match["minor"])
    if match["rc"]:
        stage, number = _RC, int(match["rc_n"])
    else:
        stage, number = _RELEASE, int(match["patch"] or 0)
    if match["alpha"]:
        build, build_n = _ALPHA, int(match["alpha_n"])
    elif match["b"]:
        build, build_n = _BUILD, int(match["b_n"])
    else:
        build, build_n = _FINAL, 0
    return CannVersion(text.strip(), (major, minor, stage, number, build, build_n))


@dataclass(frozen=True)
class Skew:
    """How the CANN that built an OM compares with the serving side's.

    ``state``: ``"ok"`` (serving is as new or newer), ``"too_new"`` (built with a newer CANN
    than serves: the OM must not run there), or ``"unknown"`` (either side not known or not
    readable). ``message`` says it in plain words, with what to do (a
    :func:`~model_store.text.say` text: the English ``str``, translated where it is shown).
    """

    state: str
    built_with: str | None
    serving: str | None
    message: Said


def skew(built_with: str | None, serving: str | None) -> Skew:
    """Applies the rule "the runtime CANN must be at least as new as the one that built the OM"."""
    built, served = parse_cann_version(built_with), parse_cann_version(serving)
    if built is None or served is None:
        missing: list[Message] = []
        if built is None:
            missing.append(
                say(
                    "the building CANN (%(version)s)",
                    version=built_with or say("not recorded"),
                )
            )
        if served is None:
            missing.append(
                say(
                    "the serving host's CANN (%(version)s)",
                    version=serving or say("not reported"),
                )
            )
        which = (
            missing[0]
            if len(missing) == 1
            else say("%(first)s and %(second)s", first=missing[0], second=missing[1])
        )
        return Skew(
            "unknown",
            built_with,
            serving,
            say(
                "Cannot compare CANN versions: %(which)s unknown. Make sure the serving host "
                "runs a CANN at least as new as the one that built this OM.",
                which=which,
            ),
        )
    if built > served:
        return Skew(
            "too_new",
            built_with,
            serving,
            say(
                "built with CANN %(built)s, the serving host runs %(serving)s; an OM must not run "
                "on an older CANN: rebuild on a host with CANN <= %(serving)s or upgrade the "
                "serving host",
                built=str(built),
                serving=str(served),
            ),
        )
    return Skew(
        "ok",
        built_with,
        serving,
        say(
            "built with CANN %(built)s, the serving host runs %(serving)s (as new or newer).",
            built=str(built),
            serving=str(served),
        ),
    )

"""Stages 1 and 2: CANN's environment and version, and ATC's interpreter with its packages.

Both reuse the diagnostics checks the Diagnostics page runs (``check_cann_env``, ``check_atc``,
``check_atc_python`` in :mod:`model_store.diagnostics.cann_checks`), judged for a host that is
meant to be an Ascend host: a check that finds no CANN at all is a failure here, not "not
applicable". What the checks look for is in docs/cann.md#install-layouts and
docs/atc.md#python-environment.
"""

from __future__ import annotations

import re

from model_store.ascend.selftest.context import SelftestContext
from model_store.ascend.selftest.stage import Outcome, failed, passed
from model_store.compile.atc import cann_status
from model_store.compile.atc.environment import LAYOUT_NAMES, default_toolkit_homes
from model_store.diagnostics import check_atc, check_atc_python, check_cann_env
from model_store.targets.acl import HOW_TO_GET_CANN
from model_store.text import say

INSTALL_CANN = say(
    "Install the CANN toolkit (and, from CANN 8.5, the ops package of your chip) and source its "
    "set_env.sh in the shell or container that runs this command, or set ASCEND_TOOLKIT_HOME "
    "(docs/cann.md#install-layouts); then run the self-test again. The worker needs the same: "
    "%(how)s",
    how=HOW_TO_GET_CANN,
)


def check_cann(ctx: SelftestContext) -> Outcome:
    """ATC found the way the worker finds it, CANN's environment set, ``atc --help`` runs."""
    diag = ctx.diagnostics()
    homes = default_toolkit_homes(ctx.ascend_root, ctx.env.get("HOME") or None)
    status = cann_status(ctx.env, default_homes=homes)
    ctx.facts.cann = status
    env_check = check_cann_env(diag)
    atc_check = check_atc(diag)
    evidence = {
        "cann": status.as_dict(),
        "layout": LAYOUT_NAMES.get(status.layout or "", None),
        "environment_check": env_check.to_dict(),
        "atc_check": atc_check.to_dict(),
    }
    if not status.available:
        return failed(
            say("No CANN toolkit found: %(reason)s", reason=status.reason), INSTALL_CANN, **evidence
        )
    if env_check.state == "failing":
        return failed(env_check.found, env_check.advice or INSTALL_CANN, **evidence)
    if atc_check.state != "ok":
        return failed(atc_check.found, atc_check.advice or INSTALL_CANN, **evidence)
    version = (
        say("CANN %(version)s", version=status.version)
        if status.version
        else say("CANN (version unknown)")
    )
    if status.ops_version:
        version = say("%(cann)s, ops package %(ops)s", cann=version, ops=status.ops_version)
    summary = say(
        "%(cann)s at %(home)s; ATC %(atc)s starts.",
        cann=version,
        home=str(status.toolkit_home),
        atc=str(status.atc_path),
    )
    if env_check.state == "warning":
        summary = say("%(summary)s Note: %(note)s", summary=summary, note=env_check.found)
    return passed(summary, **evidence)


#: ``assess_probe`` writes "ATC's Python is <executable> (<where>), Python <x.y.z>".
_PROBE_SUMMARY = re.compile(
    r"ATC's Python is (?P<executable>\S+) \(.*?\), Python (?P<version>[0-9][0-9.]*[0-9])"
)


def check_atc_interpreter(ctx: SelftestContext) -> Outcome:
    """The ``python3`` ATC's operator compiler will embed: 3.7+, CANN's packages, libpython."""
    check = check_atc_python(ctx.diagnostics())
    match = _PROBE_SUMMARY.search(str(check.found) + " ")
    if match:
        ctx.facts.atc_python = {
            "executable": match.group("executable"),
            "version": match.group("version"),
        }
    evidence = {"check": check.to_dict(), "interpreter": ctx.facts.atc_python}
    if check.state == "ok":
        return passed(check.found, **evidence)
    if check.state == "warning":
        return passed(
            say(
                "%(found)s That is outside what CANN documents but need not stop ATC; the "
                "compile stage shows ATC's own answer.",
                found=check.found,
            ),
            **evidence,
        )
    return failed(check.found, check.advice, **evidence)

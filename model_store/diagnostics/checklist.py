"""The checklist: every check in the order a person would work through it, and its summary.

The checks fall in two groups by where they must run: :data:`HOST_CHECKS` on the host with the
NPUs and CANN (a worker there, in its host report), :data:`HUB_CHECKS` where the hub's requests
to Triton start (the web process).

:func:`run_checks` runs them one after the other (a check that raises becomes a failing
check, never a crash); :func:`summarize` and :func:`summary_line` count the results by state
for the page, the API and the logs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from model_store.diagnostics.cann_checks import check_atc, check_atc_python, check_cann_env
from model_store.diagnostics.context import STATES, TITLES, Check, DiagnosticsContext
from model_store.diagnostics.device_checks import check_davinci_devices, check_npu_smi
from model_store.diagnostics.ge_backend_checks import check_npu_ge_backend
from model_store.diagnostics.sign_in_checks import check_ldap_bind, check_oidc_discovery
from model_store.diagnostics.triton_checks import (
    check_load_failures,
    check_stuck_loading,
    check_triton_access,
    check_triton_reachable,
)
from model_store.text import Said, joined, say, say_n

CheckFn = Callable[[DiagnosticsContext], Check]

#: Checks of the host with the NPUs, CANN and Triton's backends. They must run on that host:
#: a worker there runs them as part of its host report (model_store/host_report.py), and the
#: web process shows the stored result (in compose it has none of these things itself).
HOST_CHECKS: list[tuple[str, CheckFn]] = [
    ("cann_env", check_cann_env),
    ("atc", check_atc),
    ("atc_python", check_atc_python),
    ("npu_ge_backend", check_npu_ge_backend),
    ("davinci_devices", check_davinci_devices),
    ("npu_smi", check_npu_smi),
]
#: Checks of what the hub reaches over the network (Triton's API and its log); the web process
#: runs them itself, from where the hub's requests start.
HUB_CHECKS: list[tuple[str, CheckFn]] = [
    ("triton_reachable", check_triton_reachable),
    ("triton_access", check_triton_access),
    ("stuck_loading", check_stuck_loading),
    ("load_failures", check_load_failures),
    ("oidc_discovery", check_oidc_discovery),
    ("ldap_bind", check_ldap_bind),
]
#: The whole checklist, in the order a person would work through it.
CHECKS: list[tuple[str, CheckFn]] = HOST_CHECKS + HUB_CHECKS
HOST_CHECK_IDS: frozenset[str] = frozenset(cid for cid, _ in HOST_CHECKS)


def run_checks(
    ctx: DiagnosticsContext, checks: Sequence[tuple[str, CheckFn]] | None = None
) -> list[Check]:
    """Run every check in order; one that raises becomes a failing check, never a crash.

    Each outside call is bounded (subprocesses by ``ctx.timeout``, Triton by its client's
    timeout, the log by :data:`LOG_TAIL_BYTES`) and shared answers are asked once.
    """
    results = []
    for cid, fn in CHECKS if checks is None else checks:
        try:
            results.append(fn(ctx))
        except Exception as exc:
            results.append(
                Check(
                    cid,
                    TITLES.get(cid, cid),
                    "failing",
                    say(
                        "the check itself failed: %(error)s",
                        error=f"{type(exc).__name__}: {exc}",
                    ),
                    say(
                        "This is a bug in the dashboard's diagnostics; the other checks still "
                        "ran. Please report it with the text above."
                    ),
                )
            )
    return results


def summarize(checks: Sequence[Check | Mapping[str, Any]]) -> dict[str, int]:
    """How many checks are in each state (every state present, zeros included).

    Takes :class:`Check` objects or their dicts (as a stored host report holds them).
    """
    counts: dict[str, int] = dict.fromkeys(STATES, 0)
    for check in checks:
        counts[check["state"] if isinstance(check, Mapping) else check.state] += 1
    return counts


def summary_line(checks: Sequence[Check | Mapping[str, Any]]) -> Said:
    """E.g. ``"8 checks: 4 ok, 1 failing, 3 not applicable"`` (zero counts left out).

    A :class:`~model_store.text.Message`: the web layer says it in the reader's language.
    """
    counts = summarize(checks)
    parts = [_count_said(state, counts[state]) for state in STATES if counts[state]]
    if not parts:
        return say_n("%(count)s check", "%(count)s checks", len(checks))
    return say_n(
        "%(count)s check: %(counts)s",
        "%(count)s checks: %(counts)s",
        len(checks),
        counts=joined(parts, ", "),
    )


def _count_said(state: str, count: int) -> Said:
    """``"4 ok"``, ``"1 failing"``...: how many checks are in ``state``."""
    if state == "ok":
        return say("%(count)s ok", count=count)
    if state == "warning":
        return say("%(count)s warning", count=count)
    if state == "failing":
        return say("%(count)s failing", count=count)
    return say("%(count)s not applicable", count=count)

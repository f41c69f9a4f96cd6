"""Diagnostics checks of Triton: reachable, its repository API restricted, models loading.

:func:`check_triton_reachable` asks Triton's health endpoints, :func:`check_triton_access`
checks that the repository API refuses callers without the hub's key and accepts the hub's,
and :func:`check_stuck_loading` / :func:`check_load_failures` read the repository index and
the GE error phrases in Triton's log (docs/ge-backend.md#statistics-reload-and-unload).
"""

from __future__ import annotations

from model_store.diagnostics.context import (
    Check,
    DiagnosticsContext,
    TritonProtocol,
    make_check,
)
from model_store.diagnostics.triton_log import GE_ADVICE, classify_ge_message
from model_store.runtime.access import API_KEY_HEADER, RESTRICTED_APIS, RESTRICTED_OPTIONS
from model_store.runtime.errors import TritonAccessDenied
from model_store.text import Message, Said, joined, said, say


def _ge_log_hits(ctx: DiagnosticsContext, limit: int = 20) -> list[tuple[str, str]]:
    """``(kind, line)`` for the last ``limit`` log lines holding a GE phrase."""
    hits = [(kind, line.strip()) for line in ctx.log_lines() if (kind := classify_ge_message(line))]
    return hits[-limit:]


def check_triton_reachable(ctx: DiagnosticsContext) -> Check:
    """Triton answers ``/v2/health/live`` and ``/v2/health/ready``."""
    if ctx.is_live is None:
        return make_check(
            "triton_reachable",
            "not_applicable",
            say("No Triton is configured for this dashboard."),
        )
    url = f"http://{ctx.triton_url}" if "://" not in ctx.triton_url else ctx.triton_url
    log = str(ctx.triton_log_path) if ctx.triton_log_path else ""
    if not ctx.triton_live():
        return make_check(
            "triton_reachable",
            "failing",
            say("Triton at %(url)s is not reachable (no answer on /v2/health/live).", url=url),
            say(
                "Start it (`make run` starts the embedded Triton; its log is %(log)s), or set "
                "TRITON_URL to the HTTP address (host:port) of the running Triton and check that "
                "nothing blocks that port.",
                log=log,
            )
            if log
            else say(
                "Start it (`make run` starts the embedded Triton), or set TRITON_URL to the "
                "HTTP address (host:port) of the running Triton and check that nothing blocks "
                "that port."
            ),
        )
    if not ctx.triton_ready():
        return make_check(
            "triton_reachable",
            "warning",
            say("Triton at %(url)s is live but not ready (/v2/health/ready says no).", url=url),
            say(
                "Triton reports not ready while it starts and, with strict readiness, when a "
                "model failed to load: see the load failure check below and the Triton log; its "
                "log is %(log)s.",
                log=log,
            )
            if log
            else say(
                "Triton reports not ready while it starts and, with strict readiness, when a "
                "model failed to load: see the load failure check below and the Triton log."
            ),
        )
    return make_check(
        "triton_reachable", "ok", say("Triton at %(url)s is live and ready.", url=url)
    )


def _restrict_advice() -> Said:
    """The tritonserver options that restrict the repository API, as the advice shows them."""
    setting = f"{','.join(RESTRICTED_APIS)}:{API_KEY_HEADER}=<key>"
    flags = " and ".join(f"`{option}={setting}`" for option in RESTRICTED_OPTIONS)
    return say(
        "Start tritonserver with %(flags)s (Triton 2.51 syntax: a colon before the header "
        "name) and give the web, worker and beat processes the same key as TRITON_API_KEY; "
        "docker-compose.yml does both from TRITON_API_KEY in .env. A Triton that rejects these "
        "options is too old to restrict its API: upgrade it, and until then let nothing but "
        "the hub reach its HTTP and gRPC ports.",
        flags=flags,
    )


def _probe_without_key(ctx: DiagnosticsContext) -> tuple[list[str], list[str], list[str]]:
    """Ask the repository index without a key on each port: ``(open, refused, unknown)``.

    Each list holds port names such as ``HTTP (triton:8000)``; ``unknown`` says why.
    """
    assert ctx.repository_index_without_key is not None
    ports: list[tuple[TritonProtocol, str]] = [("http", f"HTTP ({ctx.triton_url})")]
    if ctx.grpc_url:
        ports.append(("grpc", f"gRPC ({ctx.grpc_url})"))
    answered, refused, unknown = [], [], []
    for protocol, name in ports:
        try:
            ctx.repository_index_without_key(protocol)
            answered.append(name)
        except TritonAccessDenied:
            refused.append(name)
        except Exception as exc:
            unknown.append(f"{name} could not be asked: {exc}")  # a details line
    return answered, refused, unknown


def _hub_key_refused(ctx: DiagnosticsContext) -> Check:
    found = (
        say(
            "Triton refuses the hub's repository calls: the hub's TRITON_API_KEY does not match "
            "the key Triton was started with."
        )
        if ctx.api_key_set
        else say(
            "Triton's repository API is restricted, but the hub has no TRITON_API_KEY to send."
        )
    )
    return make_check(
        "triton_access",
        "failing",
        joined(
            [
                found,
                say(
                    "Publishing, rollback and reconcile cannot load or unload models until it does."
                ),
            ]
        ),
        say(
            "Set TRITON_API_KEY (or TRITON_API_KEY_FILE) for the web, worker and beat processes "
            "to the key in Triton's `--http-restricted-api` and `--grpc-restricted-protocol` "
            "options, then restart them."
        ),
    )


def check_triton_access(ctx: DiagnosticsContext) -> Check:
    """Triton refuses repository calls (index, load, unload) without the hub's key, and
    accepts the hub's."""
    if ctx.is_live is None or ctx.repository_index_without_key is None:
        return make_check(
            "triton_access", "not_applicable", say("No Triton is configured for this dashboard.")
        )
    if not ctx.triton_live():
        return make_check(
            "triton_access",
            "not_applicable",
            say("Triton at %(url)s is not reachable; see the Triton check.", url=ctx.triton_url),
        )
    try:
        ctx.index()
    except TritonAccessDenied:
        return _hub_key_refused(ctx)
    except Exception as exc:
        return make_check(
            "triton_access",
            "not_applicable",
            say(
                "Triton's repository index could not be read (%(error)s); see the Triton check.",
                error=said(exc),
            ),
        )
    answered, refused, unknown = _probe_without_key(ctx)
    if answered:
        open_to = (
            say(
                "Triton's repository API is open to anyone who can reach it: without any key, "
                "%(ports)s answered the repository index, so anyone could also load and unload "
                "models (Triton does not check the hub's TRITON_API_KEY).",
                ports=_ports(answered),
            )
            if ctx.api_key_set
            else say(
                "Triton's repository API is open to anyone who can reach it: without any key, "
                "%(ports)s answered the repository index, so anyone could also load and unload "
                "models.",
                ports=_ports(answered),
            )
        )
        return make_check("triton_access", "warning", open_to, _restrict_advice(), unknown)
    if unknown:
        return make_check(
            "triton_access",
            "warning",
            say(
                "Triton refuses repository calls without the hub's key on %(ports)s, "
                "but not every port could be asked.",
                ports=_ports(refused),
            ),
            say("Check TRITON_GRPC_URL: the hub loads models over gRPC when it is set."),
            unknown,
        )
    return make_check(
        "triton_access",
        "ok",
        say(
            "Triton refuses repository calls without the hub's key on %(ports)s, "
            "and accepts the hub's TRITON_API_KEY.",
            ports=_ports(refused),
        ),
    )


def _ports(names: list[str]) -> Said:
    """``HTTP (triton:8000) and gRPC (triton:8001)``: one or two port names."""
    if len(names) == 2:
        return say("%(first)s and %(second)s", first=names[0], second=names[1])
    return " and ".join(names)


def _index_or_reason(ctx: DiagnosticsContext) -> tuple[list[dict[str, str]] | None, Said]:
    try:
        return ctx.index(), ""
    except Exception as exc:
        return None, say("Triton's repository index could not be read (%(error)s)", error=said(exc))


def check_stuck_loading(ctx: DiagnosticsContext) -> Check:
    """Models LOADING; failing when a GE init failure may have blocked later loads."""
    rows, why = _index_or_reason(ctx)
    if rows is None:
        return make_check(
            "stuck_loading", "not_applicable", say("%(why)s; see the Triton check.", why=why)
        )
    loading = [r for r in rows if r.get("state") == "LOADING"]
    if not loading:
        return make_check(
            "stuck_loading",
            "ok",
            say("No model is LOADING (%(count)s in the index).", count=len(rows)),
        )
    names = ", ".join(f"{r.get('name')} v{r.get('version') or '?'}" for r in loading)
    init_failures = [line for kind, line in _ge_log_hits(ctx) if kind in ("device", "compile")]
    if init_failures:
        return make_check(
            "stuck_loading",
            "failing",
            say(
                "%(count)s model(s) LOADING (%(names)s) after a GE initialisation failure in "
                "the Triton log: the GE backend can hang later loads after one fails.",
                count=len(loading),
                names=names,
            ),
            say(
                "Restart Triton (the only recovery); then fix the model whose load failed first "
                "(see the load failure check) before loading it again."
            ),
            init_failures,
        )
    return make_check(
        "stuck_loading",
        "warning",
        say("%(count)s model(s) LOADING: %(names)s.", count=len(loading), names=names),
        say(
            "The GE backend compiles the ONNX when it loads, which can take minutes. If a model "
            "stays LOADING far longer than its first load took, restart Triton: after one failed "
            "load the GE backend may keep later loads waiting forever."
        ),
    )


def check_load_failures(ctx: DiagnosticsContext) -> Check:
    """UNAVAILABLE models with their reason, and GE error phrases in the Triton log."""
    rows, why = _index_or_reason(ctx)
    hits = _ge_log_hits(ctx)
    failed = [
        r
        for r in rows or []
        if r.get("state") == "UNAVAILABLE" and r.get("reason", "").strip() not in ("", "unloaded")
    ]
    kinds: list[str] = []
    details: list[str] = []
    for row in failed:
        kind = classify_ge_message(row.get("reason", "")) or "other"
        kinds.append(kind)
        details.append(f"{row.get('name')} v{row.get('version') or '?'} [{kind}]: {row['reason']}")
    log_kinds = [kind for kind, _ in hits]
    details += [f"log [{kind}]: {line}" for kind, line in hits]
    advice = joined([GE_ADVICE[k] for k in dict.fromkeys([*kinds, *log_kinds])])
    log = str(ctx.triton_log_path)
    if failed:
        names = ", ".join(f"{r.get('name')} ({k})" for r, k in zip(failed, kinds, strict=True))
        found: Message = say(
            "%(count)s model(s) failed to load: %(names)s.", count=len(failed), names=names
        )
        if hits:
            found = say(
                "%(found)s The Triton log (%(log)s) has %(count)s GE error line(s) since it "
                "started.",
                found=found,
                log=log,
                count=len(hits),
            )
        return make_check("load_failures", "failing", found, advice, details)
    if hits:
        return make_check(
            "load_failures",
            "warning",
            say(
                "No model is UNAVAILABLE now, but the Triton log (%(log)s) has %(count)s GE "
                "error line(s) since it started (%(kinds)s).",
                log=log,
                count=len(hits),
                kinds=", ".join(dict.fromkeys(log_kinds)),
            ),
            advice,
            details,
        )
    if rows is None:
        return make_check(
            "load_failures",
            "not_applicable",
            say(
                "%(why)s; see the Triton check. The Triton log (%(log)s) has no GE error since "
                "it started.",
                why=why,
                log=log,
            )
            if ctx.triton_log_path
            else say("%(why)s; see the Triton check.", why=why),
        )
    return make_check(
        "load_failures",
        "ok",
        say(
            "No model failed to load (%(count)s in the index); no GE error in %(log)s.",
            count=len(rows),
            log=log,
        )
        if ctx.triton_log_path
        else say("No model failed to load (%(count)s in the index).", count=len(rows)),
    )

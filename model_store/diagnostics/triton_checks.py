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


def _ge_log_hits(ctx: DiagnosticsContext, limit: int = 20) -> list[tuple[str, str]]:
    """``(kind, line)`` for the last ``limit`` log lines holding a GE phrase."""
    hits = [(kind, line.strip()) for line in ctx.log_lines() if (kind := classify_ge_message(line))]
    return hits[-limit:]


def check_triton_reachable(ctx: DiagnosticsContext) -> Check:
    """Triton answers ``/v2/health/live`` and ``/v2/health/ready``."""
    if ctx.is_live is None:
        return make_check(
            "triton_reachable", "not_applicable", "No Triton is configured for this dashboard."
        )
    url = f"http://{ctx.triton_url}" if "://" not in ctx.triton_url else ctx.triton_url
    log = f"; its log is {ctx.triton_log_path}" if ctx.triton_log_path else ""
    if not ctx.triton_live():
        return make_check(
            "triton_reachable",
            "failing",
            f"Triton at {url} is not reachable (no answer on /v2/health/live).",
            f"Start it (`make run` starts the embedded Triton{log}), or set TRITON_URL to the "
            "HTTP address (host:port) of the running Triton and check that nothing blocks "
            "that port.",
        )
    if not ctx.triton_ready():
        return make_check(
            "triton_reachable",
            "warning",
            f"Triton at {url} is live but not ready (/v2/health/ready says no).",
            "Triton reports not ready while it starts and, with strict readiness, when a model "
            f"failed to load: see the load failure check below and the Triton log{log}.",
        )
    return make_check("triton_reachable", "ok", f"Triton at {url} is live and ready.")


def _restrict_advice() -> str:
    """The tritonserver options that restrict the repository API, as the advice shows them."""
    setting = f"{','.join(RESTRICTED_APIS)}:{API_KEY_HEADER}=<key>"
    flags = " and ".join(f"`{option}={setting}`" for option in RESTRICTED_OPTIONS)
    return (
        f"Start tritonserver with {flags} (Triton 2.51 syntax: a colon before the header "
        "name) and give the web, worker and beat processes the same key as TRITON_API_KEY; "
        "docker-compose.yml does both from TRITON_API_KEY in .env. A Triton that rejects these "
        "options is too old to restrict its API: upgrade it, and until then let nothing but "
        "the hub reach its HTTP and gRPC ports."
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
            unknown.append(f"{name} could not be asked: {exc}")
    return answered, refused, unknown


def _hub_key_refused(ctx: DiagnosticsContext) -> Check:
    found = (
        "Triton refuses the hub's repository calls: the hub's TRITON_API_KEY does not match "
        "the key Triton was started with."
        if ctx.api_key_set
        else "Triton's repository API is restricted, but the hub has no TRITON_API_KEY to send."
    )
    return make_check(
        "triton_access",
        "failing",
        f"{found} Publishing, rollback and reconcile cannot load or unload models until it does.",
        "Set TRITON_API_KEY (or TRITON_API_KEY_FILE) for the web, worker and beat processes "
        "to the key in Triton's `--http-restricted-api` and `--grpc-restricted-protocol` "
        "options, then restart them.",
    )


def check_triton_access(ctx: DiagnosticsContext) -> Check:
    """Triton refuses repository calls (index, load, unload) without the hub's key, and
    accepts the hub's."""
    if ctx.is_live is None or ctx.repository_index_without_key is None:
        return make_check(
            "triton_access", "not_applicable", "No Triton is configured for this dashboard."
        )
    if not ctx.triton_live():
        return make_check(
            "triton_access",
            "not_applicable",
            f"Triton at {ctx.triton_url} is not reachable; see the Triton check.",
        )
    try:
        ctx.index()
    except TritonAccessDenied:
        return _hub_key_refused(ctx)
    except Exception as exc:
        return make_check(
            "triton_access",
            "not_applicable",
            f"Triton's repository index could not be read ({exc}); see the Triton check.",
        )
    answered, refused, unknown = _probe_without_key(ctx)
    if answered:
        unchecked = " (Triton does not check the hub's TRITON_API_KEY)" if ctx.api_key_set else ""
        return make_check(
            "triton_access",
            "warning",
            f"Triton's repository API is open to anyone who can reach it: without any key, "
            f"{' and '.join(answered)} answered the repository index, so anyone could also "
            f"load and unload models{unchecked}.",
            _restrict_advice(),
            unknown,
        )
    if unknown:
        return make_check(
            "triton_access",
            "warning",
            f"Triton refuses repository calls without the hub's key on {' and '.join(refused)}, "
            "but not every port could be asked.",
            "Check TRITON_GRPC_URL: the hub loads models over gRPC when it is set.",
            unknown,
        )
    return make_check(
        "triton_access",
        "ok",
        f"Triton refuses repository calls without the hub's key on {' and '.join(refused)}, "
        "and accepts the hub's TRITON_API_KEY.",
    )


def _index_or_reason(ctx: DiagnosticsContext) -> tuple[list[dict[str, str]] | None, str]:
    try:
        return ctx.index(), ""
    except Exception as exc:
        return None, f"Triton's repository index could not be read ({exc})"


def check_stuck_loading(ctx: DiagnosticsContext) -> Check:
    """Models LOADING; failing when a GE init failure may have blocked later loads."""
    rows, why = _index_or_reason(ctx)
    if rows is None:
        return make_check("stuck_loading", "not_applicable", f"{why}; see the Triton check.")
    loading = [r for r in rows if r.get("state") == "LOADING"]
    if not loading:
        return make_check("stuck_loading", "ok", f"No model is LOADING ({len(rows)} in the index).")
    names = ", ".join(f"{r.get('name')} v{r.get('version') or '?'}" for r in loading)
    init_failures = [line for kind, line in _ge_log_hits(ctx) if kind in ("device", "compile")]
    if init_failures:
        return make_check(
            "stuck_loading",
            "failing",
            f"{len(loading)} model(s) LOADING ({names}) after a GE initialisation failure in "
            "the Triton log: the GE backend can hang later loads after one fails.",
            "Restart Triton (the only recovery); then fix the model whose load failed first "
            "(see the load failure check) before loading it again.",
            init_failures,
        )
    return make_check(
        "stuck_loading",
        "warning",
        f"{len(loading)} model(s) LOADING: {names}.",
        "The GE backend compiles the ONNX when it loads, which can take minutes. If a model "
        "stays LOADING far longer than its first load took, restart Triton: after one failed "
        "load the GE backend may keep later loads waiting forever.",
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
    advice = " ".join(GE_ADVICE[k] for k in dict.fromkeys([*kinds, *log_kinds]))
    log_note = (
        f" The Triton log ({ctx.triton_log_path}) has {len(hits)} GE error line(s) since it "
        "started."
        if hits
        else ""
    )
    if failed:
        names = ", ".join(f"{r.get('name')} ({k})" for r, k in zip(failed, kinds, strict=True))
        return make_check(
            "load_failures",
            "failing",
            f"{len(failed)} model(s) failed to load: {names}.{log_note}",
            advice,
            details,
        )
    if hits:
        return make_check(
            "load_failures",
            "warning",
            f"No model is UNAVAILABLE now, but the Triton log ({ctx.triton_log_path}) has "
            f"{len(hits)} GE error line(s) since it started "
            f"({', '.join(dict.fromkeys(log_kinds))}).",
            advice,
            details,
        )
    if rows is None:
        log_words = (
            f" The Triton log ({ctx.triton_log_path}) has no GE error since it started."
            if ctx.triton_log_path
            else ""
        )
        return make_check(
            "load_failures", "not_applicable", f"{why}; see the Triton check.{log_words}"
        )
    log_words = f"; no GE error in {ctx.triton_log_path}" if ctx.triton_log_path else ""
    return make_check(
        "load_failures",
        "ok",
        f"No model failed to load ({len(rows)} in the index){log_words}.",
    )

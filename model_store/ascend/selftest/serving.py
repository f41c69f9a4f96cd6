"""Stages 7 to 9: Triton serves the demo through ``acl`` (and ``npu_ge`` where installed), and
every path gives the same top-1.

Each Triton stage loads the model under a temporary name with
:func:`~model_store.serving.trial.trial_model` (a ``_trial-...`` directory that no hub model
can have; unloaded and removed on exit, also on failure or Ctrl-C), so what is serving is never
touched. The configs are the targets' own (``make_config``), and ``npu_ge``'s model is built by
``NpuGeTarget.build`` as a worker would build it (docs/ge-backend.md). The ``npu_ge`` stage
applies only where Triton's backend directory holds ``libtriton_npu_ge.so``, as the diagnostics
check ``check_npu_ge_backend`` finds it (docs/ge-backend.md#identity-and-build).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from model_store.ascend.selftest.context import SelftestContext
from model_store.ascend.selftest.demo import classify, photo_tensor
from model_store.ascend.selftest.stage import Outcome, failed, not_applicable, passed
from model_store.config import ModelConfig, render_pbtxt
from model_store.diagnostics import check_npu_ge_backend
from model_store.errors import ModelStoreError
from model_store.onnx_info import inspect_onnx
from model_store.runtime.embedded import EmbeddedTriton, find_tritonserver, free_ports
from model_store.runtime.errors import TritonAccessDenied, TritonRuntimeError, TritonStartError
from model_store.serving.trial import TrialLoadFailed, trial_model
from model_store.store import ModelStore
from model_store.targets import get_target
from model_store.targets.base import BuildContext
from model_store.text import joined, said, say

NPU_GE_MODEL_NAME = "ascend-selftest-npu-ge"

_TRITON_HINTS = {
    "acl": say(
        "Check that Triton's backend directory holds our acl backend (acl/model.py, mounted "
        "from model_store/backends/acl), that Triton's environment lets it import pyACL "
        "(ASCEND_TOOLKIT_HOME or CANN's set_env.sh) and that its container has the NPU device "
        "nodes; the reason above is Triton's own (docs/pyacl.md#lifecycle)."
    ),
    "npu_ge": say(
        "Triton's log says more (ASCEND_SLOG_PRINT_TO_STDOUT=1 adds CANN's); see "
        "docs/ge-backend.md#log-phrases for what GE's messages mean."
    ),
}


def _unreachable(ctx: SelftestContext) -> Outcome | None:
    """A failed outcome when no Triton answers; None when it is live."""
    runtime = ctx.runtime
    if runtime is None:
        return failed(
            say("No Triton is configured for the hub."),
            say(
                "Set TRITON_URL (and TRITON_GRPC_URL, TRITON_API_KEY) as the hub's processes "
                "have them."
            ),
        )
    if not runtime.is_live():
        return failed(
            say("Triton at %(url)s does not answer /v2/health/live.", url=runtime.http_url),
            say(
                "Start Triton (`docker compose ps triton`, `docker compose logs triton`), or set "
                "TRITON_URL to its address, and run again."
            ),
        )
    if ctx.facts.triton_version is None:
        try:
            ctx.facts.triton_version = runtime.server_metadata().get("version") or None
        except TritonRuntimeError:
            ctx.facts.triton_version = None
    return None


def serve_and_classify(
    ctx: SelftestContext, backend: str, cfg: ModelConfig, files: list[Path], where: str = ""
) -> Outcome:
    """Loads ``files`` as a trial of ``cfg``, classifies the photo through Triton, unloads;
    the classification is kept under ``where`` (default ``"Triton <backend>"``)."""
    problem = _unreachable(ctx)
    if problem is not None:
        return problem
    runtime = ctx.runtime
    info = ctx.facts.info
    assert runtime is not None and info is not None
    if ctx.facts.tensor is None:
        # The npu_ge stage does not need ATC's: when that one failed, the photo is made here.
        _, ctx.facts.tensor = photo_tensor(ctx.demo, info)
    where = where or f"Triton {backend}"
    evidence: dict[str, Any] = {
        "triton_url": runtime.http_url,
        "triton_version": ctx.facts.triton_version,
        "config_pbtxt": render_pbtxt(cfg),
    }
    started = time.monotonic()
    try:
        with trial_model(ctx.store, runtime, cfg, files, timeout_s=ctx.load_timeout_s) as name:
            evidence["trial_name"] = name
            evidence["load_seconds"] = round(time.monotonic() - started, 3)
            asked = time.monotonic()
            outputs = runtime.infer(name, {info.inputs[0].name: ctx.facts.tensor})
            evidence["infer_seconds"] = round(time.monotonic() - asked, 3)
    except TritonAccessDenied as exc:
        return failed(
            said(exc),
            say(
                "Give this command the same TRITON_API_KEY as Triton (run it in a hub "
                "container, whose environment has it)."
            ),
            **evidence,
        )
    except TrialLoadFailed as exc:
        return failed(
            say(
                "Triton could not load the demo through %(backend)s: %(error)s",
                backend=backend,
                error=exc.message,
            ),
            _TRITON_HINTS.get(backend, ""),
            **evidence,
        )
    except (TritonRuntimeError, ModelStoreError) as exc:
        return failed(
            say(
                "Triton loaded the demo through %(backend)s but the request failed: %(error)s",
                backend=backend,
                error=said(exc),
            ),
            _TRITON_HINTS.get(backend, ""),
            **evidence,
        )
    wanted = info.outputs[0].name
    if wanted not in outputs:
        return failed(
            say(
                "Triton's answer has no output %(name)r (it has %(outputs)s).",
                name=wanted,
                outputs=", ".join(outputs),
            )
            if outputs
            else say("Triton's answer has no output %(name)r (it has none).", name=wanted),
            _TRITON_HINTS.get(backend, ""),
            **evidence,
        )
    result = classify(where, outputs, wanted, ctx.demo.label_list())
    ctx.facts.classifications[where] = result
    evidence["top_k"] = result.top_k
    if result.top1_label != ctx.demo.expected_label:
        return failed(
            say(
                "Through %(backend)s, Triton calls the photo %(found)s, not %(expected)r.",
                backend=backend,
                found=result.describe(),
                expected=ctx.demo.expected_label,
            ),
            say(
                "Compare with the pyACL stage: if pyACL was right, the backend changes the input "
                "or output; attach this report to a bug report."
            ),
            **evidence,
        )
    return passed(
        say(
            "Triton at %(url)s served the demo through %(backend)s (temporary model, removed "
            "again): %(found)s.",
            url=runtime.http_url,
            backend=backend,
            found=result.describe(),
        ),
        **evidence,
    )


def serve_acl(ctx: SelftestContext) -> Outcome:
    """The OM from the compile stage, with the acl target's config, through Triton."""
    om, cfg = ctx.facts.om, ctx.facts.acl_config
    assert om is not None and cfg is not None
    return serve_and_classify(ctx, "acl", cfg, [om])


def _npu_ge_applies(ctx: SelftestContext) -> tuple[Outcome | None, dict[str, Any]]:
    """``(None, evidence)`` when the Triton that serves has the GE backend; otherwise why the
    stage does not run. That Triton's own answer decides (the ``serving_side`` stage;
    docs/ascend.md#the-serving-side); only without one is Triton's backend directory looked at
    from here (the embedded Triton's, which this process shares)."""
    serving = ctx.facts.serving or {}
    if serving.get("available"):
        evidence: dict[str, Any] = {"serving_backends": serving.get("backends")}
        if not serving.get("npu_ge"):
            return not_applicable(
                say(
                    "Not applicable: the Triton that serves (%(url)s) has no npu_ge backend "
                    "(its backends: %(backends)s).",
                    url=ctx.triton_url(),
                    backends=", ".join(sorted(serving.get("backends") or {})) or "-",
                ),
                **evidence,
            ), evidence
        return None, evidence
    check = check_npu_ge_backend(ctx.diagnostics())
    evidence = {"backend_check": check.to_dict()}
    if check.state == "failing":
        return failed(check.found, check.advice, **evidence), evidence
    if check.state != "ok":
        return not_applicable(say("Not applicable: %(reason)s", reason=check.found), **evidence), (
            evidence
        )
    return None, evidence


def _local_ge_backend(ctx: SelftestContext) -> Path | None:
    """Triton's backend directory when this process can start a Triton on it (the embedded
    case: the directory is here, the ``tritonserver`` binary too) and it holds ``npu_ge``."""
    folder = ctx.backends_dir
    if folder is None or not (folder / "npu_ge").is_dir():
        return None
    try:
        find_tritonserver()
    except TritonStartError:
        return None
    return folder


@contextlib.contextmanager
def _disposable_triton(ctx: SelftestContext, backends: Path) -> Iterator[SelftestContext]:
    """A Triton of its own on free ports, on the same backends and a scratch repository,
    stopped (and with it whatever GE kept) when the stage ends: the stage's context with it."""
    root = ctx.scratch / "npu-ge-triton"
    repository = root / "repository"
    repository.mkdir(parents=True)
    http, grpc, metrics = free_ports(3)
    triton = EmbeddedTriton(
        repository, backends, http_port=http, grpc_port=grpc, metrics_port=metrics,
        log_path=root / "tritonserver.log", workdir=root / "work", prepare_backends=False,
    )  # fmt: skip
    triton.start()
    try:
        triton.wait_ready(timeout=60)
        runtime = triton.runtime()
        try:
            yield dataclasses.replace(ctx, runtime=runtime, store=ModelStore(root))
        finally:
            runtime.close()
    finally:
        triton.stop()


def serve_npu_ge(ctx: SelftestContext) -> Outcome:
    """Where the serving Triton has the GE backend: the npu_ge target's build, through a
    disposable Triton where one can be started here, else (only when asked) the serving one."""
    refused, evidence = _npu_ge_applies(ctx)
    if refused is not None:
        return refused
    backends = _local_ge_backend(ctx)
    if backends is None and not ctx.npu_ge_in_serving_triton:
        # The GE backend never frees a session, and one failed initialisation blocks every
        # later npu_ge load in that Triton until it restarts
        # (docs/ge-backend.md#statistics-reload-and-unload): no trial goes there unasked.
        # Not a failure: nothing is wrong, the stage was not asked for. The first-contact
        # command in docs/ascend.md asks for it (a fresh host serves nothing yet).
        return not_applicable(
            say(
                "Not applicable without --npu-ge-in-serving-triton: the Triton that serves "
                "(%(url)s) has the npu_ge backend, and the self-test does not load a trial into "
                "it unasked; a failed GE load would block every later npu_ge load there until "
                "Triton restarts. Give the flag on a Triton that serves nothing yet (a fresh "
                "host), or restart Triton afterwards (docs/selftest.md).",
                url=ctx.triton_url(),
            ),
            **evidence,
        )
    built = _build_npu_ge(ctx)
    if isinstance(built, Outcome):
        built.evidence = {**evidence, **built.evidence}
        return built
    cfg, artifact = built
    if backends is None:
        outcome = serve_and_classify(ctx, "npu_ge", cfg, [artifact])
        outcome.evidence = {**evidence, "triton": "serving", **outcome.evidence}
        return outcome
    try:
        with _disposable_triton(ctx, backends) as trial_ctx:
            outcome = serve_and_classify(trial_ctx, "npu_ge", cfg, [artifact])
    except TritonStartError as exc:
        log = ctx.scratch / "npu-ge-triton" / "tritonserver.log"
        tail = log.read_text(errors="replace").splitlines()[-20:] if log.is_file() else []
        return failed(
            say(
                "A disposable Triton for the npu_ge trial did not start: %(error)s",
                error=said(exc),
            ),
            say("Attach this report, with the log lines it holds, to a bug report."),
            **evidence,
            disposable_triton_log=tail,
        )
    outcome.evidence = {**evidence, "triton": "disposable", **outcome.evidence}
    return outcome


def _build_npu_ge(ctx: SelftestContext) -> tuple[ModelConfig, Path] | Outcome:
    """The npu_ge target's build of the demo and its config, as a worker makes them."""
    info = ctx.facts.info or inspect_onnx(ctx.demo.model)
    ctx.facts.info = info
    target = get_target("npu_ge")
    device = ctx.facts.device_ids[0] if ctx.facts.device_ids else 0
    # The ATC stage has compiled this model already; the pre-flight would repeat it.
    options = {"device_ids": str(device), "atc_preflight": False}
    workdir = ctx.scratch / "npu-ge-build"
    workdir.mkdir()
    try:
        result = target.build(
            BuildContext(
                source=ctx.demo.model, workdir=workdir, info=info, options=options,
                env=dict(ctx.env),
            )
        )  # fmt: skip
    except ModelStoreError as exc:
        return failed(
            say("The npu_ge target could not build the demo: %(error)s", error=exc.message),
            say("Attach this report to a bug report."),
        )
    built = result.compiled_info or info
    return target.make_config(NPU_GE_MODEL_NAME, built, options, 1), result.artifact


def same_top1(ctx: SelftestContext) -> Outcome:
    """Every path that classified the photo (pyACL per NPU, Triton per backend) agrees."""
    results = ctx.facts.classifications
    table = {where: result.top1 for where, result in results.items()}
    indices = {best.get("index") for best in table.values()}
    if len(indices) == 1 and None not in indices:
        best = next(iter(results.values()))
        return passed(
            say(
                "All %(count)s paths give the same top-1: %(label)s (%(index)s).",
                count=len(results),
                label=best.top1_label,
                index=best.top1.get("index"),
            ),
            top1=table,
        )
    shown = joined(
        [
            say("%(where)s: %(result)s", where=where, result=r.describe())
            for where, r in results.items()
        ],
        "; ",
    )
    return failed(
        say("The paths disagree: %(results)s.", results=shown),
        say(
            "The same OM gives different answers through pyACL and Triton: attach this report "
            "to a bug report."
        ),
        top1=table,
    )

"""The compile job's steps: validate -> compile -> verify -> package.

Each step is run by its own Celery task (workers/tasks/compile.py) and may run on another
worker host than the one before: what a step hands to the next lives in the job's work
directory on the shared store (``state.json``) and in the database, never in memory.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import socket
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.utils.translation import gettext_noop

from model_store.compile.atc.environment import cann_status
from model_store.config import lint, render_pbtxt
from model_store.errors import ModelStoreError
from model_store.inference import names_from_metadata
from model_store.memory_fit import activations_from_onnx
from model_store.onnx_info import MAX_PROTOBUF_BYTES, OnnxInfo, inspect_onnx
from model_store.store import ModelStore, link_or_copy, sha256_file
from model_store.targets import get_target
from model_store.targets.base import BuildContext
from model_store.text import Message, Said, as_json, from_json, joined, said, say
from model_store.uploads import human_bytes, unpack_bundle
from model_store.validate import validate_model
from model_store.verification_inputs import check_samples, sample_to_json
from model_store.verify import verify
from webapp.ops.routing import NoBuildHost, Route, build_route
from webapp.registry import job_state, jobs
from webapp.registry.db_outage import is_connection_error, retrying
from webapp.registry.models import Job, Version
from webapp.registry.node_builds import NodeBuildFailed, build_on_node
from webapp.registry.storage import get_store
from webapp.registry.verify_triton import should_try_triton, verify_through_triton

log = logging.getLogger(__name__)


class StepFailed(Exception):
    """A deterministic failure: recorded on the job, never retried."""

    def __init__(self, message: Said, code: str, *, cancelled: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.cancelled = cancelled


# --------------------------------------------------------------------------- helpers


def _check_free_space(store: ModelStore, need: int, what: Said) -> None:
    """Refuse a step before it writes when the store's disk would fall under its floor
    (``STORE_MIN_FREE_BYTES``, the one uploads keep too), with the numbers."""
    floor = settings.STORE_MIN_FREE_BYTES
    free = shutil.disk_usage(store.root).free
    if free - need < floor:
        raise StepFailed(
            say(
                "The store's disk has %(free)s free; %(what)s needs about %(need)s and "
                "%(floor)s must stay free. Nothing was kept: free space on the store's disk "
                "(or ask an administrator), then upload the file again.",
                free=human_bytes(free), what=what, need=human_bytes(need),
                floor=human_bytes(floor),
            ),
            "insufficient_storage",
        )  # fmt: skip


def _disk_full(store: ModelStore, step: str) -> Message:
    free = shutil.disk_usage(store.root).free
    return say(
        "The store's disk filled up during the %(step)s step (%(free)s free now, %(floor)s "
        "should stay free). Nothing was kept: free space on the store's disk (or ask an "
        "administrator), then upload the file again.",
        step=step, free=human_bytes(free), floor=human_bytes(settings.STORE_MIN_FREE_BYTES),
    )  # fmt: skip


def _check_cancel(job: Job) -> None:
    if Job.objects.filter(pk=job.pk, cancel_requested=True).exists():
        raise StepFailed(say("Cancelled on request."), "cancelled", cancelled=True)


def _jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return _jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def sample_arrays(version: Version) -> dict[str, np.ndarray]:
    """The uploader's sample as arrays of each input's own dtype (from the signature)."""
    dtypes = {t["name"]: t.get("numpy") for t in version.signature.get("inputs", [])}
    sample = version.verification_sample or {}
    try:
        return {name: np.asarray(value, dtype=dtypes.get(name)) for name, value in sample.items()}
    except (TypeError, ValueError) as exc:
        raise StepFailed(
            say("The verification sample is not numeric: %(error)s", error=str(exc)),
            "invalid_sample",
        ) from exc


def signature_of(info: OnnxInfo) -> dict[str, Any]:
    def tensors(items: Any) -> list[dict[str, Any]]:
        return [
            {"name": t.name, "dtype": t.triton_type, "numpy": t.numpy_dtype, "dims": t.dims}
            for t in items
        ]

    return {"inputs": tensors(info.inputs), "outputs": tensors(info.outputs)}


def summary_of(info: OnnxInfo) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "ir_version": info.ir_version,
        "opset": info.default_opset,
        "opset_imports": info.opset_imports,
        "producer": f"{info.producer_name} {info.producer_version}".strip(),
        "operators": dict(sorted(info.operators.items(), key=lambda kv: -kv[1])),
        "node_count": info.node_count,
        "parameter_count": info.parameter_count,
        "file_size": info.file_size,
        "sha256": info.sha256,
        "external_data_files": list(info.external_data_files),
    }
    # Class names an exporter left in the file, offered on Try it (read once, here).
    found = names_from_metadata(info.metadata_props)
    if found is not None:
        summary["class_names"] = found.to_dict()
    return summary


# --------------------------------------------------------------------------- steps


def _source_onnx(store: ModelStore, job: Job, version: Version) -> Path:
    """The version's source as an ``.onnx`` path in the job's work directory (a bundle is
    unpacked there with its external data files)."""
    work = job_state.work_dir(store, job)
    store.fresh_work_dir(job.uuid.hex, "source")
    source_dir = store.source_dir(job.model.name, version.number)
    if (source_dir / "bundle.zip").exists():
        jobs.log(job, "Unpacking the bundle (one .onnx with its external data files)…")
        return unpack_bundle(
            source_dir / "bundle.zip", work / "source", max_total_bytes=settings.UPLOAD_MAX_BYTES
        )
    onnx_path = work / "source" / "model.onnx"
    link_or_copy(source_dir / "model.onnx", onnx_path)
    return onnx_path


def run_validate(job: Job) -> None:
    version = _version(job)
    store = get_store()
    target = get_target(job.model.target)
    jobs.start_step(job, "validate", Version.Status.VALIDATING)
    _check_cancel(job)
    onnx_path = _source_onnx(store, job, version)
    jobs.log(job, f"Checking {version.source_filename} for target {target.name}…")
    report = validate_model(onnx_path, target, version.options)
    for finding in report.findings:
        level = "error" if finding.level == "error" else "warning"
        jobs.log(
            job,
            f"{finding.level.upper()} {finding.code}: {finding.message!s} {finding.advice!s}",
            level,
        )
    if report.info is not None:
        version.signature = signature_of(report.info)
        version.onnx_summary = summary_of(report.info)
        # Working memory per sample, for the memory estimate; done here, where parsing a large
        # model costs nobody a page load (model_store/memory_fit.py).
        version.onnx_summary["activations"] = activations_from_onnx(
            onnx_path, max_bytes=MAX_PROTOBUF_BYTES
        ).to_dict()
    if report.options is not None:
        # Keep the automatic values (batch size, input shape, ...) resolved from this model,
        # so every later step, and the page, see the same options.
        version.options = _jsonable(report.options)
    version.findings = [f.to_dict() for f in report.findings]
    version.save(update_fields=["signature", "onnx_summary", "findings", "options", "updated"])
    if not report.ok:
        errors = [f for f in report.findings if f.level == "error"]
        problems = [joined([p for p in (f.message, f.advice) if p]) for f in errors[:5]]
        raise StepFailed(
            say("The model did not pass validation: %(problems)s", problems=joined(problems)),
            "invalid_model",
        )
    if version.verification_sample is not None and report.info is not None:
        try:
            check_samples(report.info, [sample_arrays(version)])
        except ModelStoreError as exc:
            raise StepFailed(
                say("The verification sample does not fit the model: %(error)s", error=said(exc)),
                "invalid_sample",
            ) from exc
        jobs.log(job, "The supplied sample fits the model's inputs; it will be verified too.")
    job_state.update(store, job, onnx_path=str(onnx_path))
    warnings = sum(1 for f in report.findings if f.level == "warning")
    note = say("%(count)s warning(s)", count=warnings) if warnings else say("no problems found")
    jobs.finish_step(job, "validate", note, "warning" if warnings else "done")


def run_compile(job: Job) -> None:
    version = _version(job)
    store = get_store()
    target = get_target(job.model.target)
    jobs.start_step(job, "compile", Version.Status.COMPILING)
    _check_cancel(job)
    state = job_state.read(store, job)
    onnx_path = Path(state["onnx_path"])
    # The artifact and the intermediate models a build writes: about twice the source.
    source_bytes = sum(p.stat().st_size for p in onnx_path.parent.rglob("*") if p.is_file())
    _check_free_space(store, 2 * source_bytes, "compiling (twice the model's size)")
    route = _build_route(job, version)
    if route.node is not None:
        _compile_on_node(job, version, route, onnx_path)
        return
    build_dir = store.fresh_work_dir(job.uuid.hex, "build")
    cancelled = jobs.CancelCheck(job)
    ctx = BuildContext(
        source=onnx_path,
        workdir=build_dir,
        info=inspect_onnx(onnx_path),
        options=version.options,
        log=lambda line: jobs.log(job, line),
        progress=lambda f: jobs.set_progress(job, f),
        cancelled=cancelled,
        env=dict(os.environ),
    )
    result = target.build(ctx)
    if cancelled():
        raise StepFailed(say("Cancelled on request."), "cancelled", cancelled=True)
    for command in result.commands:
        jobs.add_command(job, command)
    for note in result.notes:
        jobs.log(job, note)
    job_state.update(store, job, artifact=str(result.artifact), artifact_name=result.artifact_name)
    if target.needs_cann:
        status = cann_status(ctx.env)
        _record_toolkit(job, version, status.version or "", status.ops_version or "")
    size = result.artifact.stat().st_size
    jobs.finish_step(
        job,
        "compile",
        say("%(artifact)s, %(size)s MB", artifact=result.artifact_name, size=f"{size / 1e6:.1f}"),
    )


def _build_route(job: Job, version: Version) -> Route:
    """This worker, or the node with the toolkit and NPUs the target needs (ops/routing.py)."""
    try:
        route = build_route(job.model.target, version.options)
    except NoBuildHost as exc:
        raise StepFailed(said(exc), exc.code) from None
    if route.node is None and get_target(job.model.target).needs_cann:
        jobs.log(job, f"Building on this worker: {route.why}.")
    return route


def _compile_on_node(job: Job, version: Version, route: Route, onnx_path: Path) -> None:
    samples = (
        [sample_to_json(sample_arrays(version))] if version.verification_sample is not None else []
    )
    try:
        answer = build_on_node(job, version, route, onnx_path, samples)
    except NodeBuildFailed as exc:
        raise StepFailed(said(exc), exc.code, cancelled=exc.cancelled) from None
    for command in answer["commands"]:
        jobs.add_command(job, command)
    for note in answer["notes"]:
        jobs.log(job, note)
    artifact = answer["artifact"]
    job_state.update(
        get_store(),
        job,
        artifact=str(artifact),
        artifact_name=answer["artifact_name"],
        built_on=route.node,
        node_verification=answer["verification"],
    )
    cann = answer["cann"]
    _record_toolkit(
        job, version, str(cann.get("version") or ""), str(cann.get("ops_version") or "")
    )
    size = artifact.stat().st_size
    jobs.finish_step(
        job,
        "compile",
        say(
            "%(artifact)s, %(size)s MB, on node %(node)s",
            artifact=answer["artifact_name"], size=f"{size / 1e6:.1f}", node=route.node,
        ),
    )  # fmt: skip


def _record_toolkit(job: Job, version: Version, cann: str, ops: str) -> None:
    """The CANN that built the artifact, kept on the version: an OM must not be served by an
    older CANN (docs/cann.md#version-compatibility; the publish gate compares the two)."""
    version.cann_version = cann[:40]
    version.cann_ops_version = ops[:40]
    retrying(lambda: version.save(update_fields=["cann_version", "cann_ops_version", "updated"]))
    if cann:
        ops_note = f" (operator package {ops})" if ops else ""
        jobs.log(job, f"Built with CANN {cann}{ops_note}.")
    else:
        jobs.log(job, "The CANN version of this toolkit is unknown; it cannot be compared with "
                 "the serving host's before publishing.", "warning")  # fmt: skip


def run_verify(job: Job) -> None:
    version = _version(job)
    store = get_store()
    jobs.start_step(job, "verify", Version.Status.VERIFYING)
    _check_cancel(job)
    state = job_state.read(store, job)
    artifact = Path(state["artifact"])
    source = Path(state["onnx_path"])
    plan = get_target(job.model.target).verify_plan(version.options, inspect_onnx(source))
    jobs.log(
        job,
        f"Running the source and the {plan.artifact_kind.upper()} artifact on the same inputs "
        f"({plan.precision} tolerances)…",
    )
    if isinstance(state.get("node_verification"), dict):
        # Verified on the node that built it, on its NPU (webapp/registry/node_builds.py).
        _record_verification(job, version, plan.note, state["node_verification"])
        return
    samples = [sample_arrays(version)] if version.verification_sample is not None else None
    report = verify(
        source,
        artifact,
        plan.artifact_kind,
        precision=plan.precision,
        samples=samples,
        batch=plan.batch,
        input_shapes=plan.input_shapes,
        device_id=plan.device_id,
    )
    data = report.to_dict()
    if should_try_triton(plan, report):
        # The worker cannot execute it (no pyACL or no NPU here): the serving Triton may.
        jobs.log(job, f"Not run on this worker: {report.reason!s}", "warning")
        data = verify_through_triton(job, version, plan, source, artifact, samples, report)
    _record_verification(job, version, plan.note, data)


def _record_verification(job: Job, version: Version, note: Said, data: dict[str, Any]) -> None:
    if note:
        data["note"] = as_json(note)
    version.verification = data
    version.save(update_fields=["verification", "updated"])
    for output in data.get("outputs", []):
        jobs.log(
            job,
            f"{output['name']}: max abs {output.get('max_abs')}, cosine {output.get('cosine')}, "
            f"{'pass' if output.get('passed') else 'FAIL'}",
        )
    status = data["status"]
    if status == "passed":
        jobs.finish_step(job, "verify", _passed(data))
    elif status == "not_run":
        reason = from_json(data.get("reason"))
        jobs.log(job, f"Not verified: {reason!s}", "warning")
        jobs.finish_step(job, "verify", say("not run: %(reason)s", reason=reason), "warning")
    else:
        jobs.log(
            job,
            "Verification FAILED: this version cannot be published unless an admin overrides it.",
            "error",
        )
        jobs.finish_step(job, "verify", say("failed; publishing is blocked"), "warning")


def _passed(data: dict[str, Any]) -> Message:
    """The verify step's message for a pass: where it ran (through Triton, on a node)."""
    triton, node = data.get("via") == "triton", data.get("node")
    if triton and node:
        return say("passed through Triton on node %(node)s", node=node)
    if node:
        return say("passed on node %(node)s", node=node)
    return say("passed through Triton") if triton else say("passed")


def run_reuse(job: Job) -> None:
    """A config revision that keeps the artifact (model_store.targets.revise): hand the
    original's packaged file, checked against its recorded SHA-256, and its verification to
    the package step. Nothing is rebuilt: the bytes are the same, so what was measured holds."""
    version = _version(job)
    store = get_store()
    jobs.start_step(job, "reuse", Version.Status.PACKAGING)
    _check_cancel(job)
    original = version.revision_of
    if original is None or original.status != Version.Status.READY or not original.artifact_name:
        raise StepFailed(
            say(
                "The version this revises is gone or no longer packaged, so there is no "
                "artifact to reuse. Revise a packaged version instead."
            ),
            "original_gone",
        )
    name, number = job.model.name, original.number
    artifact = store.package_dir(name, number) / str(number) / original.artifact_name
    if not artifact.is_file():
        raise StepFailed(
            say(
                "Version %(number)s's packaged %(artifact)s is missing from the store; nothing "
                "was reused. Upload the model again (or restore the store).",
                number=number, artifact=original.artifact_name,
            ),
            "package_missing",
        )  # fmt: skip
    digest = sha256_file(artifact)
    if digest != original.artifact_sha256:
        raise StepFailed(
            say(
                "Version %(number)s's %(artifact)s on disk is not the file that was verified "
                "(SHA-256 %(found)s… instead of %(expected)s…); it is not reused. Check the "
                "store's disk, then upload the model again.",
                number=number, artifact=original.artifact_name, found=digest[:12],
                expected=original.artifact_sha256[:12],
            ),
            "artifact_changed",
        )  # fmt: skip
    onnx_path = _source_onnx(store, job, version)
    job_state.update(
        store, job, artifact=str(artifact), artifact_name=original.artifact_name,
        onnx_path=str(onnx_path),
    )  # fmt: skip
    verification = dict(original.verification or {"status": "not_run"})
    verification["reused_from"] = number
    note = say(
        "The artifact is version %(number)s's, byte for byte (SHA-256 checked); its "
        "verification holds. Only config.pbtxt changed.",
        number=number,
    )
    verification["note"] = note.to_json()
    version.verification = verification
    version.cann_version = original.cann_version
    version.cann_ops_version = original.cann_ops_version
    retrying(
        lambda: version.save(
            update_fields=[
                "verification",
                "cann_version",
                "cann_ops_version",
                "findings",
                "updated",
            ]
        )
    )
    jobs.log(
        job,
        f"Reusing version {number}'s {original.artifact_name} (SHA-256 {digest[:12]}… checked) "
        f"and its verification ({verification.get('status')}); no compile needed.",
    )
    jobs.finish_step(
        job,
        "reuse",
        say(
            "%(artifact)s of v%(number)s, SHA-256 checked",
            artifact=original.artifact_name, number=number,
        ),
    )  # fmt: skip


def run_package(job: Job) -> None:
    version = _version(job)
    store = get_store()
    target = get_target(job.model.target)
    jobs.start_step(job, "package", Version.Status.PACKAGING)
    _check_cancel(job)
    state = job_state.read(store, job)
    artifact = Path(state["artifact"])
    name, number = job.model.name, version.number
    info = (
        inspect_onnx(artifact)
        if artifact.suffix == ".onnx"
        else inspect_onnx(Path(state["onnx_path"]))
    )
    _remove_unfinished_package(store, job, version)
    config = target.make_config(name, info, version.options, number)
    problems = lint(config)
    if problems:
        raise StepFailed(
            say(
                "The generated config.pbtxt is not valid: %(problems)s",
                problems=joined(problems, "; "),
            ),
            "invalid_config",
        )
    text = render_pbtxt(config)
    files = {state["artifact_name"]: artifact}
    files |= {f: artifact.parent / f for f in _external_files(artifact)}
    _check_free_space(
        store, sum(f.stat().st_size for f in files.values()), "packaging the artifact"
    )
    store.package_version(
        name, number, files=files, config_text=text, install=target.versions_side_by_side
    )
    version.config_pbtxt = text
    version.artifact_name = state["artifact_name"]
    version.artifact_sha256 = sha256_file(artifact)
    version.artifact_size = artifact.stat().st_size
    version.status = Version.Status.READY
    version.error = ""
    retrying(version.save)
    jobs.log(job, f"Packaged as {name}/{number}/{version.artifact_name} with its config.pbtxt.")
    jobs.finish_step(job, "package", say("config.pbtxt generated and linted"))
    verification_status = (version.verification or {}).get("status", "not run")
    retrying(
        lambda: jobs.record_event(
            model=job.model,
            version=version,
            job=job,
            kind="version.packaged",
            actor=job.created_by,
            message=say(
                "Version %(number)s packaged (verification %(status)s).",
                number=number, status=jobs.verification_word(verification_status),
            ),
            data={"artifact_sha256": version.artifact_sha256},
        )
    )  # fmt: skip
    store.remove_work_dir(job.uuid.hex)
    jobs.succeed(job, "packaged")
    if (job.params or {}).get("serve_when_packaged"):
        _serve_now(job, version)


def _serve_now(job: Job, version: Version) -> None:
    """Queue the switch a compile job was asked to end with; say why when it cannot."""
    from webapp.errors import HubError
    from webapp.registry.actions.serving import request_switch

    if job.created_by is None:
        return
    try:
        switch = request_switch(
            model=job.model,
            number=version.number,
            user=job.created_by,
            reason=say("serve as soon as packaged (requested with the upload)"),
        )
    except HubError as exc:
        jobs.log(job, f"Not served automatically: {exc.message!s}", "warning")
        return
    jobs.log(job, f"Serving v{version.number}: switch job {switch.uuid}.")


STEPS = {
    "validate": run_validate,
    "compile": run_compile,
    "verify": run_verify,
    "reuse": run_reuse,
    "package": run_package,
}


def run_step(step: str, job_id: int) -> bool:
    """Run one step; record any failure. Returns False when the chain must stop."""
    job = Job.objects.select_related("model", "version").get(pk=job_id)
    if job.is_finished:
        return False
    try:
        STEPS[step](job)
        return True
    except StepFailed as exc:
        _record_failure(job, exc.message, exc.code, cancelled=exc.cancelled)
    except ModelStoreError as exc:
        code = getattr(exc, "code", "failed")
        _record_failure(job, said(exc), code, cancelled=code == "cancelled")
    except (
        Exception
    ) as exc:  # a bug or an environment problem: say so, keep the traceback in the log
        if is_connection_error(exc):
            # The database went away (a restart): nothing can be recorded now. The task runs
            # this step again once it is back (workers/tasks/compile.py); the step starts over.
            log.warning("compile step %s of job %s lost the database: %s", step, job.uuid, exc)
            raise
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            _record_failure(job, _disk_full(get_store(), step), "insufficient_storage")
            return False
        log.exception("compile step %s of job %s crashed", step, job.uuid)
        _record_failure(
            job,
            say(
                "Unexpected error in %(step)s: %(error)s. The worker log has details.",
                step=step, error=str(exc),
            ),
            "internal_error",
        )  # fmt: skip
    return False


def record_timeout(job_id: int, step: str) -> None:
    job = Job.objects.select_related("model").get(pk=job_id)
    _record_failure(
        job, say("The %(step)s step ran past its time limit and was stopped.", step=step), "timeout"
    )


def record_database_lost(job_id: int, step: str, exc: BaseException) -> None:
    """The database stayed away through every retry of a step: fail the job if it can be."""
    job = retrying(lambda: Job.objects.select_related("model", "version").get(pk=job_id))
    _record_failure(
        job,
        say(
            "The %(step)s step lost the database connection and it did not come back in time "
            "(%(error)s). Nothing was kept; upload the file again to retry.",
            step=step, error=str(exc),
        ),
        "database_unavailable",
    )  # fmt: skip


def _record_failure(job: Job, message: Said, code: str, *, cancelled: bool = False) -> None:
    # Clean up before announcing the end, so whoever sees "failed" also sees no leftovers.
    store = get_store()
    store.remove_work_dir(job.uuid.hex)
    if job.version is not None:
        _remove_unfinished_package(store, job, job.version)
    jobs.log(job, message, "error")
    jobs.fail(job, message, code, cancelled=cancelled)


def _remove_unfinished_package(store: ModelStore, job: Job, version: Version) -> None:
    """What an interrupted package step left (the version never became READY): its package
    and its repository directory, so that no half-built version stays and the step can start
    over. A READY version's files are never touched."""
    retrying(lambda: version.refresh_from_db(fields=["status"]))
    if version.status == Version.Status.READY:
        return
    name, number = job.model.name, version.number
    shutil.rmtree(store.package_dir(name, number), ignore_errors=True)
    side_by_side = get_target(job.model.target).versions_side_by_side
    if side_by_side and store.version_dir(name, number).is_dir():
        store.remove_version(name, number)


def fail_interrupted_compiles() -> list[Message]:
    """Compile jobs whose step is "running" in a process of this host that is gone (a killed
    or restarted worker): failed with the reason; their scratch files and any half-built
    package are removed. Called by reconcile (each worker start sends one)."""
    import psutil

    host = socket.gethostname()
    repairs = []
    # Adopt jobs copy files into a version the same way (one version, whole or absent).
    retry = {
        Job.Kind.COMPILE: gettext_noop(
            "The worker stopped in the middle of the %(step)s step (it was killed or "
            "restarted); nothing was kept. Upload the file again to retry."
        ),
        Job.Kind.ADOPT: gettext_noop(
            "The worker stopped in the middle of the %(step)s step (it was killed or "
            "restarted); nothing was kept. Adopt again to retry."
        ),
        # Its trials are recorded one by one; the loaded one is removed below (tuning.py).
        Job.Kind.TUNE: gettext_noop(
            "The worker stopped in the middle of the %(step)s step (it was killed or "
            "restarted); the trials measured so far are kept. Start the search again to retry."
        ),
    }
    running = Job.objects.filter(kind__in=list(retry), state=Job.State.RUNNING)
    for job in running.select_related("model", "version"):
        runner = (job.params or {}).get("runner") or {}
        step_running = any(s.get("state") == "running" for s in job.steps)
        if runner.get("host") != host or not step_running or _alive(runner, psutil):
            continue
        # The template is one of the marked sentences above (a variable, so say() is told
        # by Message directly; gettext_noop put each in the catalogue).
        message = Message(retry[Job.Kind(job.kind)], {"step": job.step})
        _record_failure(job, message, "interrupted")
        if job.kind == Job.Kind.ADOPT and job.version is not None:
            # A failed adopted version is adopted again next time (webapp.registry.adopt).
            Version.objects.filter(pk=job.version.pk).update(
                status=Version.Status.FAILED, error=message
            )
        values = {"model": job.model.name, "job": str(job.uuid)}
        if job.kind == Job.Kind.ADOPT:
            said = say("%(model)s: marked the interrupted adopt job %(job)s failed.", **values)
        elif job.kind == Job.Kind.TUNE:
            said = say("%(model)s: marked the interrupted tune job %(job)s failed.", **values)
        else:
            said = say("%(model)s: marked the interrupted compile job %(job)s failed.", **values)
        repairs.append(said)
    return repairs


def _alive(runner: dict[str, Any], psutil: Any) -> bool:
    try:
        process = psutil.Process(int(runner["pid"]))
        started = process.create_time()
        zombie = process.status() == psutil.STATUS_ZOMBIE
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False
    # The same pid with another start time is another process (pids are reused).
    return not zombie and abs(started - float(runner.get("since") or 0)) < 0.5


def _version(job: Job) -> Version:
    assert job.version is not None
    return job.version


def _external_files(artifact: Path) -> list[str]:
    if artifact.suffix != ".onnx":
        return []
    return list(inspect_onnx(artifact).external_data_files)

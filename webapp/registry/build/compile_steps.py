"""The compile job's first two steps: validate the uploaded ONNX file (and the uploader's
sample) for the model's target, then compile it, on this worker or on the node with the
toolkit and NPUs the target needs.

Validate records what it read of the file (its signature and summary); adopting a repository
records the same (webapp/registry/catalogue/adopt_work.py).
"""

from __future__ import annotations

import os
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from model_store.compile.atc.environment import cann_status
from model_store.errors import ModelStoreError
from model_store.inference import names_from_metadata
from model_store.memory_fit import activations_from_onnx
from model_store.onnx_info import MAX_PROTOBUF_BYTES, OnnxInfo, inspect_onnx
from model_store.targets import get_target
from model_store.targets.base import BuildContext
from model_store.text import joined, said, say
from model_store.validate import validate_model
from model_store.verification_inputs import check_samples, sample_to_json
from webapp.nodes.build_routing import NoBuildHost, Route, build_route
from webapp.registry.build import state_file as job_state
from webapp.registry.build.common import (
    StepFailed,
    check_cancel,
    check_free_space,
    sample_arrays,
    source_onnx,
    version_of,
)
from webapp.registry.build.node_builds import NodeBuildFailed, build_on_node
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.db_outage import retrying
from webapp.registry.jobs.models import Job
from webapp.registry.quantize.build import run_quantize_compile


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


def run_validate(job: Job) -> None:
    version = version_of(job)
    store = get_store()
    target = get_target(job.model.target)
    jobs.start_step(job, "validate", Version.Status.VALIDATING)
    check_cancel(job)
    onnx_path = source_onnx(store, job, version)
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
    version = version_of(job)
    store = get_store()
    target = get_target(job.model.target)
    jobs.start_step(job, "compile", Version.Status.COMPILING)
    check_cancel(job)
    state = job_state.read(store, job)
    onnx_path = Path(state["onnx_path"])
    if job.params.get("quantize"):
        run_quantize_compile(job, version, onnx_path)
        return
    # The artifact and the intermediate models a build writes: about twice the source.
    source_bytes = sum(p.stat().st_size for p in onnx_path.parent.rglob("*") if p.is_file())
    check_free_space(store, 2 * source_bytes, "compiling (twice the model's size)")
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

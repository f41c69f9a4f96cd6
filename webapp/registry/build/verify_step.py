"""The compile job's verify step: the source and the built artifact run on the same inputs, on
this worker or through the serving Triton (or as the node that built it reported), and the
report is kept on the version. Publishing is blocked when it fails.

Apart from building and packaging: it only reads the files they leave and records a report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model_store.onnx_info import inspect_onnx
from model_store.targets import get_target
from model_store.text import Message, Said, as_json, from_json, say
from model_store.verification_inputs import VerificationInputError, check_samples
from model_store.verify import verify
from webapp.registry.build import state_file as job_state
from webapp.registry.build.common import check_cancel, sample_arrays, version_of
from webapp.registry.build.verify_triton import should_try_triton, verify_through_triton
from webapp.registry.capture.actions import recent_inputs
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.quantize.build import held_out_items


def run_verify(job: Job) -> None:
    version = version_of(job)
    store = get_store()
    jobs.start_step(job, "verify", Version.Status.VERIFYING)
    check_cancel(job)
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
        # Verified on the node that built it, on its NPU (webapp/registry/build/node_builds.py).
        _record_verification(job, version, plan.note, state["node_verification"])
        return
    if state.get("held_out"):
        _verify_quantized(job, version, plan.note, source, artifact, state)
        return
    uploaded = [sample_arrays(version)] if version.verification_sample is not None else []
    captured = captured_samples(version, source, plan.input_shapes)
    if captured:
        jobs.log(
            job,
            f"Also running on {len(captured)} captured requests (captures "
            f"{', '.join(str(pk) for pk, _ in captured)}).",
        )
    samples = uploaded + [inputs for _, inputs in captured] or None
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
    data["inputs"] = {
        "uploaded": len(uploaded),
        "captured": len(captured),
        "capture_ids": [pk for pk, _ in captured],
    }
    _record_verification(job, version, plan.note, data)


def _verify_quantized(
    job: Job, version: Version, note: Said, source: Path, artifact: Path, state: dict[str, Any]
) -> None:
    """An INT8 model against its FP32 source, on the held-out inputs only: random inputs say
    nothing about a model calibrated on real ones, and the calibration inputs would flatter it."""
    samples = held_out_items(Path(state["held_out"]))
    jobs.log(
        job,
        f"Checking INT8 against the FP32 source on {len(samples)} held-out inputs (never used "
        "to calibrate), with the int8 tolerances…",
    )
    report = verify(
        source, artifact, "onnx", precision="int8", samples=samples, random_samples=0, batch=1
    )
    data = report.to_dict()
    data["inputs"] = {
        "held_out": len(samples),
        "held_out_ids": state.get("held_out_ids", []),
        "source": (version.quantization or {}).get("calibration", {}).get("source"),
    }
    _record_verification(job, version, note, data)


#: How many of the model's newest captured requests a verification runs on besides the rest.
CAPTURED_SAMPLES = 8


def captured_samples(
    version: Version, source: Path, shapes: dict[str, list[int]] | None
) -> list[tuple[int, dict[str, Any]]]:
    """The model's newest captured inputs that fit this version's source, and the artifact's
    fixed input shapes when it has them (an OM built for batch 1 takes batch 1 only)."""
    info = inspect_onnx(source)

    def fits(inputs: dict[str, Any]) -> bool:
        if shapes and any(
            list(inputs[n].shape) != list(s) for n, s in shapes.items() if n in inputs
        ):
            return False
        try:
            check_samples(info, [inputs])
        except VerificationInputError:
            return False
        return True

    return recent_inputs(version.model, fits, CAPTURED_SAMPLES)


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

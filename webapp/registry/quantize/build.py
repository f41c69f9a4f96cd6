"""The compile step of a quantisation job: read the chosen inputs, keep the newest aside for
the check, calibrate ONNX Runtime's static INT8 quantisation on the rest, and leave the INT8
model where the package step takes it.

The held-out inputs go to a file in the job's work directory; the verify step runs the FP32
source and the INT8 model on them only (``webapp/registry/build/verify_step.py``), so the
check never sees an input the calibration saw.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from model_store.onnx_info import inspect_onnx
from model_store.quantize import Plan, QuantizeRefused, quantize, split
from model_store.text import say
from model_store.verification_inputs import VerificationInputError, check_samples
from webapp.registry.build import state_file as job_state
from webapp.registry.build.common import StepFailed, check_cancel, check_free_space
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.db_outage import retrying
from webapp.registry.jobs.models import Job
from webapp.registry.quantize import calibration

ARTIFACT = "model.onnx"
HELD_OUT_FILE = "held_out.npz"


def run_quantize_compile(job: Job, version: Version, onnx_path: Path) -> None:
    """Quantise ``onnx_path`` (the FP32 source) as the job's params say.

    Raises:
        StepFailed: Too few inputs are left (some were removed since the request), or ONNX
            Runtime refused or failed; the message says which.
    """
    store = get_store()
    params = job.params["quantize"]
    chosen = calibration.Chosen.from_params(params["chosen"])
    source_bytes = sum(p.stat().st_size for p in onnx_path.parent.rglob("*") if p.is_file())
    check_free_space(store, 2 * source_bytes, say("quantising (twice the model's size)"))
    info = inspect_onnx(onnx_path)
    items: list[tuple[int, dict[str, np.ndarray]]] = []
    for item_id, inputs in calibration.load(version, chosen):
        try:
            check_samples(info, [inputs])
        except VerificationInputError:
            continue  # a capture of another signature: not this model's input
        items.append((item_id, inputs))
    jobs.log(job, f"Read {len(items)} of the {len(chosen.ids)} chosen inputs ({chosen.source}).")
    try:
        calibrate, held_out = split(len(items))
    except QuantizeRefused as exc:
        raise StepFailed(
            say("Too few inputs are left since the request: %(why)s", why=exc.message),
            exc.code,
        ) from None
    plan = Plan(
        calibration=params["plan"]["calibrate_method"],
        activations=params["plan"]["activations"],
        per_channel=bool(params["plan"]["per_channel"]),
        exclude_nodes=tuple(params["plan"]["exclude_nodes"]),
    )
    jobs.log(
        job,
        f"Calibrating INT8 (ONNX Runtime static, QDQ, {plan.calibration}, activations "
        f"{plan.activations}, weights per {'channel' if plan.per_channel else 'tensor'}) on "
        f"{len(calibrate)} inputs; {len(held_out)} newer ones are kept aside for the check.",
    )
    if plan.exclude_nodes:
        jobs.log(job, f"Left in float: {', '.join(plan.exclude_nodes)}.")
    check_cancel(job)
    build_dir = store.fresh_work_dir(job.uuid.hex, "build")
    jobs.set_progress(job, 0.1)
    try:
        result = quantize(onnx_path, build_dir / ARTIFACT, [items[i][1] for i in calibrate], plan)
    except QuantizeRefused as exc:
        raise StepFailed(exc.message, exc.code) from None
    except Exception as exc:  # ONNX Runtime's own failure, said in its words
        raise StepFailed(
            say("ONNX Runtime could not quantise the model: %(error)s", error=str(exc)[:500]),
            "quantize_failed",
        ) from None
    if result.weights == "uint8":
        jobs.log(
            job,
            "Activations and weights in uint8 (U8U8): this CPU multiplies int8 without VNNI, "
            "where ONNX Runtime's U8S8 kernels can saturate.",
        )
    check_cancel(job)
    held_path = job_state.work_dir(store, job) / HELD_OUT_FILE
    _save_items(held_path, [items[i][1] for i in held_out])
    calibration_ids = [items[i][0] for i in calibrate]
    held_out_ids = [items[i][0] for i in held_out]
    job_state.update(
        store, job, artifact=str(result.path), artifact_name=ARTIFACT,
        held_out=str(held_path), held_out_ids=held_out_ids,
    )  # fmt: skip
    record = dict(version.quantization or {})
    record["result"] = result.to_dict() | {
        "calibration_ids": calibration_ids,
        "held_out_ids": held_out_ids,
    }
    version.quantization = record
    retrying(lambda: version.save(update_fields=["quantization", "updated"]))
    jobs.log(
        job,
        "The INT8 model is quantised from the FP32 source; simplification and offline "
        "optimisation are not applied to it (ONNX Runtime fuses the QDQ pairs when it loads it).",
    )
    jobs.finish_step(
        job,
        "compile",
        say(
            "INT8 %(artifact)s, %(size)s MB (FP32: %(source)s MB), calibrated on %(count)s "
            "inputs in %(seconds)s s",
            artifact=ARTIFACT,
            size=f"{result.quantized_bytes / 1e6:.1f}",
            source=f"{result.source_bytes / 1e6:.1f}",
            count=len(calibrate),
            seconds=f"{result.seconds:.0f}",
        ),
    )


def _save_items(path: Path, items: list[dict[str, np.ndarray]]) -> None:
    """``item<k>.<input>`` per array: the inputs keep their own shapes, one file."""
    arrays = {
        f"item{k}.{name}": array for k, inputs in enumerate(items) for name, array in inputs.items()
    }
    with path.open("wb") as fh:
        np.savez(fh, **arrays)


def held_out_items(path: Path) -> list[dict[str, np.ndarray]]:
    """What :func:`_save_items` wrote, in order."""
    found: dict[int, dict[str, Any]] = {}
    with np.load(path, allow_pickle=False) as data:
        for key in data.files:
            item, _, name = key.partition(".")
            found.setdefault(int(item.removeprefix("item")), {})[name] = data[key]
    return [found[k] for k in sorted(found)]

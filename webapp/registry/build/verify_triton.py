"""Verification through the Triton that will serve a version, when the worker cannot run it.

An OM needs pyACL and an NPU; in the compose set-up the worker has neither, the Triton on the
Ascend host has both. Then the candidate is loaded into that Triton under a temporary name
beside the serving model (:func:`model_store.serving.trial_model`), the same inputs run through
it, the outputs are compared with the ONNX reference by the same rules
(:func:`model_store.verify.verify_with`), and it is unloaded again. When that Triton cannot
load it either (no acl backend or no pyACL there), the result stays "not_run" with both reasons.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from model_store.errors import ModelStoreError
from model_store.onnx_info import inspect_onnx
from model_store.runtime.errors import TritonRuntimeError
from model_store.serving import TrialLoadFailed
from model_store.targets import get_target
from model_store.targets.base import VerifyPlan
from model_store.text import Said, as_json, say
from model_store.verification_report import VerificationReport
from model_store.verify_in_triton import VERIFY_TRIAL_TIMEOUT_S, verify_in_trial
from webapp.ops.triton import get_runtime
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job


def should_try_triton(plan: VerifyPlan, report: VerificationReport) -> bool:
    """An OM the worker could not execute: the serving Triton may be able to."""
    return plan.artifact_kind == "om" and report.status == "not_run"


def verify_through_triton(
    job: Job,
    version: Version,
    plan: VerifyPlan,
    source: Path,
    artifact: Path,
    samples: list[dict[str, np.ndarray]] | None,
    direct: VerificationReport,
) -> dict[str, Any]:
    """The verification JSON after trying Triton; ``direct`` is the worker's "not_run" report.

    Keys added: ``via`` (``"triton"`` when it ran there), ``trial_model`` (the temporary
    name), ``worker_reason`` (why the worker could not run it), and ``triton_reason`` when
    Triton could not either.
    """
    runtime = get_runtime(timeout=VERIFY_TRIAL_TIMEOUT_S)
    try:
        live = runtime.is_live()
    except TritonRuntimeError:
        live = False
    if not live:
        return _fallback(
            direct,
            say("the serving Triton is not reachable from this worker"),
            say("%(reason)s The serving Triton was not reachable to verify it there.",
                reason=direct.reason),
        )  # fmt: skip
    name, number = job.model.name, version.number
    cfg = get_target(job.model.target).make_config(
        name, inspect_onnx(source), version.options, number
    )
    try:
        report, trial = verify_in_trial(
            get_store(), runtime, cfg, source, artifact, plan, samples, version=number,
            log=lambda line: jobs.log(job, line), timeout_s=VERIFY_TRIAL_TIMEOUT_S,
        )  # fmt: skip
    except TrialLoadFailed as exc:
        return _fallback(
            direct,
            exc.message,
            say("%(reason)s The serving Triton could not load it either: %(error)s",
                reason=direct.reason, error=exc.message),
        )  # fmt: skip
    except (ModelStoreError, TritonRuntimeError) as exc:
        error = exc.message if isinstance(exc, ModelStoreError) else str(exc)
        return _fallback(
            direct,
            error,
            say("%(reason)s Verifying it through the serving Triton failed: %(error)s",
                reason=direct.reason, error=error),
        )  # fmt: skip
    return report.to_dict() | {"trial_model": trial, "worker_reason": as_json(direct.reason)}


def _fallback(direct: VerificationReport, triton_reason: Said, reason: Said) -> dict[str, Any]:
    """The worker's own report, with why Triton could not verify it either (the new reason
    replaces the worker's, which is kept as ``worker_reason``)."""
    return direct.to_dict() | as_json(
        {"worker_reason": direct.reason, "triton_reason": triton_reason, "reason": reason}
    )

"""Verification inside the Triton that holds the NPU: the candidate loaded as a trial model.

An OM needs pyACL and an NPU. Where the worker leaves the NPU to Triton (``WORKER_NPU``,
:mod:`model_store.ascend.npu_owner`) or has no pyACL, the candidate is loaded into the serving
Triton under a temporary name beside what it serves (:func:`model_store.serving.trial_model`),
the same inputs run through it, the outputs are compared with the ONNX reference by the same
rules (:func:`model_store.verify.verify_with`), and it is unloaded again. The hub's worker
(webapp/registry/build/verify_triton.py) and a node's worker (workers/node/building.py) both
use it; it is Django-free.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from model_store.config import ModelConfig
from model_store.serving import trial_model
from model_store.serving.triton_index import ServingRuntime
from model_store.store import ModelStore
from model_store.targets.base import VerifyPlan
from model_store.verification_report import VerificationReport
from model_store.verify import VIA_TRITON, verify_with

#: How long Triton may take to load the candidate (the acl backend loads an OM in seconds;
#: the bound only stops a hung load from holding the verify step).
VERIFY_TRIAL_TIMEOUT_S = 300.0


def verify_in_trial(
    store: ModelStore,
    runtime: ServingRuntime,
    cfg: ModelConfig,
    source: Path,
    artifact: Path,
    plan: VerifyPlan,
    samples: list[dict[str, np.ndarray]] | None,
    *,
    version: int,
    log: Callable[[str], None] = lambda line: None,
    timeout_s: float = VERIFY_TRIAL_TIMEOUT_S,
) -> tuple[VerificationReport, str]:
    """``(report, trial name)``: ``artifact`` with ``cfg`` verified through ``runtime``.

    Raises:
        TrialLoadFailed: Triton could not load the candidate.
        ModelStoreError, TritonRuntimeError: a request or the comparison's inputs failed.
    """
    log("Loading the candidate into the serving Triton under a temporary name…")
    with trial_model(
        store, runtime, cfg, [artifact], version=version, timeout_s=timeout_s
    ) as trial:
        log(f"{trial} is READY beside the serving model; running the inputs.")

        def through_triton(sample: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            answer: dict[str, np.ndarray] = runtime.infer(  # type: ignore[attr-defined]
                trial, dict(sample), version=str(version)
            )
            return answer

        report = verify_with(
            source, through_triton, precision=plan.precision, via=VIA_TRITON,
            samples=samples, batch=plan.batch, input_shapes=plan.input_shapes,
        )  # fmt: skip
    log(f"{trial} unloaded and removed.")
    return report, trial

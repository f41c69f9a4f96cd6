"""Does the built artifact compute what the uploaded model computes? Measured, not assumed.

:func:`verify` runs the source ONNX (ONNX Runtime, CPU) and the artifact on
the same inputs and compares every output: largest absolute and relative
error, cosine similarity and, for classifier-like outputs, top-1/top-k
agreement. Pass or fail follows :data:`TOLERANCES` for the precision the
artifact was built in. An OM is run through pyACL when this worker has it and an
NPU; otherwise the report says "not_run" and why (never "failed": the artifact
was not at fault). :func:`verify_with` compares any other way of running the
artifact on the same inputs with the same rules, e.g. through the Triton that
will serve it (``webapp.registry.build.verify_triton``). It never reports a pass it
did not measure; ``via`` in the report says where the artifact ran.

This module runs the two models. The pass criteria and the comparison maths are in
:mod:`model_store.verification_compare`, the report's dataclasses in
:mod:`model_store.verification_report`.

Example:
    >>> report = verify(Path("src.onnx"), Path("work/model.onnx"), "onnx", precision="fp32")
    >>> report.status, report.outputs[0].cosine
    ('passed', 1.0)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from model_store.ascend.npu_owner import why_not_here, worker_runs_pyacl
from model_store.errors import ModelStoreError
from model_store.onnx_info import inspect_onnx
from model_store.text import Said, joined, say
from model_store.verification_compare import TOLERANCES, compare_output
from model_store.verification_inputs import (
    Sample,
    VerificationInputError,
    check_samples,
    random_inputs,
)
from model_store.verification_report import VerificationReport

Precision = Literal["fp32", "fp16", "mixed", "int8"]
OmRunner = Callable[[Path, dict[str, np.ndarray]], dict[str, np.ndarray]]
#: Runs the artifact on one sample; outputs keyed by the source's output names (or in order).
ArtifactRunner = Callable[[Sample], dict[str, np.ndarray]]

#: Where the artifact ran, for the report's ``via``.
VIA_CPU = "worker_cpu"  # ONNX Runtime on the worker
VIA_NPU = "worker_npu"  # pyACL on the worker's NPU
VIA_TRITON = "triton"  # a temporary model on the Triton that will serve the version


class ArtifactNotRunnable(ModelStoreError):
    """The artifact cannot be executed here (no pyACL, no NPU): verification is "not run"."""

    code = "artifact_not_runnable"


# Entry point ---------------------------------------------------------------------------


def verify(
    source: Path,
    artifact: Path,
    artifact_kind: Literal["onnx", "om"],
    *,
    precision: Precision,
    samples: list[dict[str, np.ndarray]] | None = None,
    random_samples: int = 4,
    seed: int = 0,
    batch: int = 1,
    top_k: int = 5,
    runner_for_om: OmRunner | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dim_sizes: Mapping[str, int] | None = None,
    device_id: int = 0,
) -> VerificationReport:
    """Compares the artifact's outputs with the source's on the same inputs.

    Args:
        source: The uploaded ONNX (external data beside it).
        artifact: The built ``model.onnx`` or ``model.om``.
        artifact_kind: ``"onnx"`` (run with ONNX Runtime) or ``"om"`` (pyACL).
        precision: Which :data:`TOLERANCES` apply: how the artifact was built.
        samples: Optional user inputs, each a dict input name -> array of the
            model's dtype and shape (batch axis included); checked first.
        random_samples: How many random samples to add (reproducible by ``seed``).
        seed: Seed of the random generator.
        batch: Size of a dynamic first axis in random samples.
        top_k: k for top-k agreement on rank-2 float outputs.
        runner_for_om: ``run(path, inputs) -> outputs`` for OMs; default
            ``model_store.ascend.om_runner.run_om`` when pyACL is available.
        input_shapes: Full input shapes to use for random samples (for
            artifacts compiled with fixed shapes); ``-1`` keeps the signature's dim.
        dim_sizes: Sizes for named dynamic dims (``{"seq": 128}``).
        device_id: The NPU the default OM runner uses: the one the version serves on.

    Returns:
        The report. Slow for big models: both models are loaded and run
        ``samples_used`` times. "not_run" (with the reason) when an OM cannot be
        executed here: no pyACL, or pyACL cannot use an NPU.

    Raises:
        VerificationInputError: If samples do not fit the signature, a random
            sample cannot be made (string inputs, unknown rank), the precision
            is unknown, or the source model itself fails on the inputs.
    """
    started = time.monotonic()
    run_artifact: ArtifactRunner
    if artifact_kind == "om":
        runner, why_not = _om_runner(runner_for_om, device_id)
        if runner is None:
            return verify_with(
                source, _not_runnable(why_not), precision=precision, samples=samples,
                random_samples=random_samples, seed=seed, batch=batch, top_k=top_k,
                input_shapes=input_shapes, dim_sizes=dim_sizes, via=VIA_NPU, started=started,
            )  # fmt: skip
        run_artifact = _om_sample_runner(Path(source), Path(artifact), runner)
        via = VIA_NPU
    elif artifact_kind == "onnx":
        via = VIA_CPU
        try:
            run_artifact = _onnx_runner(Path(artifact), optimised=True)
        except Exception as exc:  # the artifact is what is under test: a load failure fails it
            if precision not in TOLERANCES:
                raise VerificationInputError(_unknown_precision(precision)) from None
            return VerificationReport(
                "failed",
                precision,
                dict(TOLERANCES[precision]),
                reason=say("The artifact cannot be loaded: %(error)s", error=_plain(exc)),
                duration_s=time.monotonic() - started,
            )
    else:
        raise VerificationInputError(
            say("Unknown artifact kind %(kind)s; use onnx or om.", kind=repr(artifact_kind))
        )
    return verify_with(
        source, run_artifact, precision=precision, samples=samples,
        random_samples=random_samples, seed=seed, batch=batch, top_k=top_k,
        input_shapes=input_shapes, dim_sizes=dim_sizes, via=via, started=started,
    )  # fmt: skip


def verify_with(
    source: Path,
    run_artifact: ArtifactRunner,
    *,
    precision: Precision,
    via: str,
    samples: list[dict[str, np.ndarray]] | None = None,
    random_samples: int = 4,
    seed: int = 0,
    batch: int = 1,
    top_k: int = 5,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dim_sizes: Mapping[str, int] | None = None,
    started: float | None = None,
) -> VerificationReport:
    """:func:`verify` with the artifact run by ``run_artifact`` (one sample in, outputs out).

    The inputs (same seed, same shapes) and the pass rules are those of :func:`verify`, so a
    report says the same thing whichever way the artifact ran. ``run_artifact`` raising
    :class:`ArtifactNotRunnable` makes the report "not_run" with its message; any other
    exception fails it. ``via`` goes into the report (:data:`VIA_TRITON`, ...).
    """
    started = time.monotonic() if started is None else started
    if precision not in TOLERANCES:
        raise VerificationInputError(_unknown_precision(precision))
    tolerances = dict(TOLERANCES[precision])
    info = inspect_onnx(Path(source))
    check_samples(info, samples or [])
    inputs = list(samples or [])
    inputs += random_inputs(info, random_samples, seed, batch, input_shapes, dim_sizes)
    if not inputs:
        raise VerificationInputError(say("No samples to run: give samples or random_samples >= 1."))

    def report(
        status: Literal["passed", "failed", "not_run"], reason: Said, **kw: Any
    ) -> VerificationReport:
        return VerificationReport(
            status,
            precision,
            tolerances,
            reason=reason,
            duration_s=time.monotonic() - started,
            via=via if status != "not_run" else "",
            **kw,
        )

    names = [t.name for t in info.outputs]
    expected = _reference_outputs(Path(source), inputs)
    got: list[dict[str, np.ndarray]] = []
    for index, sample in enumerate(inputs):
        try:
            got.append(_match_outputs(names, run_artifact(sample)))
        except ArtifactNotRunnable as exc:
            return report("not_run", exc.message)
        except Exception as exc:
            return report(
                "failed",
                say(
                    "The artifact failed to run sample %(sample)s: %(error)s",
                    sample=index + 1,
                    error=_plain(exc),
                ),
                samples_used=len(inputs),
            )
    outputs = [
        compare_output(name, [e[name] for e in expected], [g[name] for g in got], tolerances, top_k)
        for name in names
    ]
    failed = [o for o in outputs if not o.passed]
    if failed:
        details = joined(
            [say("%(name)s: %(problem)s", name=o.name, problem=o.problem) for o in failed[:4]],
            "; ",
        )
        return report(
            "failed",
            say(
                "%(failed)s of %(outputs)s output(s) outside the %(precision)s tolerances "
                "on %(samples)s sample(s): %(details)s",
                failed=len(failed),
                outputs=len(outputs),
                precision=precision,
                samples=len(inputs),
                details=details,
            ),
            samples_used=len(inputs),
            outputs=outputs,
        )
    return report(
        "passed",
        say(
            "All %(outputs)s output(s) within the %(precision)s tolerances on "
            "%(samples)s sample(s).",
            outputs=len(outputs),
            precision=precision,
            samples=len(inputs),
        ),
        samples_used=len(inputs),
        outputs=outputs,
    )


def _unknown_precision(precision: object) -> Said:
    return say(
        "Unknown precision %(precision)s; use one of %(known)s.",
        precision=repr(precision),
        known=", ".join(TOLERANCES),
    )


def _reference_outputs(source: Path, inputs: list[Sample]) -> list[dict[str, np.ndarray]]:
    """What the source model computes (ONNX Runtime, CPU) for every sample."""
    try:
        run_source = _onnx_runner(source, optimised=False)
    except Exception as exc:
        raise VerificationInputError(
            say("ONNX Runtime cannot load the source model: %(error)s", error=_plain(exc))
        ) from exc
    expected: list[dict[str, np.ndarray]] = []
    for index, sample in enumerate(inputs):
        try:
            expected.append(run_source(sample))
        except Exception as exc:
            raise VerificationInputError(
                say(
                    "The source model itself fails on sample %(sample)s: %(error)s. Give "
                    "samples with realistic values (or dim_sizes for its dynamic dims).",
                    sample=index + 1,
                    error=_plain(exc),
                )
            ) from exc
    return expected


# Runners ------------------------------------------------------------------------------


def _plain(exc: BaseException) -> str:
    from model_store.validate import plain_ort_error

    return plain_ort_error(exc)


def _onnx_runner(path: Path, *, optimised: bool) -> Callable[[Sample], dict[str, np.ndarray]]:
    """An ONNX Runtime CPU session as a function; the source runs with basic optimisation only.

    Basic optimisations (constant folding, dead-node removal) are exact; the
    reference avoids fused kernels so that it is as plain as ONNX Runtime runs.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 2
    if not optimised:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}

    def run(sample: Sample) -> dict[str, np.ndarray]:
        feed = {k: v for k, v in sample.items() if k in wanted}
        return dict(zip(names, session.run(names, feed), strict=True))

    return run


def _not_runnable(reason: Said) -> ArtifactRunner:
    def run(sample: Sample) -> dict[str, np.ndarray]:
        raise ArtifactNotRunnable(reason)

    return run


def _om_sample_runner(source: Path, artifact: Path, runner: OmRunner) -> ArtifactRunner:
    """An OM runner as an :data:`ArtifactRunner`: outputs keyed by ONNX name, no NPU -> not run."""
    from model_store.ascend.om_runner import NpuUnavailable, PyAclUnavailable, match_outputs

    wanted = [t.name for t in inspect_onnx(source).outputs]

    def run(sample: Sample) -> dict[str, np.ndarray]:
        try:
            outputs = runner(artifact, dict(sample))
        except (NpuUnavailable, PyAclUnavailable) as exc:
            raise ArtifactNotRunnable(
                say("The OM was not executed on this worker: %(why)s", why=exc.message)
            ) from exc
        # OM outputs are named <op>:<index>:<ONNX name>: mapped as the acl backend does.
        return match_outputs(wanted, outputs)[0]

    return run


def _om_runner(given: OmRunner | None, device_id: int = 0) -> tuple[OmRunner | None, Said]:
    """The runner to use for OMs, or None and the reason there is none."""
    if given is not None:
        return given, ""
    if not worker_runs_pyacl():
        # "not_run" sends the OM to a trial in the serving Triton, which holds the chip.
        return None, why_not_here()
    try:
        from model_store.ascend import om_runner
    except ImportError:
        return None, say(
            "pyACL is not available on this worker (the OM runner is not installed), "
            "so the OM was not executed."
        )
    available, why = om_runner.acl_available()
    if not available:
        return None, say(
            "pyACL is not available on this worker, so the OM was not executed: %(why)s",
            why=why,
        )

    def run(path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(om_runner.run_om(path, inputs, device_id=device_id))

    return run, ""


def _match_outputs(names: list[str], outputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Artifact outputs keyed by the source's output names.

    OM outputs arrive already keyed by ONNX name (``om_runner.match_outputs``, the
    acl backend's rule). For other artifacts, when no name matches but the counts
    do, outputs are matched by position, in order.
    """
    if all(name in outputs for name in names):
        return {name: np.asarray(outputs[name]) for name in names}
    if len(outputs) == len(names):
        return {
            name: np.asarray(value) for name, value in zip(names, outputs.values(), strict=True)
        }
    missing = [n for n in names if n not in outputs]
    raise VerificationInputError(
        say(
            "The artifact's outputs %(got)s do not match the source's %(names)s "
            "(missing %(missing)s).",
            got=str(sorted(outputs)),
            names=str(names),
            missing=str(missing),
        )
    )

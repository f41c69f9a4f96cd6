"""Does the built artifact compute what the uploaded model computes? Measured, not assumed.

:func:`verify` runs the source ONNX (ONNX Runtime, CPU) and the artifact on
the same inputs and compares every output: largest absolute and relative
error, cosine similarity and, for classifier-like outputs, top-1/top-k
agreement. Pass or fail follows :data:`TOLERANCES` for the precision the
artifact was built in. An OM is run through pyACL when this worker has it and an
NPU; otherwise the report says "not_run" and why (never "failed": the artifact
was not at fault). :func:`verify_with` compares any other way of running the
artifact on the same inputs with the same rules, e.g. through the Triton that
will serve it (``webapp.registry.verify_triton``). It never reports a pass it
did not measure; ``via`` in the report says where the artifact ran.

Example:
    >>> report = verify(Path("src.onnx"), Path("work/model.onnx"), "onnx", precision="fp32")
    >>> report.status, report.outputs[0].cosine
    ('passed', 1.0)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from model_store.errors import ModelStoreError
from model_store.onnx_info import inspect_onnx
from model_store.text import Said, as_json, joined, say
from model_store.verification_inputs import (
    Sample,
    VerificationInputError,
    check_samples,
    random_inputs,
)

Precision = Literal["fp32", "fp16", "mixed"]
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


#: Pass criteria per precision. An output passes when every criterion that is
#: not None holds:
#:
#: * ``atol``/``rtol``: every element satisfies |got - ref| <= atol + rtol * |ref|
#:   (numpy.allclose). Only for fp32: an FP32 rebuild (simplification, operator
#:   fusion) changes results at rounding level (~1e-6), so 1e-4 absolute plus
#:   1e-4 relative leaves a wide margin while catching any real change.
#: * ``max_error_vs_range``: max |got - ref| / max |ref| at most this. For
#:   float16 arithmetic (10-bit mantissa, ~5e-4 relative per operation) errors
#:   accumulate over layers and are largest near zero, so an elementwise
#:   relative test is meaningless; 2% of the output's range is a common bar
#:   for FP16 inference, 1% for mixed precision (FP16 only where safe).
#: * ``min_cosine``: cosine similarity of all outputs, flattened. 0.99999 for
#:   fp32; 0.999 for fp16 (the usual acceptance bar for FP16 NPU ports);
#:   0.9995 for mixed.
#: * ``top1_margin``: for rank-2 float outputs with at least top_k classes, a
#:   row whose top-1 class differs fails only when the reference preferred its
#:   own class by more than this fraction of the row's value range. Random
#:   inputs often give near-ties, and a flip between near-tied classes is the
#:   expected effect of rounding, not an error.
#: * ``min_topk_overlap``: mean |top-k(ref) ∩ top-k(got)| / k over rows.
#: * ``min_exact_match``: for integer and bool outputs (indices, masks), the
#:   fraction of equal elements. fp32 must match exactly; reduced precision
#:   may flip a few near-tied argmax indices.
TOLERANCES: dict[str, dict[str, float | None]] = {
    "fp32": {
        "atol": 1e-4,
        "rtol": 1e-4,
        "max_error_vs_range": None,
        "min_cosine": 0.99999,
        "top1_margin": 1e-3,
        "min_topk_overlap": 0.95,
        "min_exact_match": 1.0,
    },
    "fp16": {
        "atol": None,
        "rtol": None,
        "max_error_vs_range": 2e-2,
        "min_cosine": 0.999,
        "top1_margin": 2e-2,
        "min_topk_overlap": 0.8,
        "min_exact_match": 0.99,
    },
    "mixed": {
        "atol": None,
        "rtol": None,
        "max_error_vs_range": 1e-2,
        "min_cosine": 0.9995,
        "top1_margin": 1e-2,
        "min_topk_overlap": 0.8,
        "min_exact_match": 0.99,
    },
}

#: Floor of the relative-error denominator: 1e-3 of the output's largest
#: magnitude, so elements near zero do not turn tiny errors into huge ratios.
REL_FLOOR = 1e-3


@dataclass
class OutputComparison:
    """How one output of the artifact compares with the source's.

    Metrics are None when they do not apply (top-k for non-classifier outputs)
    or could not be computed (non-finite values; ``problem`` then says so).
    """

    name: str
    max_abs: float | None = None
    max_rel: float | None = None
    cosine: float | None = None
    top1_agreement: float | None = None
    topk_overlap: float | None = None
    passed: bool = False
    problem: Said | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (finite floats or null)."""
        return {
            "name": self.name,
            "max_abs": _finite(self.max_abs),
            "max_rel": _finite(self.max_rel),
            "cosine": _finite(self.cosine),
            "top1_agreement": _finite(self.top1_agreement),
            "topk_overlap": _finite(self.topk_overlap),
            "passed": self.passed,
            "problem": as_json(self.problem),
        }


@dataclass
class VerificationReport:
    """The outcome of :func:`verify`.

    Attributes:
        status: ``passed``, ``failed`` or ``not_run`` (the artifact could not
            be executed here; ``reason`` says why).
        precision: The tolerance set applied.
        tolerances: ``TOLERANCES[precision]``.
        samples_used: Number of input samples both models ran.
        outputs: One comparison per output of the source.
        reason: One sentence: why it passed, failed or did not run.
        duration_s: Wall time of the whole verification.
        via: Where the artifact ran (:data:`VIA_CPU`, :data:`VIA_NPU`, :data:`VIA_TRITON`),
            "" when it did not run.
    """

    status: Literal["passed", "failed", "not_run"]
    precision: str
    tolerances: dict[str, float | None]
    samples_used: int = 0
    outputs: list[OutputComparison] = field(default_factory=list)
    reason: Said = ""
    duration_s: float = 0.0
    via: str = ""

    @property
    def passed(self) -> bool:
        """True only for a measured pass."""
        return self.status == "passed"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form: finite floats or null, plain types only."""
        return {
            "status": self.status,
            "precision": self.precision,
            "tolerances": {k: _finite(v) for k, v in self.tolerances.items()},
            "samples_used": self.samples_used,
            "outputs": [o.to_dict() for o in self.outputs],
            "reason": as_json(self.reason),
            "duration_s": round(self.duration_s, 3),
            "via": self.via,
        }


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


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


# Comparison ---------------------------------------------------------------------------


def compare_output(
    name: str,
    expected: Sequence[np.ndarray],
    got: Sequence[np.ndarray],
    tolerances: Mapping[str, float | None],
    top_k: int = 5,
) -> OutputComparison:
    """Compares one output over all samples and applies ``tolerances``."""
    result = OutputComparison(name)
    for index, (ref, out) in enumerate(zip(expected, got, strict=True)):
        if np.shape(ref) != np.shape(out):
            result.problem = say(
                "shape %(got)s differs from the source's %(expected)s (sample %(sample)s)",
                got=str(list(np.shape(out))),
                expected=str(list(np.shape(ref))),
                sample=index + 1,
            )
            return result
    ref_arrays = [np.asarray(r) for r in expected]
    is_float = all(r.dtype.kind in "fc" for r in ref_arrays)
    ref_flat = np.concatenate([r.astype(np.float64).ravel() for r in ref_arrays])
    out_flat = np.concatenate([np.asarray(o).astype(np.float64).ravel() for o in got])
    if not (np.all(np.isfinite(ref_flat)) and np.all(np.isfinite(out_flat))):
        if not np.all(np.isfinite(ref_flat)):
            result.problem = say("the source output contains NaN or infinity")
        else:
            result.problem = say("the artifact output contains NaN or infinity")
        return result
    _fill_errors(result, ref_flat, out_flat)
    flips = 0
    if is_float:
        flips = _fill_topk(result, ref_arrays, [np.asarray(o) for o in got], top_k, tolerances)
    result.problem = _first_violation(result, ref_flat, out_flat, is_float, tolerances, flips)
    result.passed = result.problem is None
    return result


def _fill_errors(result: OutputComparison, ref: np.ndarray, out: np.ndarray) -> None:
    """max_abs, max_rel (guarded denominator) and cosine over all elements."""
    if ref.size == 0:
        result.max_abs = result.max_rel = 0.0
        result.cosine = 1.0
        return
    diff = np.abs(out - ref)
    scale = float(np.max(np.abs(ref)))
    floor = max(REL_FLOOR * scale, float(np.finfo(np.float32).tiny))
    result.max_abs = float(np.max(diff))
    result.max_rel = float(np.max(diff / np.maximum(np.abs(ref), floor)))
    norms = float(np.linalg.norm(ref)) * float(np.linalg.norm(out))
    if norms == 0.0:
        # Both all-zero is a perfect match; one all-zero is not.
        result.cosine = 1.0 if not np.any(ref) and not np.any(out) else 0.0
    else:
        result.cosine = float(np.clip(np.dot(ref, out) / norms, -1.0, 1.0))


def _fill_topk(
    result: OutputComparison,
    expected: Sequence[np.ndarray],
    got: Sequence[np.ndarray],
    top_k: int,
    tolerances: Mapping[str, float | None],
) -> int:
    """Top-1 agreement and top-k overlap for (rows, classes) outputs with >= top_k classes.

    Returns:
        The number of rows whose top-1 class changed although the source was
        not near a tie (see ``top1_margin``).
    """
    if not expected or any(r.ndim != 2 or r.shape[1] < max(top_k, 2) for r in expected):
        return 0
    ref = np.concatenate([r.astype(np.float64) for r in expected])
    out = np.concatenate([o.astype(np.float64) for o in got])
    if ref.shape[0] == 0:
        return 0
    ref_top = np.argsort(-ref, axis=1, kind="stable")[:, :top_k]
    out_top = np.argsort(-out, axis=1, kind="stable")[:, :top_k]
    same_top1 = ref_top[:, 0] == out_top[:, 0]
    result.top1_agreement = float(np.mean(same_top1))
    overlaps = [len(set(a) & set(b)) / top_k for a, b in zip(ref_top, out_top, strict=True)]
    result.topk_overlap = float(np.mean(overlaps))
    margin = tolerances.get("top1_margin")
    if margin is None:
        return int(np.count_nonzero(~same_top1))
    rows = np.arange(ref.shape[0])
    # How much more the source liked its own top-1 than the artifact's choice.
    preference = ref[rows, ref_top[:, 0]] - ref[rows, out_top[:, 0]]
    spread = np.maximum(np.ptp(ref, axis=1), np.finfo(np.float64).tiny)
    return int(np.count_nonzero((~same_top1) & (preference > margin * spread)))


def _first_violation(
    result: OutputComparison,
    ref: np.ndarray,
    out: np.ndarray,
    is_float: bool,
    tol: Mapping[str, float | None],
    flips: int,
) -> Said | None:
    """The first tolerance this output breaks, in plain words; None if it passes."""
    if not is_float:
        match = float(np.mean(ref == out)) if ref.size else 1.0
        need = tol.get("min_exact_match")
        if need is not None and match < need:
            return say(
                "only %(match)s of the integer values match (need %(need)s)",
                match=f"{match:.1%}",
                need=f"{need:.0%}",
            )
        return None
    atol, rtol = tol.get("atol"), tol.get("rtol")
    if atol is not None and rtol is not None and ref.size:
        allowed = atol + rtol * np.abs(ref)
        bad = int(np.count_nonzero(np.abs(out - ref) > allowed))
        if bad:
            return say(
                "%(bad)s value(s) differ by more than %(atol)s + %(rtol)s*|ref| "
                "(max abs error %(max_abs)s)",
                bad=bad,
                atol=f"{atol:g}",
                rtol=f"{rtol:g}",
                max_abs=f"{result.max_abs:.3g}",
            )
    vs_range = tol.get("max_error_vs_range")
    if vs_range is not None and ref.size:
        scale = float(np.max(np.abs(ref)))
        ratio = (result.max_abs or 0.0) / scale if scale > 0 else (result.max_abs or 0.0)
        if ratio > vs_range:
            return say(
                "max abs error is %(ratio)s of the output's range (limit %(limit)s)",
                ratio=f"{ratio:.2%}",
                limit=f"{vs_range:.0%}",
            )
    min_cos = tol.get("min_cosine")
    if min_cos is not None and result.cosine is not None and result.cosine < min_cos:
        return say(
            "cosine similarity %(cosine)s is below %(minimum)s",
            cosine=f"{result.cosine:.6f}",
            minimum=min_cos,
        )
    if flips:
        return say(
            "top-1 class changed in %(flips)s row(s) where the source was not near a tie",
            flips=flips,
        )
    need_overlap = tol.get("min_topk_overlap")
    overlap = result.topk_overlap
    if need_overlap is not None and overlap is not None and overlap < need_overlap:
        return say(
            "top-k overlap %(overlap)s is below %(minimum)s",
            overlap=f"{result.topk_overlap:.2f}",
            minimum=need_overlap,
        )
    return None

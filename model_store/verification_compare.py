"""The comparison maths of a verification: the pass criteria per precision
(:data:`TOLERANCES`) and :func:`compare_output`, which measures one output of the artifact
against the source's and applies them.

Apart from :mod:`model_store.verify` because this is pure numpy on arrays already computed:
which model ran where, and how, is none of its business.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from model_store.text import Said, say
from model_store.verification_report import OutputComparison

__all__ = ["REL_FLOOR", "TOLERANCES", "compare_output"]


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
#: * ``min_top1_agreement``: the share of rows whose top-1 class is the source's. Only for
#:   int8, where it replaces ``top1_margin``: INT8 moves logits by a few percent of their
#:   range, so a flip between classes a few percent apart is expected on some inputs; what
#:   matters to a classifier's users is how often the answer changes. 0.9 on held-out
#:   real inputs (one flip in 16 passes, two fail) is stricter than the <1 point top-1 drop
#:   usually accepted for INT8 ImageNet models, because agreement counts every change.
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
        "min_top1_agreement": None,
        "min_topk_overlap": 0.95,
        "min_exact_match": 1.0,
    },
    "fp16": {
        "atol": None,
        "rtol": None,
        "max_error_vs_range": 2e-2,
        "min_cosine": 0.999,
        "top1_margin": 2e-2,
        "min_top1_agreement": None,
        "min_topk_overlap": 0.8,
        "min_exact_match": 0.99,
    },
    "mixed": {
        "atol": None,
        "rtol": None,
        "max_error_vs_range": 1e-2,
        "min_cosine": 0.9995,
        "top1_margin": 1e-2,
        "min_top1_agreement": None,
        "min_topk_overlap": 0.8,
        "min_exact_match": 0.99,
    },
    # INT8 weights and activations (ONNX Runtime's static QDQ): each tensor keeps 256 levels,
    # so errors of a few percent of an output's range are normal; cosine 0.99 is the usual
    # floor for INT8 ports, and the class agreement is what a person reads.
    "int8": {
        "atol": None,
        "rtol": None,
        "max_error_vs_range": 0.15,
        "min_cosine": 0.99,
        "top1_margin": None,
        "min_top1_agreement": 0.9,
        "min_topk_overlap": 0.8,
        "min_exact_match": 0.95,
    },
}

#: Floor of the relative-error denominator: 1e-3 of the output's largest
#: magnitude, so elements near zero do not turn tiny errors into huge ratios.
REL_FLOOR = 1e-3


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
    if tolerances.get("min_top1_agreement") is not None:
        return 0  # the agreement rate is the criterion, not single flips
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
    need_top1 = tol.get("min_top1_agreement")
    agreement = result.top1_agreement
    if need_top1 is not None and agreement is not None and agreement < need_top1:
        return say(
            "top-1 class agrees on %(agreement)s of the inputs (need %(minimum)s)",
            agreement=f"{agreement:.0%}",
            minimum=f"{need_top1:.0%}",
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

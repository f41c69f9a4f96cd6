"""Deployment targets: what a model version is built into, and its config.pbtxt.

Three targets exist (one module each; the outside facts behind them are in docs/):

* ``onnxruntime``: optimised ``model.onnx`` on the CPU (the embedded default);
* ``npu_ge``: normalised ``model.onnx`` for CANN's GE backend on Ascend NPUs;
* ``acl``: ``model.om`` compiled by ATC, served through pyACL.

A fourth, ``external``, holds models adopted from an existing Triton repository and served as
found (docs/adopt.md); :func:`get_target` knows it, :func:`all_targets` (the targets a new
model may choose) leaves it out.

Example:
    >>> [t.name for t in all_targets()]
    ['onnxruntime', 'npu_ge', 'acl']
    >>> get_target("acl").needs_cann
    True
"""

from __future__ import annotations

from model_store.targets.acl import AclTarget
from model_store.targets.base import (
    BuildCancelled,
    BuildContext,
    BuildResult,
    Target,
    TargetStatus,
    VerifyPlan,
)
from model_store.targets.external import ExternalTarget
from model_store.targets.findings import Finding
from model_store.targets.npu_ge import NpuGeTarget
from model_store.targets.onnxruntime import OnnxRuntimeTarget
from model_store.targets.options import (
    InvalidOptions,
    OptionSpec,
    UnknownTarget,
    options_json_schema,
)

__all__ = [
    "AclTarget",
    "BuildCancelled",
    "BuildContext",
    "BuildResult",
    "ExternalTarget",
    "Finding",
    "InvalidOptions",
    "NpuGeTarget",
    "OnnxRuntimeTarget",
    "OptionSpec",
    "Target",
    "TargetStatus",
    "UnknownTarget",
    "VerifyPlan",
    "all_targets",
    "get_target",
    "known_targets",
    "options_json_schema",
]

_TARGETS: dict[str, Target] = {
    target.name: target
    for target in (OnnxRuntimeTarget(), NpuGeTarget(), AclTarget(), ExternalTarget())
}


def get_target(name: object) -> Target:
    """Returns the target called ``name``.

    Raises:
        UnknownTarget: (an InvalidOptions, code ``unknown_target``) naming the valid targets.
    """
    if isinstance(name, str) and name in _TARGETS:
        return _TARGETS[name]
    raise UnknownTarget(f"There is no target {name!r}. Choose one of: {', '.join(_TARGETS)}.")


def all_targets() -> list[Target]:
    """Every target a new model may choose (all but ``external``), the CPU default first."""
    return [target for target in _TARGETS.values() if target.accepts_uploads]


def known_targets() -> list[Target]:
    """Every target a model may have, ``external`` (adopted models) included."""
    return list(_TARGETS.values())

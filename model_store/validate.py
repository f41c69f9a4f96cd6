"""Checks an uploaded ONNX model before any build: is it valid, supported, and fit for the target?

:func:`validate_model` never raises for a problem with the model: every
problem becomes a :class:`~model_store.targets.findings.Finding` that says what is
wrong and what to do, so the upload page can list them all at once. The
checks, in order:

1. ``inspect_onnx`` (readable ONNX, safe external data);
2. IR version and opsets within what this worker's onnx/onnxruntime support;
3. operators: each must exist in the standard ONNX schema of its domain,
   ``ai.onnx.ml``, ONNX Runtime's ``com.microsoft`` contrib set, or a local
   function of the model;
4. ``onnx.checker.check_model`` with ``full_check=True`` (strict shape
   inference), given the path so models over 2 GiB and external data work;
5. input/output names usable in config.pbtxt;
6. the target's options and its own rules (``Target.check_model``);
7. for the CPU target, whether ONNX Runtime can actually create a session.

Example:
    >>> report = validate_model(Path("up/model.onnx"), get_target("onnxruntime"), {})
    >>> report.ok, [f.code for f in report.findings]
    (True, [])
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx
from onnx import GraphProto, ModelProto, NodeProto

from model_store.errors import ModelStoreError
from model_store.names import validate_tensor_name
from model_store.onnx_info import OnnxInfo, inspect_onnx
from model_store.targets.base import Target
from model_store.targets.findings import Finding, error
from model_store.targets.options import InvalidOptions
from model_store.text import Said, say

DEFAULT_DOMAINS = ("", "ai.onnx")
ML_DOMAIN = "ai.onnx.ml"
MS_DOMAIN = "com.microsoft"
# ONNX Runtime runs nothing older than opset 7.
MIN_OPSET = 7
_REEXPORT = say(
    "Re-export the model with the framework's ONNX exporter (e.g. torch.onnx.export) "
    "and upload it again."
)


@dataclass
class ValidationReport:
    """The outcome of :func:`validate_model`.

    Attributes:
        ok: True when no finding is an error (warnings are allowed).
        info: What ``inspect_onnx`` found, or None if the file could not be read.
        findings: Errors and warnings, errors first, without duplicates.
        options: The parsed and resolved options, or None if they were invalid.
    """

    ok: bool
    info: OnnxInfo | None
    findings: list[Finding] = field(default_factory=list)
    options: dict[str, Any] | None = None

    @property
    def errors(self) -> list[Finding]:
        """The error findings."""
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[Finding]:
        """The warning findings."""
        return [f for f in self.findings if f.level == "warning"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (without ``info``, which has its own representation)."""
        return {
            "ok": self.ok,
            "findings": [f.to_dict() for f in self.findings],
            "options": self.options,
        }


def validate_model(path: Path, target: Target, options: Mapping[str, object]) -> ValidationReport:
    """Runs every check on ``path`` for ``target`` and ``options``.

    Args:
        path: The uploaded ``.onnx`` (external data files beside it).
        target: The deployment target chosen for this version.
        options: Raw or parsed options for that target.

    Returns:
        The report; ``report.ok`` tells whether a build may start. It can take
        seconds for big models (the checker and, for the CPU target, an ONNX
        Runtime session both read the whole model).
    """
    path = Path(path)
    try:
        info = inspect_onnx(path)
    except ModelStoreError as exc:
        finding = error(exc.code, exc.message, _REEXPORT)
        return ValidationReport(False, None, [finding])
    model = onnx.load(str(path), load_external_data=False)
    findings = _version_findings(model)
    unknown = _unknown_operator_findings(model)
    findings += unknown
    findings += _checker_findings(path, skip_unknown_ops=bool(unknown))
    findings += _name_findings(info)
    parsed: dict[str, Any] | None = None
    try:
        parsed = target.parse_options(options, info=info)
    except InvalidOptions as exc:
        findings.append(
            error(
                exc.code,
                exc.message,
                say("Correct that option; the form shows the allowed values."),
            )
        )
    if parsed is not None:
        findings += target.check_model(info, parsed)
    if target.name == "onnxruntime" and not any(
        f.code in {"unknown_operator", "ir_version_unsupported", "opset_unsupported"}
        for f in findings
    ):
        findings += _session_findings(path)
    findings = _deduplicate(findings)
    ok = not any(f.level == "error" for f in findings)
    return ValidationReport(ok, info, findings, parsed)


def _deduplicate(findings: list[Finding]) -> list[Finding]:
    """Drops repeats (several checks can see the same problem) and puts errors first."""
    seen: dict[tuple[str, Said], Finding] = {}
    for finding in findings:
        seen.setdefault((finding.code, finding.message), finding)
    unique = list(seen.values())
    return [f for f in unique if f.level == "error"] + [f for f in unique if f.level != "error"]


# Versions -----------------------------------------------------------------------------


@functools.cache
def supported_opsets() -> dict[str, int]:
    """Highest opset per domain that both onnx and this onnxruntime know."""
    highest: dict[str, int] = {"": onnx.defs.onnx_opset_version()}
    highest[ML_DOMAIN] = max(
        (
            s.since_version
            for s in onnx.defs.get_all_schemas_with_history()
            if s.domain == ML_DOMAIN
        ),
        default=0,
    )
    try:
        from onnxruntime.capi import _pybind_state

        ort_highest: dict[str, int] = {}
        for schema in _pybind_state.get_all_operator_schema():
            domain = schema.domain or ""
            ort_highest[domain] = max(ort_highest.get(domain, 0), schema.since_version)
        for domain in ("", ML_DOMAIN):
            if domain in ort_highest:
                highest[domain] = min(highest[domain], ort_highest[domain])
    except (ImportError, AttributeError):  # an onnxruntime build without the schema API
        pass
    return highest


def _version_findings(model: ModelProto) -> list[Finding]:
    """IR version and opsets this worker can handle."""
    found = []
    if model.ir_version > onnx.IR_VERSION:
        found.append(
            error(
                "ir_version_unsupported",
                say(
                    "The model has ONNX IR version %(version)s; this worker supports up "
                    "to %(supported)s.",
                    version=model.ir_version,
                    supported=onnx.IR_VERSION,
                ),
                say(
                    "Export with an older exporter (or lower its IR version setting), or update "
                    "onnx and onnxruntime on the workers."
                ),
            )
        )
    limits = supported_opsets()
    for imp in model.opset_import:
        domain = "" if imp.domain in DEFAULT_DOMAINS else imp.domain
        shown = imp.domain or "ai.onnx"
        if domain in limits and imp.version > limits[domain]:
            found.append(
                error(
                    "opset_unsupported",
                    say(
                        "The model uses opset %(opset)s of %(domain)s; this worker's ONNX "
                        "Runtime supports up to %(supported)s.",
                        opset=imp.version,
                        domain=shown,
                        supported=limits[domain],
                    ),
                    say(
                        "Export with opset %(opset)s (opset_version in "
                        "torch.onnx.export), or convert it with onnx.version_converter.",
                        opset=min(limits[domain], 17),
                    ),
                )
            )
        elif domain == "" and imp.version < MIN_OPSET:
            found.append(
                error(
                    "opset_unsupported",
                    say(
                        "The model uses opset %(opset)s; ONNX Runtime runs opset "
                        "%(minimum)s and newer.",
                        opset=imp.version,
                        minimum=MIN_OPSET,
                    ),
                    say("Export again with a current exporter and opset 14 or newer."),
                )
            )
    return found


# Operators -------------------------------------------------------------------------------


def _all_nodes(model: ModelProto) -> Iterator[NodeProto]:
    """Every node of the graph, its subgraphs and the model's local functions."""
    stack: list[GraphProto] = [model.graph]
    for function in model.functions:
        yield from function.node
    while stack:
        graph = stack.pop()
        for node in graph.node:
            yield node
            for attr in node.attribute:
                if attr.HasField("g"):
                    stack.append(attr.g)
                stack.extend(attr.graphs)


@functools.cache
def _contrib_operators() -> frozenset[str]:
    """ONNX Runtime's com.microsoft operators (empty if the schema API is missing)."""
    try:
        from onnxruntime.capi import _pybind_state

        return frozenset(
            s.name for s in _pybind_state.get_all_operator_schema() if s.domain == MS_DOMAIN
        )
    except (ImportError, AttributeError):
        return frozenset()


def _is_known(node: NodeProto, local: set[tuple[str, str]]) -> bool:
    if (node.domain, node.op_type) in local:
        return True
    if node.domain in DEFAULT_DOMAINS:
        return bool(onnx.defs.has(node.op_type, ""))
    if node.domain == ML_DOMAIN:
        return bool(onnx.defs.has(node.op_type, ML_DOMAIN))
    if node.domain == MS_DOMAIN:
        return node.op_type in _contrib_operators()
    return False


def _unknown_operator_findings(model: ModelProto) -> list[Finding]:
    """One error per operator type that no schema or local function defines."""
    local = {(f.domain, f.name) for f in model.functions}
    unknown: dict[tuple[str, str], int] = {}
    for node in _all_nodes(model):
        if not _is_known(node, local):
            key = (node.domain or "ai.onnx", node.op_type)
            unknown[key] = unknown.get(key, 0) + 1
    return [
        error(
            "unknown_operator",
            say(
                "unknown operator %(op)s (domain %(domain)s, %(count)s node(s)); no ONNX, "
                "ONNX-ML or ONNX Runtime schema defines it, so no target can run it.",
                op=op,
                domain=repr(domain),
                count=count,
            ),
            say(
                "Export without custom operators (replace them with standard ONNX operators, "
                "or turn off the exporter's custom-op registration) and upload again."
            ),
        )
        for (domain, op), count in sorted(unknown.items())
    ]


# The ONNX checker --------------------------------------------------------------------------


def _checker_findings(path: Path, *, skip_unknown_ops: bool) -> list[Finding]:
    """onnx.checker with strict shape inference; its first line becomes the message."""
    try:
        # The path form lets the checker handle models over 2 GiB and external data.
        onnx.checker.check_model(str(path), full_check=True)
    except Exception as exc:  # ValidationError, InferenceError, and anything they wrap
        text = str(exc).strip()
        if skip_unknown_ops and "No Op registered" in text:
            return []  # already reported, with a better message, as unknown_operator
        first = next((line.strip() for line in text.splitlines() if line.strip()), repr(exc))
        context = re.search(r"Context:\s*(.+)", text)
        if context:
            message = say(
                "The ONNX checker rejects the model: %(error)s (%(context)s)",
                error=first,
                context=context.group(1).strip(),
            )
        else:
            message = say("The ONNX checker rejects the model: %(error)s", error=first)
        return [
            error(
                "onnx_checker_failed",
                message,
                say(
                    "The file breaks the ONNX specification (wrong shapes, types or "
                    "attributes). %(reexport)s",
                    reexport=_REEXPORT,
                ),
            )
        ]
    return []


def _name_findings(info: OnnxInfo) -> list[Finding]:
    """Inputs and outputs exist and have names config.pbtxt can carry."""
    found = []
    if not info.inputs:
        found.append(
            error(
                "no_inputs",
                say("The model has no inputs, so Triton has nothing to feed it."),
                say("Export the model with its real inputs (not baked in as constants)."),
            )
        )
    if not info.outputs:
        found.append(
            error(
                "no_outputs",
                say("The model has no outputs."),
                say("Export the model with its outputs."),
            )
        )
    for tensor in [*info.inputs, *info.outputs]:
        try:
            validate_tensor_name(tensor.name)
        except ModelStoreError as exc:
            found.append(
                error(
                    "invalid_tensor_name",
                    exc.message,
                    say("Rename the tensor when exporting (input_names / output_names)."),
                )
            )
    return found


# ONNX Runtime session -------------------------------------------------------------------------

_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\]\s*:\s*\d+\s*:\s*\w+\s*:\s*")
_ORT_SOURCE = re.compile(r"/onnxruntime_src/\S+:\d+\s+[^\n]*?\)\s+")


def plain_ort_error(exc: BaseException) -> str:
    """ONNX Runtime's message without its error-code prefix and C++ source locations."""
    text = _ORT_PREFIX.sub("", str(exc).strip())
    text = _ORT_SOURCE.sub("", text)
    return " ".join(text.split())[:600]


def _session_findings(path: Path) -> list[Finding]:
    """Whether ONNX Runtime (CPU) can load the model, as the onnxruntime target will."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    # Loading is what is tested; skipping optimisation keeps big models quick.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        return [
            error(
                "onnxruntime_load_failed",
                say(
                    "ONNX Runtime cannot load the model on the CPU: %(error)s",
                    error=plain_ort_error(exc),
                ),
                say(
                    "Usually an operator or data type without a CPU kernel, or a graph the "
                    "exporter got wrong. %(reexport)s",
                    reexport=_REEXPORT,
                ),
            )
        ]
    return []

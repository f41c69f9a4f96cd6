"""Graph-level building blocks for preparing an ONNX model: simplify, optimise, FP16, shapes, opset.

Each step reads one ``.onnx`` file (external data is resolved beside it) and
writes one new file; it never touches anything outside the output file's own
directory. A model too big for a single protobuf (2 GiB) is written with its
weights in ``<output name>.data`` next to it, referenced by a relative
location, so the pair can be moved together. Every step logs what it changed
(node counts before and after, operators that appeared or disappeared).

The targets chain these steps inside their build directory, e.g. the
``onnxruntime`` target: fix_input_shapes -> simplify_model -> to_fp16 ->
ort_optimise.

Example:
    >>> report = simplify_model(Path("up/model.onnx"), Path("work/1.onnx"), log=print)
    >>> report.nodes_before, report.nodes_after
    (120, 97)
"""

from __future__ import annotations

import contextlib
import io
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnx import GraphProto, ModelProto, TensorProto

from model_store.errors import ModelStoreError
from model_store.text import say

Log = Callable[[str], None]

# protobuf refuses to serialise messages of 2 GiB or more; stay clear of the edge
# because ByteSize() does not count the framing of the outer message.
SINGLE_FILE_LIMIT = 2**31 - 64 * 1024 * 1024
DEFAULT_DOMAIN = "ai.onnx"

# Offline optimisation levels offered to users, mapped to ONNX Runtime's names.
ORT_LEVELS = ("disabled", "basic", "extended", "all")


class OptimiseError(ModelStoreError):
    """A graph transformation could not be applied to the model."""

    code = "optimise_failed"


@dataclass
class StepReport:
    """What one step did.

    Attributes:
        step: Short name of the step (``"simplify"``, ``"fp16"``, ...).
        output: The file written.
        nodes_before: Node count of the input graph (subgraphs included).
        nodes_after: Node count of the output graph.
        files: Every file written (the model and, for big models, its ``.data`` file).
        summary: One line saying what changed, as logged.
    """

    step: str
    output: Path
    nodes_before: int
    nodes_after: int
    files: list[Path] = field(default_factory=list)
    summary: str = ""


# Reading and writing -------------------------------------------------------------


def load_onnx(path: Path) -> ModelProto:
    """Loads a model with its external data (which must sit beside it).

    Raises:
        OptimiseError: If the file cannot be parsed.
    """
    try:
        return onnx.load(str(path), load_external_data=True)
    except Exception as exc:  # onnx raises DecodeError, OSError, ValueError...
        raise OptimiseError(
            say(
                "The ONNX file %(name)s cannot be loaded: %(error)s",
                name=repr(Path(path).name),
                error=str(exc),
            )
        ) from exc


def _data_file_name(output: Path) -> str:
    return f"{output.name}.data"


def save_onnx(model: ModelProto, output: Path, *, allow_external: bool = True) -> list[Path]:
    """Writes ``model`` to ``output``; weights go to ``<name>.data`` beside it only if needed.

    Args:
        model: The model, with all tensor data loaded in memory.
        output: Destination ``.onnx`` path; its directory must exist.
        allow_external: When False, a model too big for one file raises
            instead (the GE backend reads exactly one ``.onnx``).

    Returns:
        The files written, model first.

    Raises:
        OptimiseError: If the model is too big and ``allow_external`` is False,
            or ``output`` is a symlink.
    """
    output = Path(output)
    if output.is_symlink():
        raise OptimiseError(
            say("Refusing to write through the symlink %(path)s.", path=str(output))
        )
    data_path = output.with_name(_data_file_name(output))
    data_path.unlink(missing_ok=True)  # a stale data file would be silently reused
    if model.ByteSize() < SINGLE_FILE_LIMIT:
        onnx.save_model(model, str(output))
        return [output]
    if not allow_external:
        raise OptimiseError(
            say(
                "The model is %(size)s GiB, over protobuf's 2 GiB limit for a "
                "single .onnx file, and this target needs exactly one file. Reduce the model "
                "(e.g. quantise or split it) or use another target.",
                size=f"{model.ByteSize() / 2**30:.1f}",
            )
        )
    # The location is relative (just the file name) so the pair can be moved together.
    onnx.save_model(
        model,
        str(output),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=data_path.name,
        size_threshold=1024,
    )
    return [output, data_path]


def _all_graphs(graph: GraphProto) -> Iterator[GraphProto]:
    """``graph`` and every nested subgraph (If/Loop/Scan bodies)."""
    stack = [graph]
    while stack:
        current = stack.pop()
        yield current
        for node in current.node:
            for attr in node.attribute:
                if attr.HasField("g"):
                    stack.append(attr.g)
                stack.extend(attr.graphs)


def operator_counts(model: ModelProto) -> Counter[str]:
    """Counts nodes by operator (``domain.Op`` for non-default domains), subgraphs included."""
    counts: Counter[str] = Counter()
    for graph in _all_graphs(model.graph):
        for node in graph.node:
            domain = node.domain if node.domain not in ("", DEFAULT_DOMAIN) else ""
            counts[f"{domain}.{node.op_type}" if domain else node.op_type] += 1
    return counts


def _describe_change(step: str, before: Counter[str], after: Counter[str]) -> str:
    """``"simplify: 12 -> 9 nodes (-Identity x3)"``, listing the biggest operator changes."""
    delta = Counter(after)
    delta.subtract(before)
    moved = sorted(((op, n) for op, n in delta.items() if n), key=lambda kv: (-abs(kv[1]), kv[0]))
    detail = ", ".join(f"{'+' if n > 0 else '-'}{op} x{abs(n)}" for op, n in moved[:8])
    if len(moved) > 8:
        detail += f", and {len(moved) - 8} more"
    text = f"{step}: {sum(before.values())} -> {sum(after.values())} nodes"
    return f"{text} ({detail})" if detail else f"{text} (no operator changes)"


def _prepare_output(source: Path, output: Path) -> Path:
    """Checks that ``output`` is a new file in an existing directory, distinct from ``source``."""
    output = Path(output)
    if not output.parent.is_dir():
        raise OptimiseError(
            say("The output directory %(path)s does not exist.", path=str(output.parent))
        )
    if output.resolve() == Path(source).resolve():
        raise OptimiseError(say("A step must write a new file, not overwrite its input."))
    return output


def _finish(
    step: str, source_model: Counter[str], model: ModelProto, output: Path, log: Log, **kw: bool
) -> StepReport:
    """Saves, logs and reports one step."""
    after = operator_counts(model)
    files = save_onnx(model, output, **kw)
    summary = _describe_change(step, source_model, after)
    log(summary)
    return StepReport(step, output, sum(source_model.values()), sum(after.values()), files, summary)


# Steps ---------------------------------------------------------------------------


def simplify_model(
    source: Path, output: Path, *, log: Log, allow_external: bool = True
) -> StepReport:
    """Simplifies the graph with onnxslim (constant folding, dead code, fusion of no-op patterns).

    onnxslim's console tables are swallowed; only the summary line is logged.

    Raises:
        OptimiseError: If onnxslim fails on this graph (callers may go on without it).
    """
    import onnxslim  # heavy import (sympy), only when a build asks for it

    output = _prepare_output(source, output)
    model = load_onnx(source)
    before = operator_counts(model)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            slimmed = onnxslim.slim(model)
    except Exception as exc:  # onnxslim raises whatever its passes raise
        raise OptimiseError(
            say("onnxslim could not simplify the model: %(error)s", error=str(exc))
        ) from exc
    if not isinstance(slimmed, ModelProto):
        raise OptimiseError(say("onnxslim returned no model (its own result check failed)."))
    return _finish("simplify", before, slimmed, output, log, allow_external=allow_external)


def to_fp16(source: Path, output: Path, *, log: Log, allow_external: bool = True) -> StepReport:
    """Converts float32 weights and compute to float16, keeping float32 inputs and outputs.

    ``keep_io_types=True`` inserts Casts at the graph boundary, so the served
    signature (and every client) stays float32 while the body runs in FP16.
    ONNX Runtime's own block list keeps numerically fragile operators
    (TopK, Range, CumSum, ML operators, ...) in float32.

    Raises:
        OptimiseError: If the converter fails.
    """
    from onnxruntime.transformers.float16 import convert_float_to_float16

    output = _prepare_output(source, output)
    model = load_onnx(source)
    before = operator_counts(model)
    try:
        # Shape inference inside the converter cannot serialise protos over 2 GiB.
        big = model.ByteSize() >= SINGLE_FILE_LIMIT
        converted = convert_float_to_float16(model, keep_io_types=True, disable_shape_infer=big)
    except Exception as exc:
        raise OptimiseError(say("The FP16 conversion failed: %(error)s", error=str(exc))) from exc
    return _finish("fp16", before, converted, output, log, allow_external=allow_external)


def ort_optimise(source: Path, output: Path, level: str, *, log: Log) -> StepReport:
    """Runs ONNX Runtime's offline graph optimisation and saves the optimised graph.

    ``"extended"`` adds ONNX Runtime-specific fused operators (com.microsoft
    domain): the file then needs ONNX Runtime (of this version or newer) to
    run. ``"all"`` also adds layout transformations chosen for this CPU's
    instruction set, so the file may run slower or not at all elsewhere.

    Args:
        source: Input model (external data beside it).
        output: Optimised model; big weights go to ``<name>.data`` beside it.
        level: One of :data:`ORT_LEVELS`; ``"disabled"`` just re-saves the model.
        log: Receives the summary line.

    Raises:
        OptimiseError: If the level is unknown or ONNX Runtime cannot load the model.
    """
    import onnxruntime as ort

    if level not in ORT_LEVELS:
        raise OptimiseError(
            say(
                "Unknown optimisation level %(level)s; use one of %(levels)s.",
                level=repr(level),
                levels=str(ORT_LEVELS),
            )
        )
    output = _prepare_output(source, output)
    source_model = onnx.load(str(source), load_external_data=False)
    before = operator_counts(source_model)
    big = _uses_external_data(source_model) or Path(source).stat().st_size >= SINGLE_FILE_LIMIT
    del source_model
    levels = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }
    options = ort.SessionOptions()
    options.graph_optimization_level = levels[level]
    options.optimized_model_filepath = str(output)
    options.log_severity_level = 3  # warnings about unused initializers are noise here
    data_path = output.with_name(_data_file_name(output))
    data_path.unlink(missing_ok=True)
    if big:
        # ONNX Runtime writes the data file next to the optimised model, under this name.
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", data_path.name
        )
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
        )
    try:
        ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise OptimiseError(
            say("ONNX Runtime cannot load the model to optimise it: %(error)s", error=str(exc))
        ) from exc
    optimised = onnx.load(str(output), load_external_data=False)
    after = operator_counts(optimised)
    summary = _describe_change(f"onnxruntime optimisation ({level})", before, after)
    log(summary)
    files = [output, *([data_path] if data_path.exists() else [])]
    return StepReport(
        "ort_optimise", output, sum(before.values()), sum(after.values()), files, summary
    )


def _uses_external_data(model: ModelProto) -> bool:
    return any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer)


def convert_opset(
    source: Path, output: Path, target_opset: int, *, log: Log, allow_external: bool = True
) -> StepReport:
    """Converts the default-domain opset with ``onnx.version_converter``.

    Raises:
        OptimiseError: If the converter has no adapter for an operator on the
            way (the message names the converter's complaint).
    """
    from onnx import version_converter

    output = _prepare_output(source, output)
    model = load_onnx(source)
    before = operator_counts(model)
    current = next(
        (imp.version for imp in model.opset_import if imp.domain in ("", DEFAULT_DOMAIN)), None
    )
    try:
        converted = version_converter.convert_version(model, target_opset)
    except Exception as exc:
        raise OptimiseError(
            say(
                "The opset conversion from %(current)s to %(target)s failed: %(error)s",
                current=current,
                target=target_opset,
                error=str(exc),
            )
        ) from exc
    return _finish(
        f"opset {current} -> {target_opset}",
        before,
        converted,
        output,
        log,
        allow_external=allow_external,
    )


def fix_input_shapes(
    source: Path,
    output: Path,
    shapes: Mapping[str, Sequence[int]],
    *,
    log: Log,
    allow_external: bool = True,
) -> StepReport:
    """Gives inputs fixed dims and propagates them to outputs by shape inference.

    A symbolic dim (``"batch"``) fixed on one input is fixed everywhere it
    appears (other inputs, outputs, intermediate shapes), so tensors that
    shared a size keep sharing it.

    Args:
        source: Input model.
        output: Where to write the model with fixed input shapes.
        shapes: Input name -> full dims, each >= 1 (``-1`` keeps that dim as it is).
        log: Receives one line per input changed and the summary.
        allow_external: See :func:`save_onnx`.

    Raises:
        OptimiseError: If an input does not exist, the rank differs, a fixed
            dim would change, or one symbol would get two different sizes.
    """
    output = _prepare_output(source, output)
    model = load_onnx(source)
    before = operator_counts(model)
    initializers = {t.name for t in model.graph.initializer}
    graph_inputs = {v.name: v for v in model.graph.input if v.name not in initializers}
    symbols: dict[str, int] = {}
    for name, dims in shapes.items():
        if name not in graph_inputs:
            raise OptimiseError(
                say(
                    "There is no input %(name)s; the inputs are %(inputs)s.",
                    name=repr(name),
                    inputs=str(sorted(graph_inputs)),
                )
            )
        shape = graph_inputs[name].type.tensor_type.shape
        if len(shape.dim) != len(dims):
            raise OptimiseError(
                say(
                    "Input %(name)s has %(rank)s dims, but %(given)s were given (%(dims)s).",
                    name=repr(name),
                    rank=len(shape.dim),
                    given=len(dims),
                    dims=str(dims),
                )
            )
        for axis, (dim, value) in enumerate(zip(shape.dim, dims, strict=True)):
            _fix_one_dim(name, axis, dim, int(value), symbols)
        log(f"input {name!r}: shape fixed to {list(dims)}")
    _replace_symbols(model.graph, symbols)
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception as exc:  # inference is a refinement; the fixed inputs stand anyway
        log(f"shape inference after fixing shapes did not complete: {exc}")
    return _finish("fix input shapes", before, model, output, log, allow_external=allow_external)


def _fix_one_dim(
    name: str, axis: int, dim: onnx.TensorShapeProto.Dimension, value: int, symbols: dict[str, int]
) -> None:
    """Sets one input dim, recording the symbol it replaced."""
    if value == -1:
        return
    if value < 1:
        raise OptimiseError(
            say(
                "Input %(name)s axis %(axis)s: %(value)s is not a size (use >= 1).",
                name=repr(name),
                axis=axis,
                value=value,
            )
        )
    if dim.HasField("dim_value") and dim.dim_value > 0 and dim.dim_value != value:
        raise OptimiseError(
            say(
                "Input %(name)s axis %(axis)s is fixed to %(fixed)s in the model; "
                "it cannot become %(value)s.",
                name=repr(name),
                axis=axis,
                fixed=dim.dim_value,
                value=value,
            )
        )
    if dim.HasField("dim_param") and dim.dim_param:
        known = symbols.setdefault(dim.dim_param, value)
        if known != value:
            raise OptimiseError(
                say(
                    "Dimension %(dim)s is given two sizes (%(known)s and %(value)s); "
                    "inputs that share it must get the same size.",
                    dim=repr(dim.dim_param),
                    known=known,
                    value=value,
                )
            )
    dim.dim_value = value


def _replace_symbols(graph: GraphProto, symbols: Mapping[str, int]) -> None:
    """Replaces every occurrence of the fixed symbols in declared shapes, subgraphs included."""
    if not symbols:
        return
    for sub in _all_graphs(graph):
        for value in [*sub.input, *sub.output, *sub.value_info]:
            if not value.type.HasField("tensor_type"):
                continue
            for dim in value.type.tensor_type.shape.dim:
                if dim.HasField("dim_param") and dim.dim_param in symbols:
                    dim.dim_value = symbols[dim.dim_param]


def remove_model_files(path: Path) -> None:
    """Deletes a model written by these steps and its ``.data`` file, if any."""
    path.unlink(missing_ok=True)
    path.with_name(_data_file_name(path)).unlink(missing_ok=True)


def copy_model(source: Path, output: Path, *, log: Log, allow_external: bool = True) -> StepReport:
    """Re-saves a model unchanged: external data files of any name become ``<output>.data``.

    Used when no other step runs, so the output directory still holds only
    files this module named.
    """
    output = _prepare_output(source, output)
    model = load_onnx(source)
    before = operator_counts(model)
    return _finish("copy", before, model, output, log, allow_external=allow_external)

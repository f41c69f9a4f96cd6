"""What every deployment target provides, and the pieces the targets share.

A *target* decides what a version is built into (``model.onnx`` or
``model.om``), which build options the user may set, which model properties
would make it fail, and what ``config.pbtxt`` says. The web layer renders
forms and an API schema from :class:`OptionSpec`; workers call
:meth:`Target.parse_options`, :meth:`Target.check_model`, :meth:`Target.build`
and :meth:`Target.make_config`, in that order.

Options arrive from JSON or from HTML forms, so scalar values may also be
given as text that parses exactly (``"8"``, ``"true"``, ``"1,2,4"``); anything
else is refused with a message that names the field. Options whose default
depends on the model (``max_batch_size``, ``dynamic_batching``) default to
None ("automatic") and are filled in by :meth:`Target.resolve_options` once
the model's signature is known.

Example:
    >>> target = get_target("onnxruntime")
    >>> options = target.parse_options({"fp16": True}, info=info)
    >>> [f.message for f in target.check_model(info, options) if f.level == "error"]
    []
"""

from __future__ import annotations

import copy
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from model_store.config import DynamicBatching, ModelConfig, TensorSpec, Warmup, WarmupInput
from model_store.errors import InvalidConfig, ModelStoreError
from model_store.names import validate_tensor_name
from model_store.onnx_info import Dim, OnnxInfo, TensorInfo

OptionKind = Literal["bool", "int", "float", "choice", "str", "int_list", "shape"]
FindingLevel = Literal["error", "warning"]
Precision = Literal["fp32", "fp16", "mixed"]

# Batch limit offered when every input and output has a dynamic first axis.
DEFAULT_MAX_BATCH_SIZE = 8
MAX_BATCH_SIZE_LIMIT = 1024
MAX_TEXT_OPTION_LENGTH = 1024
MAX_LIST_ITEMS = 128

_TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
_FALSE_WORDS = frozenset({"false", "no", "off", "0"})
_INT_TEXT = re.compile(r"[+-]?[0-9]+")


class InvalidOptions(ModelStoreError):
    """Build options are malformed, out of range or contradict each other."""

    code = "invalid_options"


class UnknownTarget(InvalidOptions):
    """No target has the requested name."""

    code = "unknown_target"


class BuildCancelled(ModelStoreError):
    """The user cancelled the build; nothing was produced."""

    code = "cancelled"


# Options -------------------------------------------------------------------------


@dataclass(frozen=True)
class OptionSpec:
    """One build option, described well enough to generate a form and a JSON schema.

    Attributes:
        name: Key in the options dict.
        kind: ``bool``, ``int``, ``float``, ``choice`` (one of ``choices``),
            ``str``, ``int_list`` (list of ints) or ``shape`` (input name ->
            list of dims, ``-1`` for a dynamic dim).
        default: Value used when the key is absent or null. None means
            "not set" or, where the help says so, "automatic from the model".
        label: Short form label.
        help: One or two sentences: what it does and when to change it.
        choices: ``(value, label)`` pairs for ``choice`` options.
        minimum: Inclusive lower bound (numbers, and each item of int lists).
        maximum: Inclusive upper bound.
        advanced: Hidden behind "advanced" in the form.
        required: The user must give a value (no default).
        pattern: Regular expression a ``str`` value must match in full.
    """

    name: str
    kind: OptionKind
    default: Any
    label: str
    help: str
    choices: list[tuple[str, str]] | None = None
    minimum: float | None = None
    maximum: float | None = None
    advanced: bool = False
    required: bool = False
    pattern: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-able data (choices as ``[{"value", "label"}]``)."""
        data = asdict(self)
        data["choices"] = (
            [{"value": v, "label": lbl} for v, lbl in self.choices] if self.choices else None
        )
        return data

    def json_schema(self) -> dict[str, Any]:
        """JSON schema (draft 2020-12 / OpenAPI 3.1) of this option's value."""
        schema: dict[str, Any] = {"title": self.label, "description": self.help}
        if self.kind == "bool":
            schema["type"] = "boolean"
        elif self.kind in ("int", "float"):
            schema["type"] = "integer" if self.kind == "int" else "number"
            _bounds(schema, self.minimum, self.maximum, "minimum", "maximum")
        elif self.kind == "choice":
            schema["enum"] = [value for value, _ in self.choices or []]
        elif self.kind == "str":
            schema["type"] = "string"
            schema["maxLength"] = MAX_TEXT_OPTION_LENGTH
            if self.pattern:
                schema["pattern"] = f"^(?:{self.pattern})$"
        elif self.kind == "int_list":
            items: dict[str, Any] = {"type": "integer"}
            _bounds(items, self.minimum, self.maximum, "minimum", "maximum")
            schema.update(type="array", items=items, maxItems=MAX_LIST_ITEMS)
        else:  # shape
            dims = {"type": "array", "items": {"type": "integer", "minimum": -1}}
            schema.update(type="object", additionalProperties=dims)
        if self.default is None and not self.required:
            _allow_null(schema)
        else:
            schema["default"] = self.default
        return schema


def _bounds(
    schema: dict[str, Any], low: float | None, high: float | None, low_key: str, high_key: str
) -> None:
    if low is not None:
        schema[low_key] = low
    if high is not None:
        schema[high_key] = high


def _allow_null(schema: dict[str, Any]) -> None:
    """Lets a schema accept null ("use the automatic value")."""
    if "enum" in schema:
        schema["enum"] = [*schema["enum"], None]
    elif "type" in schema:
        schema["type"] = [schema["type"], "null"]
    schema["default"] = None


def _fail(spec: OptionSpec, problem: str) -> InvalidOptions:
    return InvalidOptions(f"Option '{spec.name}' ({spec.label}): {problem}")


def _parse_bool(spec: OptionSpec, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    raise _fail(spec, f"expected true or false, got {value!r}.")


def _check_range(spec: OptionSpec, number: float, what: str = "value") -> None:
    if spec.minimum is not None and number < spec.minimum:
        raise _fail(spec, f"{what} {number} is below the minimum {spec.minimum:g}.")
    if spec.maximum is not None and number > spec.maximum:
        raise _fail(spec, f"{what} {number} is above the maximum {spec.maximum:g}.")


def _to_int(spec: OptionSpec, value: object, what: str = "value") -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
        return int(value.strip())
    raise _fail(spec, f"{what} must be a whole number, got {value!r}.")


def _parse_int(spec: OptionSpec, value: object) -> int:
    number = _to_int(spec, value)
    _check_range(spec, number)
    return number


def _parse_float(spec: OptionSpec, value: object) -> float:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise _fail(spec, f"expected a finite number, got {value!r}.")
    _check_range(spec, number)
    return number


def _parse_choice(spec: OptionSpec, value: object) -> str:
    allowed = [v for v, _ in spec.choices or []]
    if not isinstance(value, str) or value not in allowed:
        raise _fail(spec, f"{value!r} is not one of: {', '.join(allowed)}.")
    return value


def _parse_str(spec: OptionSpec, value: object) -> str:
    if not isinstance(value, str):
        raise _fail(spec, f"expected text, got {type(value).__name__}.")
    text = value.strip()
    if len(text) > MAX_TEXT_OPTION_LENGTH or not text.isprintable():
        raise _fail(spec, "the text is too long or contains control characters.")
    if spec.pattern and not re.fullmatch(spec.pattern, text):
        raise _fail(spec, f"{text!r} does not have the expected form. {spec.help}")
    return text


def _parse_int_list(spec: OptionSpec, value: object) -> list[int]:
    items: Sequence[object]
    if isinstance(value, str):
        items = [part for part in re.split(r"[,;\s]+", value.strip()) if part]
    elif isinstance(value, list | tuple):
        items = value
    else:
        raise _fail(spec, f"expected a list of whole numbers, got {value!r}.")
    if len(items) > MAX_LIST_ITEMS:
        raise _fail(spec, f"at most {MAX_LIST_ITEMS} numbers are allowed.")
    numbers = [_to_int(spec, item, "each item") for item in items]
    for number in numbers:
        _check_range(spec, number, "item")
    return sorted(set(numbers))  # order and repeats carry no meaning for batch sizes


def _parse_dims(spec: OptionSpec, name: str, dims: object) -> list[int]:
    parts: Sequence[object]
    if isinstance(dims, str):
        parts = [p for p in dims.replace(" ", "").split(",") if p]
    elif isinstance(dims, list | tuple):
        parts = dims
    else:
        raise _fail(spec, f"the dims of {name!r} must be a list or text like '1,3,224,224'.")
    values = [_to_int(spec, part, f"a dim of {name!r}") for part in parts]
    if not values or len(values) > 16:
        raise _fail(spec, f"{name!r} needs between 1 and 16 dims, got {len(values)}.")
    if any(v < 1 and v != -1 for v in values):
        raise _fail(spec, f"dims of {name!r} must be >= 1 (or -1 for dynamic), got {values}.")
    return values


def _parse_shape(spec: OptionSpec, value: object) -> dict[str, list[int]] | None:
    """``{"x": [1,3,224,224]}``, ``{"x": "1,3,224,224"}`` or ``"x:1,3,224,224;y:1,16"``."""
    entries: dict[object, object]
    if isinstance(value, str):
        entries = {}
        for part in (p.strip() for p in value.split(";")):
            if not part:
                continue
            name, sep, dims_text = part.rpartition(":")
            if not sep or not name:
                raise _fail(spec, f"{part!r} should look like 'input_name:1,3,224,224'.")
            entries[name.strip()] = dims_text
    elif isinstance(value, Mapping):
        entries = dict(value)
    else:
        raise _fail(spec, "expected input names mapped to dims, e.g. {'input': '1,3,224,224'}.")
    shapes: dict[str, list[int]] = {}
    for key, dims in entries.items():
        try:
            validate_tensor_name(key)
        except ModelStoreError as exc:
            raise _fail(spec, exc.message) from None
        shapes[str(key)] = _parse_dims(spec, str(key), dims)
    return shapes or None


_PARSERS: dict[str, Callable[[OptionSpec, object], Any]] = {
    "bool": _parse_bool,
    "int": _parse_int,
    "float": _parse_float,
    "choice": _parse_choice,
    "str": _parse_str,
    "int_list": _parse_int_list,
    "shape": _parse_shape,
}


def parse_value(spec: OptionSpec, value: object) -> Any:
    """Parses one option value; None or empty text means the default.

    Raises:
        InvalidOptions: If the value has the wrong type, form or range, or a
            required option is missing.
    """
    if isinstance(value, str) and not value.strip():
        value = None  # an empty form field means "not set"
    if value is None:
        if spec.required:
            raise _fail(spec, "a value is required. " + spec.help)
        return copy.deepcopy(spec.default)
    return _PARSERS[spec.kind](spec, value)


def options_json_schema(target: Target) -> dict[str, Any]:
    """JSON schema of ``target``'s options object (for OpenAPI and client-side checks)."""
    specs = target.option_specs()
    return {
        "title": f"{target.label} build options",
        "type": "object",
        "additionalProperties": False,
        "properties": {spec.name: spec.json_schema() for spec in specs},
        "required": [spec.name for spec in specs if spec.required],
    }


# Findings, build context and results ----------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One problem found in a model for a target.

    Attributes:
        level: ``error`` (the build would fail or the model would not serve)
            or ``warning`` (it works, but not as the user may expect).
        code: Stable machine identifier, e.g. ``"unnamed_dynamic_output_dim"``.
        message: What is wrong, in plain words.
        advice: What to do about it.
    """

    level: FindingLevel
    code: str
    message: str
    advice: str

    def to_dict(self) -> dict[str, str]:
        """The finding as JSON-able data."""
        return asdict(self)


def error(code: str, message: str, advice: str) -> Finding:
    """Shorthand for an error finding."""
    return Finding("error", code, message, advice)


def warning(code: str, message: str, advice: str) -> Finding:
    """Shorthand for a warning finding."""
    return Finding("warning", code, message, advice)


def _ignore_log(_line: str) -> None:
    return None


def _ignore_progress(_fraction: float) -> None:
    return None


def _never() -> bool:
    return False


@dataclass
class BuildContext:
    """Everything a build needs; the worker fills it and streams ``log``/``progress``.

    Attributes:
        source: The uploaded ``.onnx`` (external data files beside it).
        workdir: An empty directory on the store's filesystem; the build
            leaves only the artifact there (and, for the onnxruntime target,
            ``model.onnx.data`` for models over 2 GiB).
        info: ``inspect_onnx(source)``.
        options: Options as stored (raw or parsed); the build parses them again
            with the model, which is idempotent, so defaults are always filled.
        log: Receives one human-readable line at a time.
        progress: Receives the fraction done, 0.0 to 1.0.
        cancelled: Polled between steps (and by ATC); True stops the build.
        env: Environment for tools (ATC_PATH, ASCEND_TOOLKIT_HOME, PATH, ...).
    """

    source: Path
    workdir: Path
    info: OnnxInfo
    options: dict[str, Any]
    log: Callable[[str], None] = _ignore_log
    progress: Callable[[float], None] = _ignore_progress
    cancelled: Callable[[], bool] = _never
    env: Mapping[str, str] = field(default_factory=dict)

    def check_cancelled(self) -> None:
        """Raises :class:`BuildCancelled` if the user asked to stop."""
        if self.cancelled():
            raise BuildCancelled("The build was cancelled; nothing was produced.")


@dataclass
class BuildResult:
    """What a build produced.

    Attributes:
        artifact: Path of the file to put in the version directory.
        artifact_name: Its name there: ``model.onnx`` or ``model.om``.
        commands: Shell lines actually run (e.g. the ATC command), copyable.
        notes: Plain-words remarks for the version page (skipped steps, fallbacks).
        compiled_info: ``inspect_onnx`` of an ONNX artifact (pass it to
            :meth:`Target.make_config`), None for an OM.
    """

    artifact: Path
    artifact_name: str
    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    compiled_info: OnnxInfo | None = None


@dataclass(frozen=True)
class TargetStatus:
    """Whether this worker can build for a target, and why not."""

    available: bool
    reason: str


@dataclass(frozen=True)
class VerifyPlan:
    """How to call :func:`model_store.verify.verify` for a version of this target.

    Attributes:
        artifact_kind: ``"onnx"`` or ``"om"``.
        precision: Tolerance set to apply (``fp32``, ``fp16``, ``mixed``).
        batch: Batch size for random inputs (a gear for OMs with gears).
        input_shapes: Full input shapes to use instead of the signature's
            (for artifacts compiled with fixed shapes), or None.
        note: What the verification does and does not measure.
    """

    artifact_kind: Literal["onnx", "om"]
    precision: Precision
    batch: int
    input_shapes: dict[str, list[int]] | None
    note: str


# Signature helpers shared by the targets --------------------------------------------


def is_fixed(dim: Dim) -> bool:
    """True for a concrete size (> 0); symbolic names and unknowns are dynamic."""
    return isinstance(dim, int) and dim > 0


def symbol_sizes(info: OnnxInfo, overrides: Mapping[str, Sequence[int]] | None) -> dict[str, int]:
    """Sizes that input shape overrides give to symbolic dims (``{"batch": 1}``)."""
    sizes: dict[str, int] = {}
    by_name = {t.name: t for t in info.inputs}
    for name, dims in (overrides or {}).items():
        tensor = by_name.get(name)
        if tensor is None or tensor.dims is None or len(tensor.dims) != len(dims):
            continue
        for dim, value in zip(tensor.dims, dims, strict=True):
            if isinstance(dim, str) and value > 0:
                sizes.setdefault(dim, value)
    return sizes


def effective_dims(
    tensor: TensorInfo,
    overrides: Mapping[str, Sequence[int]] | None,
    sizes: Mapping[str, int],
) -> list[Dim] | None:
    """A tensor's dims after shape overrides: overridden inputs, substituted symbols elsewhere.

    ``-1`` in an override keeps the model's own dim. An override of the wrong
    rank is ignored here (``signature_findings`` reports it).
    """
    given = (overrides or {}).get(tensor.name)
    if given is not None and (tensor.dims is None or len(tensor.dims) == len(given)):
        original: list[Dim] = list(tensor.dims) if tensor.dims else [None] * len(given)
        return [value if value > 0 else dim for value, dim in zip(given, original, strict=True)]
    if tensor.dims is None:
        return None
    return [sizes.get(d, d) if isinstance(d, str) else d for d in tensor.dims]


def has_dynamic_batch_axis(
    info: OnnxInfo, overrides: Mapping[str, Sequence[int]] | None = None
) -> bool:
    """True when every input and output has a dynamic first axis (a batch Triton can use)."""
    sizes = symbol_sizes(info, overrides)
    tensors = [*info.inputs, *info.outputs]
    if not info.inputs:
        return False
    for tensor in tensors:
        dims = effective_dims(tensor, overrides, sizes)
        if not dims or is_fixed(dims[0]):
            return False
    return True


def signature_findings(
    info: OnnxInfo,
    max_batch_size: int,
    overrides: Mapping[str, Sequence[int]] | None = None,
) -> list[Finding]:
    """Problems every target shares: missing IO, non-tensor IO, ranks, batch axis, overrides."""
    found: list[Finding] = []
    if not info.inputs:
        found.append(
            error(
                "no_inputs",
                "The model has no inputs, so Triton has nothing to feed it.",
                "Export the model with its real inputs (not as constants).",
            )
        )
    found += _override_findings(info, overrides)
    sizes = symbol_sizes(info, overrides)
    for role, tensors in (("input", info.inputs), ("output", info.outputs)):
        for tensor in tensors:
            dims = effective_dims(tensor, overrides, sizes)
            found += _tensor_findings(role, tensor, dims)
            if max_batch_size > 0 and dims is not None and (not dims or is_fixed(dims[0])):
                found.append(
                    error(
                        "batch_axis_not_dynamic",
                        f"The {role} {tensor.name!r} has shape {dims}, whose first axis is "
                        f"fixed, but max_batch_size is {max_batch_size}, which makes Triton "
                        "treat the first axis as the batch.",
                        "Set max_batch_size to 0, or export the model with a dynamic first "
                        "axis on every input and output.",
                    )
                )
    return found


def _tensor_findings(role: str, tensor: TensorInfo, dims: list[Dim] | None) -> list[Finding]:
    found = []
    if tensor.triton_type is None:
        found.append(
            error(
                "unsupported_io_type",
                f"The {role} {tensor.name!r} is of type {tensor.onnx_type}, which Triton "
                "cannot carry.",
                "Export the model so that every input and output is a plain tensor of a "
                "float, integer, bool or string type.",
            )
        )
    if dims is None and tensor.triton_type is not None:
        if role == "input":
            found.append(
                error(
                    "unknown_rank",
                    f"The input {tensor.name!r} has no shape in the model, so its config "
                    "cannot be written.",
                    "Export the model with input shapes (dynamic axes are fine).",
                )
            )
        else:
            found.append(
                warning(
                    "unknown_rank",
                    f"The output {tensor.name!r} has no shape in the model; the build's "
                    "shape inference has to find it.",
                    "If the build then fails to write the config, export the model with "
                    "output shapes or run onnx shape inference on it first.",
                )
            )
    return found


def _override_findings(
    info: OnnxInfo, overrides: Mapping[str, Sequence[int]] | None
) -> list[Finding]:
    found: list[Finding] = []
    by_name = {t.name: t for t in info.inputs}
    for name, dims in (overrides or {}).items():
        tensor = by_name.get(name)
        if tensor is None:
            found.append(
                error(
                    "shape_for_unknown_input",
                    f"A shape is given for {name!r}, which is not an input of the model.",
                    f"Use the input names: {', '.join(sorted(by_name)) or '(none)'}.",
                )
            )
            continue
        if tensor.dims is None:
            continue
        if len(tensor.dims) != len(dims):
            found.append(
                error(
                    "shape_rank_mismatch",
                    f"The shape given for {name!r} has {len(dims)} dims, but the input has "
                    f"{len(tensor.dims)} ({tensor.dims}).",
                    "Give one value per axis.",
                )
            )
            continue
        for axis, (dim, value) in enumerate(zip(tensor.dims, dims, strict=True)):
            if is_fixed(dim) and value > 0 and value != dim:
                found.append(
                    error(
                        "shape_conflicts_with_model",
                        f"Axis {axis} of {name!r} is fixed to {dim} in the model, but the "
                        f"given shape says {value}.",
                        f"Use {dim} for that axis (or -1 to keep it).",
                    )
                )
    return found


def config_tensors(
    tensors: Sequence[TensorInfo],
    *,
    batched: bool,
    overrides: Mapping[str, Sequence[int]] | None,
    sizes: Mapping[str, int],
) -> list[TensorSpec]:
    """Config entries for inputs or outputs: Triton types, ``-1`` for dynamic dims.

    Raises:
        InvalidConfig: If a tensor has no Triton type or no known rank.
    """
    specs = []
    for tensor in tensors:
        dims = effective_dims(tensor, overrides, sizes)
        if tensor.triton_type is None or dims is None:
            raise InvalidConfig(
                f"The tensor {tensor.name!r} has no Triton type or no known rank, so "
                "config.pbtxt cannot describe it. Export the model with plain tensors "
                "and shapes on every input and output."
            )
        values = [d if isinstance(d, int) and d > 0 else -1 for d in dims]
        if batched:
            values = values[1:]
        if not values:  # a batched vector: Triton wants at least one dim
            values = [1]
        specs.append(TensorSpec(tensor.name, tensor.triton_type, values))
    return specs


def warmup_for(inputs: Sequence[TensorSpec], batch_size: int) -> tuple[list[Warmup], str | None]:
    """One random-data warm-up request, so that READY means the first request is fast.

    Returns:
        The warm-up list (empty when it cannot be formed) and, if empty, why.
    """
    if any(spec.data_type == "TYPE_STRING" for spec in inputs):
        return [], "No warm-up request: random data cannot be made for string inputs."
    if any(d < 0 for spec in inputs for d in spec.dims):
        # A made-up size for a dynamic axis could fail the warm-up and with it the load.
        return [], "No warm-up request: some input dims are dynamic, so no safe size is known."
    inputs_data = {
        spec.name: WarmupInput(spec.data_type, list(spec.dims), random_data=True) for spec in inputs
    }
    return [Warmup("random_sample", batch_size, inputs_data)], None


def dynamic_batching_for(options: Mapping[str, Any]) -> DynamicBatching | None:
    """Triton's dynamic batcher from resolved options, or None when it is off."""
    if not options.get("dynamic_batching"):
        return None
    return DynamicBatching(
        preferred_batch_size=list(options.get("preferred_batch_sizes") or []),
        max_queue_delay_microseconds=int(options.get("max_queue_delay_us") or 0),
    )


# Option specs shared by several targets ------------------------------------------------


def batching_specs(*, include_preferred: bool = True) -> list[OptionSpec]:
    """max_batch_size, dynamic_batching, preferred_batch_sizes, max_queue_delay_us."""
    specs = [
        OptionSpec(
            "max_batch_size",
            "int",
            None,
            "Max batch size",
            "Largest batch Triton forms along the first axis. Automatic: "
            f"{DEFAULT_MAX_BATCH_SIZE} when every input and output has a dynamic first axis, "
            "else 0 (no batching; dims then include the first axis).",
            minimum=0,
            maximum=MAX_BATCH_SIZE_LIMIT,
        ),
        OptionSpec(
            "dynamic_batching",
            "bool",
            None,
            "Dynamic batching",
            "Let Triton merge concurrent requests into one batch. Automatic: on when "
            "max_batch_size > 0.",
        ),
    ]
    if include_preferred:
        specs.append(
            OptionSpec(
                "preferred_batch_sizes",
                "int_list",
                [],
                "Preferred batch sizes",
                "Batch sizes the batcher aims for, e.g. 4,8; each at most max_batch_size. "
                "Empty: any size up to the maximum.",
                minimum=1,
                maximum=MAX_BATCH_SIZE_LIMIT,
                advanced=True,
            )
        )
    specs.append(
        OptionSpec(
            "max_queue_delay_us",
            "int",
            100,
            "Max queue delay (µs)",
            "How long a request may wait for others to form a batch. Higher gives bigger "
            "batches and more latency.",
            minimum=0,
            maximum=10_000_000,
            advanced=True,
        )
    )
    return specs


def instance_count_spec(help_text: str) -> OptionSpec:
    """How many model instances Triton creates."""
    return OptionSpec(
        "instance_count", "int", 1, "Instances", help_text, minimum=1, maximum=64, advanced=True
    )


def check_batching_options(options: Mapping[str, Any]) -> None:
    """Cross-field rules on batching that need no model; raises InvalidOptions."""
    mbs = options.get("max_batch_size")
    if options.get("dynamic_batching") is True and mbs == 0:
        raise InvalidOptions(
            "Option 'dynamic_batching' is on but 'max_batch_size' is 0; dynamic batching "
            "needs a max_batch_size above 0. Raise max_batch_size or turn batching off."
        )
    preferred = options.get("preferred_batch_sizes") or []
    if mbs is not None and any(size > mbs for size in preferred):
        raise InvalidOptions(
            f"Option 'preferred_batch_sizes' {preferred} has sizes above max_batch_size {mbs}; "
            "each preferred size must be at most max_batch_size."
        )


def resolve_batching(
    options: dict[str, Any],
    info: OnnxInfo,
    *,
    overrides: Mapping[str, Sequence[int]] | None = None,
) -> None:
    """Fills automatic max_batch_size / dynamic_batching in place, then re-checks the rules."""
    if options.get("max_batch_size") is None:
        dynamic = has_dynamic_batch_axis(info, overrides)
        options["max_batch_size"] = DEFAULT_MAX_BATCH_SIZE if dynamic else 0
    if options.get("dynamic_batching") is None:
        options["dynamic_batching"] = options["max_batch_size"] > 0
    check_batching_options(options)


# The target interface ---------------------------------------------------------------


class Target(ABC):
    """A deployment target: options, model checks, build, and config.pbtxt.

    Class attributes:
        name: Stable identifier stored with each version (``"onnxruntime"``).
        label: Human name for the UI.
        description: One sentence for the UI.
        backend: The ``backend`` written in config.pbtxt.
        artifact_name: File name in the version directory.
        needs_cann: Building needs the Ascend CANN toolkit on the worker.
        hardware_verified: False when this target's output has never been run
            on real hardware by this project (the UI says "not run on hardware").
        device: ``"cpu"`` or ``"npu"``: which device's memory the model uses.
        versions_side_by_side: True when a model's versions sit side by side in its
            Triton directory and config.pbtxt's ``version_policy`` picks the one that
            serves; False when the directory holds only the serving version and a switch
            swaps the whole directory (the GE backend runs the first ``.onnx`` it finds).
        reports_statistics: False when the backend reports no counts or latencies to
            Triton's statistics extension, so the only numbers are the hub's own calls.

    This class is the one place for such facts: the registry's choices, the API schema,
    serving, packaging, metrics and advice read them from here.
    """

    name: ClassVar[str]
    label: ClassVar[str]
    description: ClassVar[str]
    backend: ClassVar[str]
    artifact_name: ClassVar[str]
    needs_cann: ClassVar[bool] = False
    hardware_verified: ClassVar[bool] = True
    device: ClassVar[Literal["cpu", "npu"]] = "cpu"
    versions_side_by_side: ClassVar[bool] = True
    reports_statistics: ClassVar[bool] = True

    @abstractmethod
    def option_specs(self) -> list[OptionSpec]:
        """The options this target accepts, in form order."""

    def parse_options(
        self, raw: Mapping[str, object], *, info: OnnxInfo | None = None
    ) -> dict[str, Any]:
        """Parses user options strictly and fills defaults.

        Parsing is idempotent: parsed options parse to themselves, so they can
        be stored as JSON and parsed again later.

        Args:
            raw: Options from JSON or a form. Unknown keys are refused.
            info: The model, if known; automatic values are then resolved.

        Returns:
            A new dict with every option present.

        Raises:
            InvalidOptions: Naming the field that is wrong and why.
        """
        if not isinstance(raw, Mapping):
            raise InvalidOptions("Options must be an object mapping option names to values.")
        specs = {spec.name: spec for spec in self.option_specs()}
        unknown = sorted(str(key) for key in raw if key not in specs)
        if unknown:
            raise InvalidOptions(
                f"Unknown option(s) for target {self.name!r}: {', '.join(unknown)}. "
                f"Known options: {', '.join(specs)}."
            )
        options = {name: parse_value(spec, raw.get(name)) for name, spec in specs.items()}
        self.check_options(options)
        if info is not None:
            options = self.resolve_options(options, info)
        return options

    def check_options(self, options: dict[str, Any]) -> None:
        """Cross-field rules that need no model (override to add); raises InvalidOptions."""
        check_batching_options(options)

    def resolve_options(self, options: Mapping[str, Any], info: OnnxInfo) -> dict[str, Any]:
        """Returns a copy of parsed options with automatic values filled from the model.

        Raises:
            InvalidOptions: If the resolved values contradict each other.
        """
        resolved = dict(options)
        resolve_batching(resolved, info, overrides=resolved.get("input_shapes"))
        return resolved

    @abstractmethod
    def check_model(self, info: OnnxInfo, options: Mapping[str, Any]) -> list[Finding]:
        """Problems with this model and these (raw or parsed) options; invalid options
        become an ``invalid_options`` finding rather than an exception."""

    @abstractmethod
    def build(self, ctx: BuildContext) -> BuildResult:
        """Builds the artifact into ``ctx.workdir``.

        Raises:
            ModelStoreError: A subclass saying what failed and what to do
                (BuildCancelled when cancelled).
        """

    @abstractmethod
    def make_config(
        self, name: str, info: OnnxInfo, options: Mapping[str, Any], version: int
    ) -> ModelConfig:
        """The ``ModelConfig`` for serving ``version`` of model ``name``.

        Pass ``BuildResult.compiled_info`` as ``info`` when the build returned
        one (its signature is what is served), else the source's info.
        ``options`` may be raw or parsed.

        Raises:
            InvalidOptions: If the options are invalid for this model.
            InvalidConfig: If a tensor has no Triton type or rank.
        """

    @abstractmethod
    def status(self, env: Mapping[str, str]) -> TargetStatus:
        """Whether this worker can build for the target (``env``: the worker's environment)."""

    @abstractmethod
    def verify_plan(self, options: Mapping[str, Any], info: OnnxInfo) -> VerifyPlan:
        """How to verify an artifact of this target against its source."""

    def findings_from_options(
        self, info: OnnxInfo, options: Mapping[str, Any]
    ) -> tuple[dict[str, Any] | None, list[Finding]]:
        """Parses options for ``check_model``: (resolved, []) or (None, [finding])."""
        try:
            return self.parse_options(options, info=info), []
        except InvalidOptions as exc:
            return None, [
                error("invalid_options", exc.message, "Change the options and try again.")
            ]

    def copies_per_device(
        self, instances: int, *, devices: int = 1, parameters: Mapping[str, str] | None = None
    ) -> tuple[int, str]:
        """How many copies of the model's weights and buffers one device holds, and why.

        The default: every instance is its own session with its own weights, and instances
        run at the same time, so copies = instances (``devices`` and ``parameters``, the
        config.pbtxt ``parameters``, do not matter then).
        """
        return max(1, int(instances)), "each instance holds its own weights and buffers"

    def to_dict(self, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The target for the UI/API: name, label, flags, options and (with env) status."""
        data: dict[str, Any] = {
            "name": self.name,
            "label": self.label,
            "description": self.description,
            "backend": self.backend,
            "artifact_name": self.artifact_name,
            "needs_cann": self.needs_cann,
            "hardware_verified": self.hardware_verified,
            "device": self.device,
            "versions_side_by_side": self.versions_side_by_side,
            "reports_statistics": self.reports_statistics,
            "options": [spec.to_dict() for spec in self.option_specs()],
        }
        if env is not None:
            status = self.status(env)
            data["status"] = {"available": status.available, "reason": status.reason}
        return data

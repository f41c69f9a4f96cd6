"""Signature helpers the targets share: fixed and dynamic dims, shape overrides, the
tensors and warm-up written to config.pbtxt, and the findings about a model's signature."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from model_store.config import TensorSpec, Warmup, WarmupInput
from model_store.errors import InvalidConfig
from model_store.onnx_info import Dim, OnnxInfo, TensorInfo
from model_store.targets.findings import Finding, error, warning
from model_store.text import say


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
                say("The model has no inputs, so Triton has nothing to feed it."),
                say("Export the model with its real inputs (not as constants)."),
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
                        say(
                            "The input %(name)r has shape %(dims)s, whose first axis is "
                            "fixed, but max_batch_size is %(max_batch_size)s, which makes "
                            "Triton treat the first axis as the batch.",
                            name=tensor.name,
                            dims=str(dims),
                            max_batch_size=max_batch_size,
                        )
                        if role == "input"
                        else say(
                            "The output %(name)r has shape %(dims)s, whose first axis is "
                            "fixed, but max_batch_size is %(max_batch_size)s, which makes "
                            "Triton treat the first axis as the batch.",
                            name=tensor.name,
                            dims=str(dims),
                            max_batch_size=max_batch_size,
                        ),
                        say(
                            "Set max_batch_size to 0, or export the model with a dynamic first "
                            "axis on every input and output."
                        ),
                    )
                )
    return found


def _tensor_findings(role: str, tensor: TensorInfo, dims: list[Dim] | None) -> list[Finding]:
    found = []
    if tensor.triton_type is None:
        found.append(
            error(
                "unsupported_io_type",
                say(
                    "The input %(name)r is of type %(type)s, which Triton cannot carry.",
                    name=tensor.name,
                    type=tensor.onnx_type,
                )
                if role == "input"
                else say(
                    "The output %(name)r is of type %(type)s, which Triton cannot carry.",
                    name=tensor.name,
                    type=tensor.onnx_type,
                ),
                say(
                    "Export the model so that every input and output is a plain tensor of a "
                    "float, integer, bool or string type."
                ),
            )
        )
    if dims is None and tensor.triton_type is not None:
        if role == "input":
            found.append(
                error(
                    "unknown_rank",
                    say(
                        "The input %(name)r has no shape in the model, so its config "
                        "cannot be written.",
                        name=tensor.name,
                    ),
                    say("Export the model with input shapes (dynamic axes are fine)."),
                )
            )
        else:
            found.append(
                warning(
                    "unknown_rank",
                    say(
                        "The output %(name)r has no shape in the model; the build's "
                        "shape inference has to find it.",
                        name=tensor.name,
                    ),
                    say(
                        "If the build then fails to write the config, export the model with "
                        "output shapes or run onnx shape inference on it first."
                    ),
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
                    say(
                        "A shape is given for %(name)r, which is not an input of the model.",
                        name=name,
                    ),
                    say("Use the input names: %(names)s.", names=", ".join(sorted(by_name)))
                    if by_name
                    else say("Use the input names: (none)."),
                )
            )
            continue
        if tensor.dims is None:
            continue
        if len(tensor.dims) != len(dims):
            found.append(
                error(
                    "shape_rank_mismatch",
                    say(
                        "The shape given for %(name)r has %(given)s dims, but the input has "
                        "%(rank)s (%(dims)s).",
                        name=name,
                        given=len(dims),
                        rank=len(tensor.dims),
                        dims=str(tensor.dims),
                    ),
                    say("Give one value per axis."),
                )
            )
            continue
        for axis, (dim, value) in enumerate(zip(tensor.dims, dims, strict=True)):
            if is_fixed(dim) and value > 0 and value != dim:
                found.append(
                    error(
                        "shape_conflicts_with_model",
                        say(
                            "Axis %(axis)s of %(name)r is fixed to %(dim)s in the model, but "
                            "the given shape says %(value)s.",
                            axis=axis,
                            name=name,
                            dim=dim,
                            value=value,
                        ),
                        say("Use %(dim)s for that axis (or -1 to keep it).", dim=dim),
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

"""Checks of a model configuration, in plain words: :func:`lint`.

Apart from :mod:`model_store.config` (the dataclasses and their protobuf wire forms) because
these are the hub's own rules on top of Triton's schema, read by the forms and the pipeline,
and grow with every rule; the conversions do not need them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from model_store.config import INSTANCE_KINDS, VARIABLE_DIM, ModelConfig, TensorSpec
from model_store.dtypes import is_triton_type
from model_store.errors import ModelStoreError
from model_store.names import validate_model_name, validate_tensor_name, validate_version
from model_store.text import Said, say


def _problem(exc: ModelStoreError) -> Said:
    return exc.message


def _lint_tensor(spec: TensorSpec, role: str) -> list[Said]:
    """Problems with one tensor on its own: name, type, dims."""
    problems: list[Said] = []
    inp = role == "Input"
    try:
        validate_tensor_name(spec.name)
    except ModelStoreError as exc:
        problems.append(_problem(exc))
    if not is_triton_type(spec.data_type):
        problems.append(
            say(
                "Input %(name)r has data type %(type)r, which is not supported.",
                name=spec.name,
                type=spec.data_type,
            )
            if inp
            else say(
                "Output %(name)r has data type %(type)r, which is not supported.",
                name=spec.name,
                type=spec.data_type,
            )
        )
    if not spec.dims:
        problems.append(
            say("Input %(name)r has no dims; give its shape (use -1 for any size).", name=spec.name)
            if inp
            else say(
                "Output %(name)r has no dims; give its shape (use -1 for any size).",
                name=spec.name,
            )
        )
    if any(d < 1 and d != VARIABLE_DIM for d in spec.dims):
        problems.append(
            say(
                "Input %(name)r has dims %(dims)s; each must be >= 1 or -1.",
                name=spec.name,
                dims=str(spec.dims),
            )
            if inp
            else say(
                "Output %(name)r has dims %(dims)s; each must be >= 1 or -1.",
                name=spec.name,
                dims=str(spec.dims),
            )
        )
    return problems


def _lint_tensors(cfg: ModelConfig) -> list[Said]:
    """Problems with the input and output lists: empty, duplicates, each tensor."""
    problems: list[Said] = []
    for role, specs in (("Input", cfg.inputs), ("Output", cfg.outputs)):
        inp = role == "Input"
        if not specs:
            problems.append(
                say("The model has no inputs; list at least one.")
                if inp
                else say("The model has no outputs; list at least one.")
            )
        for spec in specs:
            problems.extend(_lint_tensor(spec, role))
        duplicates = sorted(n for n, c in Counter(s.name for s in specs).items() if c > 1)
        for dup in duplicates:
            problems.append(
                say("Input name %(name)r is used more than once; names must be unique.", name=dup)
                if inp
                else say(
                    "Output name %(name)r is used more than once; names must be unique.", name=dup
                )
            )
    return problems


def _lint_batching(cfg: ModelConfig) -> list[Said]:
    """Problems with max_batch_size, dynamic batching and static_model."""
    problems: list[Said] = []
    mbs = cfg.max_batch_size
    if mbs < 0:
        problems.append(
            say(
                "max_batch_size is %(max_batch_size)s; use 0 (no batching) or a positive number.",
                max_batch_size=mbs,
            )
        )
    batching = cfg.dynamic_batching
    if batching is None:
        return problems
    if mbs <= 0:
        problems.append(
            say("dynamic_batching needs max_batch_size > 0; set one or remove batching.")
        )
    for size in batching.preferred_batch_size:
        if not 1 <= size <= max(mbs, 0):
            problems.append(
                say(
                    "Preferred batch size %(size)s is outside 1..max_batch_size "
                    "(%(max_batch_size)s).",
                    size=size,
                    max_batch_size=mbs,
                )
            )
    if batching.max_queue_delay_microseconds < 0:
        problems.append(say("max_queue_delay_microseconds must not be negative."))
    if cfg.parameters.get("static_model") == "1":
        problems.append(
            say(
                "Parameter static_model=1 (GE static graph) cannot be combined with "
                "dynamic_batching; remove one of them."
            )
        )
    return problems


def _lint_instances_and_versions(cfg: ModelConfig) -> list[Said]:
    """Problems with the instance group and the version policy."""
    problems: list[Said] = []
    if cfg.instance_count < 1:
        problems.append(
            say("instance count is %(count)s; use 1 or more.", count=cfg.instance_count)
        )
    if cfg.instance_kind not in INSTANCE_KINDS:
        problems.append(
            say(
                "Instance kind %(kind)r is not one of %(kinds)s.",
                kind=cfg.instance_kind,
                kinds=str(INSTANCE_KINDS),
            )
        )
    versions = cfg.version_policy_specific
    if versions is not None:
        if not versions:
            problems.append(say("version_policy lists no versions; list the version to serve."))
        for version in versions:
            try:
                validate_version(version)
            except ModelStoreError as exc:
                problems.append(_problem(exc))
        if len(set(versions)) != len(versions):
            problems.append(say("version_policy lists a version twice."))
    return problems


def _lint_warmup(cfg: ModelConfig) -> list[Said]:
    """Problems with warm-up requests: batch size and input names."""
    problems: list[Said] = []
    input_names = {spec.name for spec in cfg.inputs}
    for warmup in cfg.warmup:
        if not 1 <= warmup.batch_size <= max(cfg.max_batch_size, 1):
            problems.append(
                say(
                    "Warm-up %(name)r has batch size %(size)s; use 1..%(largest)s.",
                    name=warmup.name,
                    size=warmup.batch_size,
                    largest=max(cfg.max_batch_size, 1),
                )
            )
        for unknown in sorted(set(warmup.inputs) - input_names):
            problems.append(
                say(
                    "Warm-up %(name)r feeds %(input)r, which is not an input.",
                    name=warmup.name,
                    input=unknown,
                )
            )
        for missing in sorted(input_names - set(warmup.inputs)):
            problems.append(
                say(
                    "Warm-up %(name)r gives no data for input %(input)r.",
                    name=warmup.name,
                    input=missing,
                )
            )
    return problems


def _dim_fits(config_dim: int, model_dim: int | str | None) -> bool:
    """Tells whether a config dim agrees with the model's dim (symbolic/unknown need -1)."""
    if isinstance(model_dim, int) and model_dim > 0:
        return config_dim in (model_dim, VARIABLE_DIM)
    return config_dim == VARIABLE_DIM


def _lint_against_model(
    cfg: ModelConfig, model_dims: Mapping[str, Sequence[int | str | None] | None]
) -> list[Said]:
    """Problems visible only next to the model's own signature (full shapes, batch included)."""
    problems: list[Said] = []
    batching = cfg.max_batch_size > 0
    for spec in [*cfg.inputs, *cfg.outputs]:
        if spec.name not in model_dims:
            problems.append(
                say("Tensor %(name)r is not an input or output of the model.", name=spec.name)
            )
            continue
        full = model_dims[spec.name]
        if full is None:
            continue  # rank unknown: nothing to compare
        shape = list(full)
        if batching:
            if not shape or (isinstance(shape[0], int) and shape[0] > 0):
                problems.append(
                    say(
                        "Tensor %(name)r has no variable batch dimension in the model "
                        "(shape %(shape)s), but max_batch_size is %(max_batch_size)s; "
                        "export with a dynamic first axis or set max_batch_size to 0.",
                        name=spec.name,
                        shape=str(shape),
                        max_batch_size=cfg.max_batch_size,
                    )
                )
                continue
            shape = shape[1:]
        if len(shape) != len(spec.dims) or not all(map(_dim_fits, spec.dims, shape)):
            problems.append(
                say(
                    "Tensor %(name)r has dims %(dims)s in the config but %(shape)s in the "
                    "model (dims exclude the batch dimension).",
                    name=spec.name,
                    dims=str(spec.dims),
                    shape=str(shape),
                )
                if batching
                else say(
                    "Tensor %(name)r has dims %(dims)s in the config but %(shape)s in the model.",
                    name=spec.name,
                    dims=str(spec.dims),
                    shape=str(shape),
                )
            )
    return problems


def lint(
    cfg: ModelConfig,
    model_dims: Mapping[str, Sequence[int | str | None] | None] | None = None,
) -> list[Said]:
    """Lists what is wrong with a configuration, in plain words; empty means fine.

    Args:
        cfg: The configuration to check.
        model_dims: Optional full shapes (batch dimension included) of the
            model's inputs and outputs by name, each dim an int, a symbolic
            name or None; ``OnnxInfo.signature_dims()`` gives this. With it,
            config dims are compared to the model's, honouring
            ``max_batch_size`` (when it is > 0 the config dims exclude batch).

    Returns:
        One sentence per problem: a :class:`~model_store.text.Message` (``str()`` of it is
        English) where the linter wrote it, so the web layer can show it in the reader's
        language.
    """
    problems: list[Said] = []
    try:
        validate_model_name(cfg.name)
    except ModelStoreError as exc:
        problems.append(_problem(exc))
    if not cfg.backend and not cfg.platform:
        problems.append(
            say("Neither backend nor platform is set; Triton would not know how to run it.")
        )
    problems += _lint_tensors(cfg)
    problems += _lint_batching(cfg)
    problems += _lint_instances_and_versions(cfg)
    problems += _lint_warmup(cfg)
    if model_dims is not None:
        problems += _lint_against_model(cfg, model_dims)
    for key in cfg.parameters:
        if not key:
            problems.append(say("A parameter has an empty name."))
    return problems

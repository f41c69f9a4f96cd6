"""Batching options the targets share: ``max_batch_size``, Triton's dynamic batcher and the
instance count, with their specs, cross-checks and automatic values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from model_store.config import DynamicBatching
from model_store.onnx_info import OnnxInfo
from model_store.targets.options import InvalidOptions, OptionSpec
from model_store.targets.signature import has_dynamic_batch_axis
from model_store.text import Said, say

#: Triton's scheduling and instance options: they end up in config.pbtxt only.
SCHEDULING_OPTIONS = frozenset(
    {
        "max_batch_size",
        "dynamic_batching",
        "preferred_batch_sizes",
        "max_queue_delay_us",
        "instance_count",
    }
)

# Batch limit offered when every input and output has a dynamic first axis.
DEFAULT_MAX_BATCH_SIZE = 8
MAX_BATCH_SIZE_LIMIT = 1024


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
            say("Max batch size"),
            say(
                "Largest batch Triton forms along the first axis. Automatic: "
                "%(default)s when every input and output has a dynamic first axis, "
                "else 0 (no batching; dims then include the first axis).",
                default=DEFAULT_MAX_BATCH_SIZE,
            ),
            minimum=0,
            maximum=MAX_BATCH_SIZE_LIMIT,
        ),
        OptionSpec(
            "dynamic_batching",
            "bool",
            None,
            say("Dynamic batching"),
            say(
                "Let Triton merge concurrent requests into one batch. Automatic: on when "
                "max_batch_size > 0."
            ),
        ),
    ]
    if include_preferred:
        specs.append(
            OptionSpec(
                "preferred_batch_sizes",
                "int_list",
                [],
                say("Preferred batch sizes"),
                say(
                    "Batch sizes the batcher aims for, e.g. 4,8; each at most max_batch_size. "
                    "Empty: any size up to the maximum."
                ),
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
            say("Max queue delay (µs)"),
            say(
                "How long a request may wait for others to form a batch. Higher gives bigger "
                "batches and more latency."
            ),
            minimum=0,
            maximum=10_000_000,
            advanced=True,
        )
    )
    return specs


def instance_count_spec(help_text: Said) -> OptionSpec:
    """How many model instances Triton creates."""
    return OptionSpec(
        "instance_count",
        "int",
        1,
        say("Instances"),
        help_text,
        minimum=1,
        maximum=64,
        advanced=True,
    )


def check_batching_options(options: Mapping[str, Any]) -> None:
    """Cross-field rules on batching that need no model; raises InvalidOptions."""
    mbs = options.get("max_batch_size")
    if options.get("dynamic_batching") is True and mbs == 0:
        raise InvalidOptions(
            say(
                "Option 'dynamic_batching' is on but 'max_batch_size' is 0; dynamic batching "
                "needs a max_batch_size above 0. Raise max_batch_size or turn batching off."
            )
        )
    preferred = options.get("preferred_batch_sizes") or []
    if mbs is not None and any(size > mbs for size in preferred):
        raise InvalidOptions(
            say(
                "Option 'preferred_batch_sizes' %(sizes)s has sizes above max_batch_size "
                "%(max)s; each preferred size must be at most max_batch_size.",
                sizes=str(preferred),
                max=mbs,
            )
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

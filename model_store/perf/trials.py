"""One tuning trial on one Triton: load a config under a temporary name, measure it, remove it.

Shared by the hub's worker (trials on the stack's own Triton) and a node worker (trials on the
node's Triton, ``workers/node/trials.py``), so that a trial is measured the same way wherever
it runs. The load is described by a :class:`TrialLoad`, plain data that travels in a broker
message: a closed-loop sweep over a few concurrencies (the throughput objective) or one
open-loop level at a fixed rate (the latency objective).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from model_store.config import ModelConfig
from model_store.perf.plan import MAX_CONCURRENCY, SweepPlan
from model_store.perf.sweep import measure_rate, run_sweep
from model_store.runtime.client import TritonRuntime
from model_store.serving.trial import trial_model
from model_store.store import ModelStore

__all__ = ["TrialLoad", "measure_trial", "random_inputs"]

#: Seconds to let Triton load one trial (a large ONNX or an NPU graph compile takes a while).
TRIAL_LOAD_TIMEOUT_S = 180.0
#: Inputs a trial message may describe: bounded, since a node builds them from the message.
MAX_INPUT_ELEMENTS = 1 << 24
_DTYPES = frozenset(
    {"float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"}
)


def _never() -> bool:
    return False


@dataclass(frozen=True)
class TrialLoad:
    """How a trial is driven; validated on construction (it may come from a message)."""

    kind: Literal["concurrency", "rate"]
    levels: tuple[int, ...] = (1, 2, 4)
    rate_rps: float = 0.0
    step_seconds: float = 2.0
    warmup_seconds: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", tuple(self.levels))
        if self.kind == "concurrency":
            SweepPlan(levels=self.levels, step_seconds=self.step_seconds,
                      warmup_seconds=self.warmup_seconds, max_total_seconds=3600.0)  # fmt: skip
        elif self.kind == "rate":
            if not (0 < self.rate_rps <= 100_000):
                raise ValueError("rate_rps must be between 0 and 100000")
            if not (0 < self.step_seconds <= 600 and 0 <= self.warmup_seconds <= 60):
                raise ValueError("step_seconds must be in (0, 600], warmup_seconds in [0, 60]")
        else:
            raise ValueError(f"unknown trial load {self.kind!r}")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["levels"] = list(self.levels)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialLoad:
        if not isinstance(data, Mapping):
            raise ValueError("the trial load must be an object")
        known = {"kind", "levels", "rate_rps", "step_seconds", "warmup_seconds"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown trial load field(s): {sorted(unknown)}")
        return cls(**data)


def random_inputs(specs: Sequence[Mapping[str, Any]], seed: int = 0) -> dict[str, np.ndarray]:
    """Arrays of the given names, dtypes and shapes (``[{"name", "dtype", "shape"}]``), filled
    with random values: what a node sends when the hub only told it the request's shape.

    Raises:
        ValueError: A dtype that is not a plain numeric one, or too many elements.
    """
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    total = 0
    for spec in specs:
        name, dtype, shape = spec.get("name"), spec.get("dtype"), spec.get("shape")
        if not isinstance(name, str) or not name or len(name) > 256:
            raise ValueError("every input needs a name")
        if dtype not in _DTYPES:
            raise ValueError(f"input {name!r}: dtype {dtype!r} is not one of {sorted(_DTYPES)}")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and 0 < d <= 1 << 20 for d in shape
        ):
            raise ValueError(f"input {name!r}: shape must be a list of positive whole numbers")
        count = int(np.prod(shape)) if shape else 1
        total += count
        if total > MAX_INPUT_ELEMENTS:
            raise ValueError(f"the inputs have more than {MAX_INPUT_ELEMENTS} elements")
        if dtype == "bool":
            arrays[name] = rng.integers(0, 2, size=shape).astype(bool)
        elif dtype.startswith(("int", "uint")):
            arrays[name] = rng.integers(0, 8, size=shape).astype(dtype)
        else:
            arrays[name] = rng.standard_normal(shape).astype(dtype)
    return arrays


def measure_trial(
    store: ModelStore,
    runtime: TritonRuntime,
    cfg: ModelConfig,
    files: Sequence[Path],
    version: int,
    inputs: dict[str, np.ndarray],
    load: TrialLoad,
    *,
    max_in_flight: int = MAX_CONCURRENCY,
    is_cancelled: Callable[[], bool] = _never,
    on_placed: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Loads ``files`` with ``cfg`` under a trial name, drives it as ``load`` says, removes it;
    the measured levels as ``LevelResult.to_dict()`` rows (empty when cancelled meanwhile).

    Raises:
        TrialLoadFailed: Triton could not load the config (its reason).
    """
    protocol = "grpc" if runtime.grpc_url else "http"
    with trial_model(
        store, runtime, cfg, files, version=version, timeout_s=TRIAL_LOAD_TIMEOUT_S,
        on_placed=on_placed,
    ) as name:  # fmt: skip
        if load.kind == "rate":
            level = measure_rate(
                runtime, name, version, inputs, load.rate_rps, seconds=load.step_seconds,
                warmup_seconds=load.warmup_seconds, max_in_flight=max_in_flight,
                protocol=protocol, is_cancelled=is_cancelled,
            )  # fmt: skip
            return [level.to_dict()] if level is not None else []
        plan = SweepPlan(
            levels=load.levels,
            step_seconds=load.step_seconds,
            warmup_seconds=load.warmup_seconds,
            max_total_seconds=len(load.levels) * (load.step_seconds + load.warmup_seconds) + 1,
        )
        result = run_sweep(
            runtime, name, version, inputs, plan, protocol=protocol, is_cancelled=is_cancelled
        )
        return [level.to_dict() for level in result.levels]

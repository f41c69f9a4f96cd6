"""Will a model fit its device? A memory estimate before instances or batch size go up.

The estimate is deliberately simple, so that a person can check it by hand::

    total = copies x (weights + activations per sample x batch)

* **weights**: the bytes of the files the server loads (the packaged version directory);
  runtimes keep weights in memory at about their file size (FP16 files, FP16 weights).
* **copies**: how many times the weights and working memory are held on one device. Every
  instance of an ``onnxruntime`` or ``acl`` model is its own session with its own weights
  and buffers, and instances run at the same time, so copies = instances. The GE backend
  (``npu_ge``) instead builds ``device_exec_blocks`` sessions per device, by default
  ``ceil(instances x instance_exec_blocks / devices)`` (docs/ge-backend.md#config-parameters,
  docs/ge-backend.md#instances-and-devices; read from the backend's code, not measured);
  :func:`copies_per_device` does that sum.
* **activations per sample**: the peak of live intermediate tensors for one sample, from a
  liveness walk over the ONNX graph after shape inference with the batch axis pinned to 1
  (:func:`activations_from_onnx`): each tensor is allocated when its node runs and freed
  after its last reader, which is what the runtimes' memory planners do, minus their
  in-place and fusion tricks (so the figure leans high) and minus their arena slack and
  workspaces (so it leans low). When shapes are not static, the fallback is the input and
  output bytes of one sample times :data:`IO_FACTOR` (:func:`activations_from_signature`),
  a rough guess that is labelled as such.
* **batch**: ``max_batch_size`` (0, no batching, counts as one request of the model's own
  fixed shape).

The sentences for people (:attr:`Verdict.message`, :attr:`ActivationEstimate.note`,
:meth:`Estimate.describe`) are :func:`~model_store.text.say` messages, said in the reader's
language when the version page shows them (a stored note is kept as a message).

:func:`fits` compares the total with a device's free memory and keeps
:data:`HEADROOM` of it for what the estimate leaves out (runtime context, arena rounding,
workspaces of fused kernels).

Example:
    >>> est = estimate_memory(100 << 20, instances=2, max_batch=8,
    ...                       activation_bytes_per_sample=4 << 20)
    >>> est.total_bytes >> 20
    264
    >>> fits(est, 200 << 20, device="NPU 0").state
    'does_not_fit'
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from model_store.targets import get_target
from model_store.text import Message, Said, as_json, from_json, say

__all__ = [
    "HEADROOM",
    "IO_FACTOR",
    "MIB",
    "ActivationEstimate",
    "Estimate",
    "Verdict",
    "activations_from_onnx",
    "activations_from_signature",
    "copies_per_device",
    "estimate_memory",
    "fits",
    "mib",
]

MIB = 1 << 20
#: Share of free memory kept back for what the estimate leaves out.
HEADROOM = 0.10
#: Activations per sample ~ (input + output bytes per sample) x this, when the graph cannot be
#: walked. A rough middle for CNNs and MLPs (ResNet-50: inputs+outputs 0.6 MB, live-tensor
#: peak about 6-10 MB); transformers with long sequences need more.
IO_FACTOR = 16
#: ONNX files larger than this are not parsed in the web process (the worker does it at
#: validation, where the time and memory are expected).
ONNX_ANALYSIS_MAX_BYTES = 128 << 20

# onnx.TensorProto.DataType value -> bytes per element (int4 types round up to one byte).
_ELEM_BYTES: dict[int, int] = {
    1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8,
    14: 8, 15: 16, 16: 2, 17: 1, 18: 1, 19: 1, 20: 1, 21: 1, 22: 1,
}  # fmt: skip
_NUMPY_BYTES: dict[str, int] = {
    "bool": 1, "uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "float16": 2, "uint32": 4,
    "int32": 4, "float32": 4, "uint64": 8, "int64": 8, "float64": 8,
}  # fmt: skip


def mib(n: int | float | None) -> float | None:
    """Bytes as MiB with one decimal, for people (``None`` stays ``None``)."""
    return None if n is None else round(n / MIB, 1)


# --------------------------------------------------------------------------- estimate


@dataclass(frozen=True)
class Estimate:
    """Memory one device needs for a model at a given instance count and batch size.

    Attributes:
        weights_bytes: Bytes of weights per copy.
        instances: Copies of weights and buffers on the device.
        max_batch: ``max_batch_size``; 0 means the model's own fixed batch (one request).
        activation_bytes_per_sample: Peak working memory of one sample, per copy.
    """

    weights_bytes: int
    instances: int
    max_batch: int
    activation_bytes_per_sample: int

    @property
    def batch(self) -> int:
        """Samples one copy works on at once."""
        return max(1, self.max_batch)

    @property
    def activation_bytes(self) -> int:
        """Working memory of one copy at the full batch."""
        return self.activation_bytes_per_sample * self.batch

    @property
    def weights_total_bytes(self) -> int:
        return self.weights_bytes * self.instances

    @property
    def activations_total_bytes(self) -> int:
        return self.activation_bytes * self.instances

    @property
    def total_bytes(self) -> int:
        return self.weights_total_bytes + self.activations_total_bytes

    def describe(self) -> Message:
        """The sum in words, e.g. ``weights 97.7 MiB x 2 + activations 32.0 MiB x 2 = ...``."""
        return say(
            "weights %(weights)s MiB x %(instances)s + activations at batch %(batch)s "
            "%(activations)s MiB x %(instances)s = %(total)s MiB",
            weights=mib(self.weights_bytes),
            instances=self.instances,
            batch=self.batch,
            activations=mib(self.activation_bytes),
            total=mib(self.total_bytes),
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data |= {
            "batch": self.batch,
            "activation_bytes": self.activation_bytes,
            "weights_total_bytes": self.weights_total_bytes,
            "activations_total_bytes": self.activations_total_bytes,
            "total_bytes": self.total_bytes,
            "weights_mib": mib(self.weights_bytes),
            "activation_mib": mib(self.activation_bytes),
            "total_mib": mib(self.total_bytes),
            "description": as_json(self.describe()),
        }
        return data


def estimate_memory(
    weights_bytes: int, instances: int, max_batch: int, activation_bytes_per_sample: int
) -> Estimate:
    """Estimate the memory of ``instances`` copies of a model at ``max_batch``.

    Args:
        weights_bytes: Bytes of the weights (the served files).
        instances: Copies on one device (see :func:`copies_per_device`), at least 1.
        max_batch: Triton's ``max_batch_size``; 0 for a model without a batch axis.
        activation_bytes_per_sample: Peak working memory of one sample.

    Raises:
        ValueError: For negative sizes or fewer than one instance.
    """
    if instances < 1:
        raise ValueError("instances must be at least 1")
    if min(weights_bytes, max_batch, activation_bytes_per_sample) < 0:
        raise ValueError("sizes and batch must not be negative")
    return Estimate(
        int(weights_bytes), int(instances), int(max_batch), int(activation_bytes_per_sample)
    )


def copies_per_device(
    target: str,
    instances: int,
    *,
    devices: int = 1,
    parameters: Mapping[str, str] | None = None,
) -> tuple[int, Said]:
    """How many copies of the model one device holds, and why.

    Args:
        target: A target's name; the target class knows how its backend places copies.
        instances: ``instance_group`` count in config.pbtxt.
        devices: Devices the model is spread over (``npu_ge``: ``device_ids`` or all NPUs).
        parameters: config.pbtxt ``parameters`` (``device_exec_blocks``, ``instance_exec_blocks``).

    Returns:
        ``(copies, note)``; the note says how the number was found.
    """
    return get_target(target).copies_per_device(instances, devices=devices, parameters=parameters)


# --------------------------------------------------------------------------- verdict


@dataclass(frozen=True)
class Verdict:
    """Whether an estimate fits a device.

    Attributes:
        state: ``fits``, ``tight`` (within the headroom), ``does_not_fit`` or ``unknown``.
        fits: True, False, or None when the free memory is unknown.
        message: One sentence for the page.
        device: Which device (``"NPU 0 chip 0"``, ``"this host"``).
        needed_bytes: The estimate's total.
        free_bytes: Free memory of the device, when known.
    """

    state: str
    fits: bool | None
    message: Said
    device: Said
    needed_bytes: int
    free_bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, the message as a stored message."""
        return asdict(self) | {
            "message": as_json(self.message),
            "device": as_json(self.device),
            "needed_mib": mib(self.needed_bytes),
            "free_mib": mib(self.free_bytes),
        }


def fits(
    estimate: Estimate,
    device_free_bytes: int | None,
    *,
    device: Said = "the device",
    headroom: float = HEADROOM,
) -> Verdict:
    """Compare an estimate with a device's free memory.

    ``tight`` means it fits, but eats into the ``headroom`` share kept for what the
    estimate leaves out; it may still fail to load.
    """
    need = estimate.total_bytes
    if device_free_bytes is None or device_free_bytes < 0:
        return Verdict(
            "unknown",
            None,
            say(
                "Free memory of %(device)s is unknown; the estimate is %(need)s MiB.",
                device=device,
                need=mib(need),
            ),
            device,
            need,
            None,
        )
    free = int(device_free_bytes)
    if need > free:
        return Verdict(
            "does_not_fit",
            False,
            say(
                "Does not fit %(device)s: needs about %(need)s MiB, %(free)s MiB free. Lower the "
                "instance count or the batch size, or free the device.",
                device=device,
                need=mib(need),
                free=mib(free),
            ),
            device,
            need,
            free,
        )
    if need > free * (1 - headroom):
        return Verdict(
            "tight",
            True,
            say(
                "Tight on %(device)s: about %(need)s MiB of %(free)s MiB free; less than "
                "%(headroom)s left for runtime overhead, so loading may still fail.",
                device=device,
                need=mib(need),
                free=mib(free),
                headroom=f"{headroom:.0%}",
            ),
            device,
            need,
            free,
        )
    return Verdict(
        "fits",
        True,
        say(
            "Fits %(device)s: about %(need)s MiB of %(free)s MiB free.",
            device=device,
            need=mib(need),
            free=mib(free),
        ),
        device,
        need,
        free,
    )


# --------------------------------------------------------------------------- activations


@dataclass(frozen=True)
class ActivationEstimate:
    """Working memory of one sample, and how it was found.

    Attributes:
        bytes_per_sample: Peak bytes for one sample; None when nothing could be estimated.
        method: ``liveness`` (graph walk), ``io_factor`` (signature x IO_FACTOR) or ``none``.
        note: Plain words on what the figure means and what it leaves out.
        unknown_tensors: Intermediate tensors whose size stayed unknown (counted as 0).
    """

    bytes_per_sample: int | None
    method: str
    note: Said
    unknown_tensors: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, the note as a stored message."""
        return asdict(self) | {"note": as_json(self.note)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ActivationEstimate | None:
        """Read back what :meth:`to_dict` stored; None for anything else."""
        try:
            raw = data.get("bytes_per_sample")
            note = from_json(data.get("note"))
            return cls(
                None if raw is None else int(raw),
                str(data["method"]),
                note,
                int(data.get("unknown_tensors", 0)),
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            return None


def _per_sample_elements(dims: Sequence[Any] | None) -> int | None:
    """Elements of one sample: axis 0 dropped when it is dynamic (the batch); None if unknown."""
    if dims is None:
        return None
    rest = list(dims)
    if rest and (not isinstance(rest[0], int) or rest[0] == -1):
        rest = rest[1:]
    if any(not isinstance(d, int) or d < 0 for d in rest):
        return None
    return math.prod(rest)


def activations_from_signature(signature: Mapping[str, Any]) -> ActivationEstimate:
    """Rough activations per sample from the inputs and outputs only.

    Args:
        signature: ``{"inputs": [{"numpy": "float32", "dims": [...]}, ...], "outputs": [...]}``
            as stored on a version (dims are the ONNX dims, axis 0 may be symbolic).
    """
    total = 0
    unknown: list[str] = []
    tensors = [*signature.get("inputs", []), *signature.get("outputs", [])]
    for tensor in tensors:
        elements = _per_sample_elements(tensor.get("dims"))
        size = _NUMPY_BYTES.get(str(tensor.get("numpy")))
        if elements is None or size is None:
            unknown.append(str(tensor.get("name")))
            continue
        total += elements * size
    if not tensors or len(unknown) == len(tensors):
        return ActivationEstimate(
            None,
            "none",
            say(
                "Activations unknown: the inputs and outputs have dynamic dims other than the "
                "batch (or no fixed-size type), so only the weights are counted."
            ),
            len(unknown),
        )
    if unknown:
        note = say(
            "Rough: inputs and outputs of one sample (%(bytes)s bytes) x %(factor)s; the graph's "
            "intermediate sizes could not be read. Not counted (dynamic dims or strings): "
            "%(names)s.",
            bytes=total,
            factor=IO_FACTOR,
            names=", ".join(unknown),
        )
    else:
        note = say(
            "Rough: inputs and outputs of one sample (%(bytes)s bytes) x %(factor)s; the graph's "
            "intermediate sizes could not be read.",
            bytes=total,
            factor=IO_FACTOR,
        )
    return ActivationEstimate(total * IO_FACTOR, "io_factor", note, len(unknown))


def activations_from_onnx(
    path: Path, *, max_bytes: int = ONNX_ANALYSIS_MAX_BYTES
) -> ActivationEstimate:
    """Peak live intermediate bytes of one sample, from shape inference and a liveness walk.

    Args:
        path: The ``.onnx`` file (external data is not loaded; it is not needed).
        max_bytes: Larger files are not parsed (``method="none"``); the web process keeps
            the default, the validating worker passes a larger limit.

    Never raises: a file that cannot be read or inferred gives ``method="none"``. Results
    are cached per (path, size, mtime) in this process.
    """
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as exc:
        return ActivationEstimate(
            None, "none", say("The ONNX file cannot be read: %(error)s.", error=str(exc))
        )
    if stat.st_size > max_bytes:
        return ActivationEstimate(
            None,
            "none",
            say(
                "The ONNX file is over %(limit)s MiB, too large to analyse here; versions "
                "validated from now on are analysed by the worker.",
                limit=max_bytes >> 20,
            ),
        )
    return _activations_cached(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _activations_cached(path: str, size: int, mtime_ns: int) -> ActivationEstimate:
    try:
        import onnx  # here, not at import: the page may never need it

        model = onnx.load(path, load_external_data=False)
        return _liveness(model)
    except Exception as exc:  # any parse/inference failure is an answer, not a crash
        return ActivationEstimate(
            None,
            "none",
            say("Shape inference failed, activations unknown: %(error)s.", error=str(exc)),
        )


def _pin_batch(model: Any) -> set[str]:
    """Set a dynamic axis 0 of every graph input to 1; return the batch symbol names."""
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    symbols: set[str] = set()
    for value in graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        shape = value.type.tensor_type.shape
        if len(shape.dim) == 0:
            continue
        first = shape.dim[0]
        if first.HasField("dim_value") and first.dim_value > 0:
            continue
        if first.dim_param:
            symbols.add(first.dim_param)
        first.dim_value = 1
    # Other places that name the batch symbol (outputs, value_info) get 1 as well.
    for value in [*graph.output, *graph.value_info]:
        if not value.type.HasField("tensor_type"):
            continue
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param and dim.dim_param in symbols:
                dim.dim_value = 1
    return symbols


def _tensor_bytes(value: Any) -> int | None:
    if not value.type.HasField("tensor_type"):
        return None
    tensor_type = value.type.tensor_type
    size = _ELEM_BYTES.get(tensor_type.elem_type)
    if size is None or not tensor_type.HasField("shape"):
        return None
    total = size
    for dim in tensor_type.shape.dim:
        if not dim.HasField("dim_value") or dim.dim_value < 0:
            return None
        total *= dim.dim_value
    return total


def _liveness(model: Any) -> ActivationEstimate:
    import onnx

    _pin_batch(model)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    graph = inferred.graph
    initializers = {t.name for t in graph.initializer}
    sizes: dict[str, int | None] = {}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.name not in initializers:
            sizes[value.name] = _tensor_bytes(value)
    nodes = list(graph.node)
    outputs = {v.name for v in graph.output}
    last_use: dict[str, int] = {}
    for index, node in enumerate(nodes):
        for name in _reads(node):
            last_use[name] = index
    unknown = 0
    live: dict[str, int] = {}
    for value in graph.input:
        if value.name not in initializers:
            live[value.name] = sizes.get(value.name) or 0
    current = sum(live.values())
    peak = current
    for index, node in enumerate(nodes):
        if node.op_type == "Constant":
            continue  # constant data is in the file, so it counts as weights
        for name in node.output:
            if not name or name in live:
                continue
            size = sizes.get(name)
            if size is None:
                unknown += 1
                size = 0
            live[name] = size
            current += size
        peak = max(peak, current)
        for name in [*_reads(node), *node.output]:
            if name in live and name not in outputs and last_use.get(name, index) <= index:
                current -= live.pop(name)
    note = say(
        "Peak of live intermediate tensors for one sample (shape inference with the batch "
        "axis at 1, each tensor freed after its last reader). Runtimes reuse buffers in "
        "place (less) and add arena slack and kernel workspaces (more)."
    )
    if unknown:
        note = say(
            "%(before)s %(unknown)s intermediate tensor(s) have sizes that depend on the data "
            "or on dynamic dims and are not counted, so this is a lower bound.",
            before=note,
            unknown=unknown,
        )
    if any(n.op_type in ("If", "Loop", "Scan") for n in nodes):
        note = say("%(before)s Subgraphs (If/Loop/Scan) are not walked.", before=note)
    return ActivationEstimate(peak, "liveness", note, unknown)


def _reads(node: Any) -> Iterable[str]:
    """Names a node reads: its inputs plus what its subgraphs take from the outer graph."""
    names = [n for n in node.input if n]
    for attr in node.attribute:
        graphs = list(attr.graphs)
        if attr.HasField("g"):
            graphs.append(attr.g)
        for sub in graphs:
            produced = {o for n in sub.node for o in n.output} | {i.name for i in sub.input}
            produced |= {t.name for t in sub.initializer}
            names += [i for n in sub.node for i in n.input if i and i not in produced]
    return names

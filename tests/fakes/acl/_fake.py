"""State and helpers behind the fake ``acl`` module (tests only; not pyACL).

"Device" and "host" memory are bytearrays keyed by fake integer pointers; a
pointer may point inside a region (``base + offset``). Every public fake
function appends its name to :data:`CALLS`, so tests can check call order,
and :func:`leaks` lists what was allocated and never released.

Error codes are the ones in CANN's ``acl_base.h`` (1000xx for ACL, 1070xx for
the runtime) as far as the tests need them.
"""

from __future__ import annotations

import itertools
import json
import os
import struct
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import _host

ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_INVALID_FILE = 100003
ACL_ERROR_INVALID_MODEL_ID = 100011
ACL_ERROR_PARSE_MODEL = 100013
ACL_ERROR_MODEL_INPUT_NOT_MATCH = 100017
ACL_ERROR_MODEL_OUTPUT_NOT_MATCH = 100018
ACL_ERROR_MODEL_NOT_DYNAMIC = 100019
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_CONTEXT_NULL = 107002
#: The runtime could not read the SoC (docs/pyacl.md#return-codes). What a process gets on a chip
#: another container holds: the driver's halGetDeviceInfo fails (ret 87) while the runtime
#: initialises the SoC version (tests/fakes/README.md, "Who holds the chip").
ACL_ERROR_RT_SOC_VERSION = 507008

#: Fake OM layout written by tests/fakes/atc.
MAGIC = b"FAKEOM\x00\x01"
MBATCH_INPUT = "ascend_mbatch_shape_data"

#: ACL data type code -> numpy (docs/pyacl.md#data-type-codes).
ACL_TO_NUMPY: dict[int, Any] = {
    0: np.float32,
    1: np.float16,
    2: np.int8,
    3: np.int32,
    4: np.uint8,
    6: np.int16,
    7: np.uint16,
    8: np.uint32,
    9: np.int64,
    10: np.uint64,
    11: np.float64,
    12: np.bool_,
}
ACL_FORMATS = {"NCHW": 0, "NHWC": 1, "ND": 2, "NCDHW": 30}
# Precisions in which a real NPU computes float32 graphs in float16.
FP16_PRECISIONS = {
    "fp16",
    "force_fp16",
    "allow_fp32_to_fp16",
    "mixed_float16",
    "allow_mix_precision",
    "allow_mix_precision_fp16",
}

CALLS: list[str] = []


def record(name: str) -> None:
    CALLS.append(name)


@dataclass
class TensorDesc:
    name: str
    dims: list[int]
    dtype: int
    format: int = 2
    #: The ONNX graph tensor onnxruntime reads or writes (outputs: the OM name differs).
    onnx_name: str = ""

    def __post_init__(self) -> None:
        self.onnx_name = self.onnx_name or self.name

    @property
    def itemsize(self) -> int:
        return int(np.dtype(ACL_TO_NUMPY[self.dtype]).itemsize)


@dataclass
class Model:
    path: str
    device: int
    header: dict[str, Any]
    session: Any
    inputs: list[TensorDesc]
    outputs: list[TensorDesc]
    gears: list[int]
    # Output shapes at the largest batch (dims the header could not infer are measured).
    output_shapes: list[list[int]] = field(default_factory=list)
    last_output_shapes: list[list[int]] | None = None

    def batch_for(self, batch: int | None) -> int | None:
        return batch if self.gears else None

    def input_shape(self, index: int, batch: int | None) -> list[int]:
        dims = list(self.inputs[index].dims)
        if self.inputs[index].name == MBATCH_INPUT:
            return dims
        if self.gears and dims and dims[0] == -1:
            dims[0] = batch if batch is not None else max(self.gears)
        return dims

    def output_shape(self, index: int, batch: int | None) -> list[int]:
        dims = list(self.output_shapes[index])
        if self.gears and dims:
            dims[0] = batch if batch is not None else max(self.gears)
        return dims


class State:
    """Everything the fake runtime knows; one per process, like the real one."""

    def __init__(self) -> None:
        self.initialized = False
        self.init_count = 0
        self.devices: dict[int, int] = {}  # device id -> set_device count
        self.contexts: dict[int, int] = {}  # context -> device
        self.default_contexts: dict[int, int] = {}  # device -> implicit context
        self.local = threading.local()
        self.memory: dict[int, tuple[str, Any]] = {}  # base pointer -> (space, buffer)
        self.views: dict[int, memoryview] = {}  # bytes_to_ptr / numpy_to_ptr regions
        self.data_buffers: dict[int, tuple[int, int]] = {}
        self.datasets: dict[int, list[int]] = {}
        self.dataset_batch: dict[int, int] = {}
        self.models: dict[int, Model] = {}
        self.descs: dict[int, int | None] = {}
        self.model_ids = itertools.count(1)
        self.handles = itertools.count(0x55_0000_1000, 0x40)
        self.pointers = itertools.count(0x7F00_0000_0000, 0x1_0000)
        self.lock = threading.RLock()

    def new_pointer(self, size: int) -> int:
        # Regions are 64 KiB apart; bigger ones skip ahead so they never overlap.
        base = next(self.pointers)
        for _ in range(size // 0x1_0000):
            next(self.pointers)
        return base

    @property
    def current_context(self) -> int | None:
        return getattr(self.local, "context", None)

    @current_context.setter
    def current_context(self, ctx: int | None) -> None:
        self.local.context = ctx

    def locate(self, ptr: int) -> tuple[str, memoryview, int] | None:
        """(space, region, offset) for a pointer inside any known region."""
        for base, (space, buf) in self.memory.items():
            if base <= ptr < base + max(len(buf), 1):
                return space, memoryview(buf), ptr - base
        for base, view in self.views.items():
            if base <= ptr < base + max(view.nbytes, 1):
                return "host", view, ptr - base
        return None


STATE = State()


def reset() -> None:
    """Forget everything (a fresh process, as far as the fake is concerned)."""
    global STATE
    STATE = State()
    CALLS.clear()


def state() -> State:
    return STATE


def leaks() -> dict[str, int]:
    """Resources still held; all zero after a correct teardown."""
    s = STATE
    return {
        name: count
        for name, count in (
            ("device_memory", sum(1 for sp, _ in s.memory.values() if sp == "device")),
            ("host_memory", sum(1 for sp, _ in s.memory.values() if sp == "host")),
            ("contexts", len(s.contexts)),
            ("devices", sum(s.devices.values())),
            ("models", len(s.models)),
            ("descs", len(s.descs)),
            ("datasets", len(s.datasets)),
            ("data_buffers", len(s.data_buffers)),
            ("initialized", int(s.initialized)),
        )
        if count
    }


def device_ids() -> list[int]:
    """The device ids this fake machine has (see :mod:`._host`)."""
    return _host.device_ids()


def device_count() -> int:
    return len(device_ids())


_PLOGGED: list[bool] = []


def _plog(chips: list[int]) -> None:
    """Once per process, on stderr: the driver's complaint, in the fake's own plog-like words."""
    if _PLOGGED:
        return
    _PLOGGED.append(True)
    pid = os.getpid()
    print(
        f"[ERROR] DRV({pid},python):fake [ascend][curpid: {pid}][drv][devmgr]"
        f"[halGetDeviceInfo] get device info failed, devid:{chips[0]}, ret:87. (fake acl: "
        f"chip {chips[0]} is held by another container)\n"
        f"[ERROR] RUNTIME({pid},python):fake [runtime] init soc version failed, ret = "
        f"{ACL_ERROR_RT_SOC_VERSION}",
        file=sys.stderr,
        flush=True,
    )


def open_device(device: int) -> int:
    """``ACL_SUCCESS`` once this process holds the chip behind ``device`` (held until the
    process ends), or ``ACL_ERROR_RT_SOC_VERSION`` when another container holds it."""
    owners = _host.owners()
    if owners.owners_dir() is None:  # ownership not emulated
        return ACL_SUCCESS
    refused = owners.open_chips([_host.logical_id(device)])
    if refused:
        _plog(refused)
        return ACL_ERROR_RT_SOC_VERSION
    return ACL_SUCCESS


def query_devices() -> int:
    """What a device query (count, SoC) gets: ``ACL_ERROR_RT_SOC_VERSION`` when another
    container holds any visible chip, else ``ACL_SUCCESS``. Opens nothing."""
    owners = _host.owners()
    if owners.owners_dir() is None:
        return ACL_SUCCESS
    refused = owners.held_elsewhere(_host.visible_logical_ids())
    if refused:
        _plog(refused)
        return ACL_ERROR_RT_SOC_VERSION
    return ACL_SUCCESS


def read_fake_om(path: str) -> tuple[dict[str, Any], bytes] | int:
    """(header, onnx bytes) of a fake OM, or an ACL error code."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return ACL_ERROR_INVALID_FILE
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
        return ACL_ERROR_PARSE_MODEL
    (length,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(data[start : start + length])
    except ValueError:
        return ACL_ERROR_PARSE_MODEL
    return header, data[start + length :]


def build_model(path: str, device: int) -> Model | int:
    loaded = read_fake_om(path)
    if isinstance(loaded, int):
        return loaded
    header, onnx_bytes = loaded
    soc = _host.soc_name()
    if soc and header.get("soc_version") != soc:
        return ACL_ERROR_PARSE_MODEL  # built for another chip
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
    inputs = [
        TensorDesc(t["name"], list(t["dims"]), int(t["dtype"]), ACL_FORMATS.get(t["format"], 2))
        for t in header["inputs"]
    ]
    gears = [int(g) for g in header.get("dynamic_batch", [])]
    if gears:
        inputs.append(TensorDesc(MBATCH_INPUT, [1], 9, ACL_FORMATS["ND"]))
    # Output names are ATC's (<op>:<index>:<onnx name>); onnx_name is the graph output.
    outputs = [
        TensorDesc(
            t["name"],
            list(t["dims"]),
            int(t["dtype"]),
            ACL_FORMATS.get(t["format"], 2),
            onnx_name=t["onnx_name"],
        )
        for t in header["outputs"]
    ]
    model = Model(path, device, header, session, inputs, outputs, gears)
    # Real OMs know every output size; measure the ones shape inference left open.
    dims = [list(o.dims) for o in outputs]
    if any(d < 0 for shape in dims for d in shape[1 if gears else 0 :]):
        feeds = {
            t.name: np.zeros(model.input_shape(i, None), ACL_TO_NUMPY[t.dtype])
            for i, t in enumerate(inputs)
            if t.name != MBATCH_INPUT
        }
        results = session.run([o.onnx_name for o in outputs], feeds)
        dims = [list(r.shape) for r in results]
    model.output_shapes = dims
    return model


def compute(model: Model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """What the fake NPU computes: the ONNX function, in fp16 when the OM says so, plus noise."""
    fp16 = model.header.get("precision") in FP16_PRECISIONS
    if fp16:
        feeds = {
            k: v.astype(np.float16).astype(np.float32) if v.dtype == np.float32 else v
            for k, v in feeds.items()
        }
    names = [o.onnx_name for o in model.outputs]
    results = [np.asarray(r) for r in model.session.run(names, feeds)]
    noise = float(os.environ.get("FAKE_ACL_NOISE", "0") or 0)
    rng = np.random.default_rng(0)
    out = []
    for array in results:
        if array.dtype.kind == "f":
            if noise:
                array = (array + noise * rng.standard_normal(array.shape)).astype(array.dtype)
            if fp16 and array.dtype == np.float32:
                array = array.astype(np.float16).astype(np.float32)
        out.append(array)
    return out

"""Python-based Triton backend named ``acl``: serves ``model.om`` (built by ATC) through pyACL.

Triton loads this file from ``<backend-directory>/acl/model.py`` for every model
whose config says ``backend: "acl"`` (Python-based backends,
docs/triton.md#python-based-backends). The OM file is
``<model dir>/<version>/model.om`` (or the config's ``default_model_filename``);
the NPU is the config parameter ``device_id`` (default ``"0"``).

Why one file (over the 600-line limit for the rest of the code): Triton loads a Python-based
backend from the one ``model.py`` in ``<backend-directory>/acl/``. The embedded Triton's
backend directory gets a copy of that file alone (``prepare_backend_dir`` in
model_store/runtime/triton_wheel.py), so a module split out next to it would be missing there,
and the Triton image that compose mounts this folder into has no ``model_store`` to import
from. The backend therefore stays self-contained (numpy, acl, triton_python_backend_utils and
the standard library only).

The pyACL part lives in :class:`OmSession`, which imports nothing from Triton,
so the worker reuses it to verify a compiled OM (``model_store.ascend.om_runner``).
It follows the lifecycle in docs/pyacl.md#lifecycle: ``acl.init`` (once per process) →
``rt.set_device`` → ``rt.create_context`` → ``mdl.load_from_file`` → model
description → device buffers and datasets, and tears down in the documented
order (datasets, ``unload``, ``destroy_desc``, ``free``, ``destroy_context``,
``reset_device``; ``acl.finalize`` once, when the process is done).

Shapes in an OM are fixed at compile time. A batching model (``max_batch_size
> 0``) is served by splitting a batch into chunks of the OM's batch size and
padding the last chunk with zeros (a fixed-batch OM), or by picking the
smallest gear that fits (an OM built with ``--dynamic_batch_size``); padded
rows are dropped from the outputs. Requests that arrive together are
concatenated first, so dynamic batching in Triton fills the OM's batch.

The OM names its outputs ``<op>:<index>:<ONNX output name>``; they are matched
to the config's (ONNX) output names at load by :func:`map_om_outputs`, the rule
verification uses as well (docs/pyacl.md#output-names).

NOT RUN ON ASCEND HARDWARE: written against the pyACL interface documented in
docs/pyacl.md (plus ``acl.rt.set_context``, pyACL's way to make a context
current on another thread) and tested with the fake ``acl`` module in
tests/fakes.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

try:  # provided by the Python backend stub at run time
    import triton_python_backend_utils as pb_utils
except ImportError:  # pragma: no cover - outside Triton
    pb_utils = None

ACL_SUCCESS = 0
#: aclInit was already called in this process (by us or by another library): not an error.
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
#: The extra input of OMs built with --dynamic_batch_size (ACL_DYNAMIC_TENSOR_NAME).
DYNAMIC_BATCH_INPUT = "ascend_mbatch_shape_data"
#: Inputs ATC adds for dynamic AIPP; not fed by requests.
_HIDDEN_INPUTS = (DYNAMIC_BATCH_INPUT, "ascend_dynamic_aipp_data")
# NPY_UBYTE, for the older ptr_to_numpy API.
_NPY_UBYTE = 2

#: ACL data type codes (docs/pyacl.md#data-type-codes) -> numpy.
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
#: ACL_BF16 (acl_base_rt.h). numpy has no bfloat16, so OMs with such a tensor are refused
#: at load (see :class:`UnsupportedTensorType`).
ACL_BF16 = 27
#: Names of the ACL data type codes that have no numpy type, for error messages.
ACL_UNMAPPED_NAMES: dict[int, str] = {
    13: "ACL_STRING",
    16: "ACL_COMPLEX64",
    17: "ACL_COMPLEX128",
    ACL_BF16: "ACL_BF16",
    29: "ACL_INT4",
    30: "ACL_UINT1",
    33: "ACL_COMPLEX32",
    34: "ACL_HIFLOAT8",
    35: "ACL_FLOAT8_E5M2",
    36: "ACL_FLOAT8_E4M3FN",
    37: "ACL_FLOAT8_E8M0",
}

#: Triton config data types -> numpy (no strings: OMs have no string tensors).
TRITON_TO_NUMPY: dict[str, Any] = {
    "TYPE_BOOL": np.bool_,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
}

DEFAULT_MODEL_FILENAME = "model.om"


class AclUnavailable(RuntimeError):
    """pyACL (``import acl``) cannot be imported in this process."""


#: The commonest cause of 507008 (and 500004) at ``set_device``: on stock drivers a chip one
#: container opened cannot be opened from another until that process ends (vllm-project/
#: vllm-ascend #2542, #632, #248, #2698; docs/pyacl.md#return-codes). The hub says this with
#: ``model_store.devices.held_elsewhere.held_elsewhere_hint``; this file cannot import
#: ``model_store`` inside Triton's stub (see the top of the file), so it keeps this English copy,
#: which tests/unit/test_held_chip_hints.py compares with that function's.
_HELD_ELSEWHERE = (
    "the NPU is held by another container (a chip can be opened from one container at a time "
    "unless container sharing is on: `npu-smi set -t device-share -i <card> -c <chip> -d 1`, "
    "as root on the host, after every reboot)"
)

#: What the return codes a first contact meets mean, and what to do (ACL's return-code list in
#: hicann/runtime's API reference; docs/pyacl.md#return-codes). Memory exhaustion and a model
#: from another CANN release fail the same load call, so the code is what tells them apart.
ACL_CODE_MEANINGS = {
    100003: "the file is missing or cannot be read",
    100012: "the OM cannot be deserialised: it was built for another CANN release; rebuild it "
    "with a CANN no newer than the one that loads it",
    100013: "the OM cannot be parsed: built for another chip or CANN release, or damaged; "
    "rebuild it for this one",
    100014: "the OM cannot be read",
    100015: "the OM's size is invalid (damaged or cut short); rebuild it",
    100016: "the OM lacks attributes this CANN expects: built for another release; rebuild it",
    100039: "the library path holds the toolkit's stub driver libraries (devlib) instead of the "
    "driver's",
    107001: "no such device in this process (a container numbers its NPUs from 0)",
    200000: "out of memory: unload other models or use another NPU",
    200002: "no such device in this process (a container numbers its NPUs from 0)",
    207001: "out of device memory: unload other models or use another NPU",
    207004: "the device is not available (see its health in npu-smi info)",
    207006: "this user may not use the device: give it the driver's group (the device nodes' "
    "group)",
    207010: "no model resources left on the device: unload other models",
    207018: "the device's memory is used up: unload other models or use another NPU",
    500004: _HELD_ELSEWHERE + "; otherwise the driver failed: the driver and the CANN release "
    "may not match",
    507008: _HELD_ELSEWHERE + "; otherwise the runtime could not read the SoC: the driver and "
    "the CANN release may not match",
}


class AclError(RuntimeError):
    """A pyACL call returned a non-zero code; the message says what the code means when known,
    else ``hint``."""

    def __init__(self, call: str, ret: int, hint: str = "") -> None:
        message = f"{call} failed with ACL error {ret}"
        meaning = ACL_CODE_MEANINGS.get(ret)
        if meaning or hint:
            message += f" ({meaning or hint})"
        super().__init__(message)
        self.call = call
        self.ret = ret


class UnsupportedTensorType(AclError):
    """The OM has a tensor whose ACL data type has no numpy equivalent (found at load)."""

    def __init__(self, name: str, acl_type: int) -> None:
        label = ACL_UNMAPPED_NAMES.get(acl_type, "unknown")
        if acl_type == ACL_BF16:
            why = (
                "numpy has no bfloat16, and this backend hands tensors to Triton and to "
                "verification as numpy arrays; rebuild the OM with float16 or float32 "
                "inputs and outputs"
            )
        else:
            why = "this backend has no numpy type for it"
        RuntimeError.__init__(
            self, f"OM tensor '{name}' has ACL data type {acl_type} ({label}): {why}"
        )
        self.call = f"tensor '{name}'"
        self.ret = acl_type


class OutputNameError(ValueError):
    """The OM's outputs cannot be matched to the model config's (ONNX) output names."""


class RequestError(ValueError):
    """Inputs that this OM cannot run; the caller's mistake, not the device's."""


#: Where CANN installs pyACL, relative to a toolkit home (set_env.sh puts it on PYTHONPATH):
#: ``python/site-packages``, and ``pyACL/python/site-packages`` in the releases before 8.0 that
#: Atlas 300I (Ascend 310) hosts run (docs/cann.md#install-layouts).
_PYACL_DIRS = (("python", "site-packages"), ("pyACL", "python", "site-packages"))
#: The default install root; a non-root install uses ``$HOME/Ascend`` instead.
#: This repeats model_store.compile.atc.environment (DEFAULT_ASCEND_ROOT, default_toolkit_homes)
#: on purpose: Triton's stub loads this file alone, where model_store cannot be imported.
_DEFAULT_ASCEND_ROOT = "/usr/local/Ascend"


def _layouts_under(root: Path) -> list[Path]:
    """The toolkit homes of an install root, newest layout first (docs/cann.md#install-layouts):
    ``<root>/cann`` (CANN 8.5 and later), then ``<root>/ascend-toolkit/latest`` (earlier)."""
    return [root / "cann", root / "ascend-toolkit" / "latest"]


def _homes_under(path: Path) -> list[Path]:
    """The toolkit homes a setting may name: the home itself, the ``ascend-toolkit`` folder
    holding ``latest/``, or an install root (as ``cann_status`` reads them)."""
    return [path, path / "latest", *_layouts_under(path)]


def _pyacl_search_path() -> list[str]:
    """Directories that may hold pyACL when ``import acl`` fails.

    Triton's Python backend stub embeds an *isolated* interpreter, which
    ignores ``PYTHONPATH``; so the place ``set_env.sh`` puts pyACL on is read
    here by hand, followed by the toolkit homes CANN's environment names
    (``ASCEND_TOOLKIT_HOME``, ``ASCEND_HOME_PATH``; a home or an install root),
    then the default installs of both layouts: ``/usr/local/Ascend/cann``, then
    ``/usr/local/Ascend/ascend-toolkit/latest``, then the same under ``$HOME/Ascend``.
    """
    candidates = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    homes: list[Path] = []
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        value = os.environ.get(var, "").strip()
        if value:
            homes += _homes_under(Path(value))
    roots = [Path(_DEFAULT_ASCEND_ROOT)]
    if os.environ.get("HOME"):
        roots.append(Path(os.environ["HOME"], "Ascend"))
    homes += [home for root in roots for home in _layouts_under(root)]
    candidates += [str(home.joinpath(*where)) for home in homes for where in _PYACL_DIRS]
    return [c for c in dict.fromkeys(candidates) if c not in sys.path and Path(c).is_dir()]


def import_acl() -> Any:
    """The ``acl`` module, or :class:`AclUnavailable` with what to do about it."""
    try:
        import acl
    except ImportError:
        extra = _pyacl_search_path()
        # Appended, not prepended: nothing there may shadow what the stub already has.
        sys.path.extend(extra)
        try:
            import acl
        except ImportError as exc:
            looked = ", ".join(extra) if extra else "no PYTHONPATH or toolkit directory exists"
            raise AclUnavailable(
                f"pyACL is not available (import acl failed: {exc}; also looked in: {looked}). "
                "Install the CANN toolkit and source its set_env.sh (or set ASCEND_TOOLKIT_HOME) "
                "so that its python/site-packages can be found."
            ) from exc
    return acl


# --------------------------------------------------------------------------- process-wide init

_INIT_LOCK = threading.Lock()
_initialized_by_us: set[int] = set()  # id() of acl modules this process initialised
_open_sessions = 0


def _init_acl(acl: Any) -> None:
    """``acl.init()`` once per process and module; a repeat-initialize answer is fine."""
    with _INIT_LOCK:
        if id(acl) in _initialized_by_us:
            return
        ret = acl.init()
        if ret == ACL_SUCCESS:
            _initialized_by_us.add(id(acl))
            # CANN allows one aclInit per process: finalize only when the process ends.
            atexit.register(finalize_acl, acl)
        elif ret != ACL_ERROR_REPEAT_INITIALIZE:
            raise AclError(
                "acl.init",
                ret,
                "is the CANN runtime installed and its set_env.sh sourced, does the driver "
                "match this CANN release, and may this user open the device nodes?",
            )


def finalize_acl(acl: Any | None = None) -> int | None:
    """``acl.finalize()`` if this process initialised pyACL and no session is open.

    Call it when the process is done with the NPU (the Triton backend does, in
    ``finalize``); otherwise it runs at exit. Returns the finalize code, or
    None when there was nothing to do.
    """
    acl = acl if acl is not None else import_acl()
    with _INIT_LOCK:
        if id(acl) not in _initialized_by_us or _open_sessions:
            return None
        _initialized_by_us.discard(id(acl))
        return int(acl.finalize())


# --------------------------------------------------------------------------- output names


def onnx_part(om_name: str) -> str | None:
    """The ONNX output name inside an OM output name, or None when it carries none.

    ATC names each output of an OM built from ONNX ``<op>:<index>:<onnx output name>``;
    with ``--out_nodes`` the name is ``<op>:<index>`` only (docs/pyacl.md#output-names).
    The name is split at most twice, because an ONNX output name may itself contain ``:``.
    The ``<op>`` part is a node name after GE's fusion passes and is never compared.
    """
    parts = om_name.split(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2]:
        return parts[2]
    return None


def map_om_outputs(
    om_names: list[str], wanted: list[str], side: str = "config"
) -> tuple[list[int], str]:
    """For each name in ``wanted`` (config or ONNX output names), the OM output carrying it.

    The rule, shared by the Triton backend and verification:

    1. An OM output matches a wanted name when its ONNX part (:func:`onnx_part`) equals it,
       or when its whole name does (an OM output that already carries the plain name).
    2. When some wanted name has no match, and the OM names carry no ONNX part at all
       (``--out_nodes``) and the counts agree, outputs are matched by position; the
       returned note says so, for the log.

    Args:
        om_names: The OM's output names, in its order (``get_output_name_by_index``).
        wanted: The output names to find.
        side: Who wants them, for messages: "config" or "source model".

    Returns:
        The OM output index for each wanted name, in order, and a note ("" unless matched
        by position).

    Raises:
        OutputNameError: A wanted name matches several OM outputs, or none and the
            positional fallback does not apply; the message names both sides.
    """
    found: dict[str, int] = {}
    for name in wanted:
        matches = [
            i for i, om_name in enumerate(om_names) if om_name == name or onnx_part(om_name) == name
        ]
        if len(matches) > 1:
            raise OutputNameError(
                f"{side} output '{name}' matches several OM outputs "
                f"{[om_names[i] for i in matches]}; the mapping is ambiguous"
            )
        if matches:
            found[name] = matches[0]
    claimed = sorted(found.values())
    if len(set(claimed)) != len(claimed):
        twice = [n for n in wanted if claimed.count(found.get(n, -1)) > 1]
        raise OutputNameError(
            f"{side} outputs {twice} match the same OM output; the OM has {om_names}"
        )
    if len(found) == len(wanted):
        return [found[name] for name in wanted], ""
    missing = [name for name in wanted if name not in found]
    positional = (
        len(om_names) == len(wanted)
        and not any(onnx_part(n) for n in om_names)
        and all(found[name] == i for i, name in enumerate(wanted) if name in found)
    )
    if positional:
        return list(range(len(wanted))), (
            f"the OM's output names {om_names} carry no ONNX output name (an OM built with "
            f"--out_nodes?), so they are matched to the {side}'s {wanted} by position"
        )
    hint = (
        "; names without an ONNX part (an OM built with --out_nodes) are matched by "
        "position only when the counts agree"
        if not any(onnx_part(n) for n in om_names)
        else ""
    )
    raise OutputNameError(
        f"{side} output(s) {missing} are not outputs of the OM: its outputs are {om_names} "
        f"and the {side} declares {wanted}. An OM built from ONNX names each output "
        f"'<op>:<index>:<ONNX output name>', matched on the ONNX output name{hint}"
    )


# --------------------------------------------------------------------------- the session


class OmTensor:
    """One input or output of a loaded OM, as its model description reports it."""

    def __init__(self, index: int, name: str, dims: list[int], acl_type: int, size: int) -> None:
        if acl_type not in ACL_TO_NUMPY:
            raise UnsupportedTensorType(name, acl_type)
        self.index = index
        self.name = name
        #: Dims as compiled; ``-1`` marks the batch axis of a dynamic-batch OM.
        self.dims = dims
        self.acl_type = acl_type
        self.dtype = np.dtype(ACL_TO_NUMPY[acl_type])
        #: Buffer size in bytes (for the largest gear of a dynamic-batch OM).
        self.size = size

    def shape_text(self) -> str:
        return "[" + ", ".join("batch" if d < 0 else str(d) for d in self.dims) + "]"

    def __repr__(self) -> str:
        return f"OmTensor({self.name!r}, {self.shape_text()}, {self.dtype})"


class OmSession:
    """An OM file loaded on one NPU, ready to run; usable as a context manager.

    Args:
        path: The ``.om`` file.
        device_id: The device id ``aclrtSetDevice`` takes: the ``Device`` (logical id)
            column of ``npu-smi info``, not its NPU id (docs/npu-smi.md#the-info-table).
        acl_module: The pyACL module; imported when None (tests pass a fake).

    Raises:
        AclUnavailable: pyACL is not importable.
        AclError: A pyACL call failed (no such device, not an OM for this chip, ...).
    """

    def __init__(self, path: Path | str, device_id: int = 0, acl_module: Any = None) -> None:
        global _open_sessions
        self.acl = acl_module if acl_module is not None else import_acl()
        self.path = Path(path)
        self.device_id = int(device_id)
        self.inputs: list[OmTensor] = []
        self.outputs: list[OmTensor] = []
        #: Batch gears of a dynamic-batch OM, ascending; empty for a static OM.
        self.gears: list[int] = []
        self._mbatch_index: int | None = None
        self._hidden: list[OmTensor] = []
        self.context: Any = None
        self.model_id: int | None = None
        self.desc: Any = None
        self._device_set = False
        self._device_buffers: list[int] = []
        self._host_buffers: list[int] = []
        self._datasets: list[Any] = []
        self._input_ds: Any = None
        self._output_ds: Any = None
        self._input_ptrs: list[int] = []
        self._output_ptrs: list[int] = []
        self._host_out: list[int] = []
        self._lock = threading.Lock()
        self.closed = False
        with _INIT_LOCK:
            _open_sessions += 1
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    # ----------------------------------------------------------------- setup

    def _check(self, ret: Any, call: str, hint: str = "") -> None:
        if ret != ACL_SUCCESS:
            raise AclError(call, int(ret), hint)

    def _open(self) -> None:
        acl = self.acl
        if not self.path.is_file():
            raise AclError("acl.mdl.load_from_file", -1, f"{self.path} does not exist")
        _init_acl(acl)
        self._check(
            acl.rt.set_device(self.device_id),
            f"acl.rt.set_device({self.device_id})",
            "is that NPU present (npu-smi info) and visible in this container?",
        )
        self._device_set = True
        self.context, ret = acl.rt.create_context(self.device_id)
        self._check(ret, "acl.rt.create_context")
        model_id, ret = acl.mdl.load_from_file(str(self.path))
        self._check(
            ret,
            "acl.mdl.load_from_file",
            f"{self.path} is not an OM for this chip and CANN version, or is damaged",
        )
        self.model_id = model_id
        self.desc = acl.mdl.create_desc()
        self._check(acl.mdl.get_desc(self.desc, self.model_id), "acl.mdl.get_desc")
        self._describe()
        self._allocate()

    def _dims(self, getter: Any, index: int, call: str) -> list[int]:
        info, ret = getter(self.desc, index)
        self._check(ret, call)
        return [int(d) for d in info["dims"]]

    def _describe(self) -> None:
        acl, desc = self.acl, self.desc
        for i in range(acl.mdl.get_num_inputs(desc)):
            tensor = OmTensor(
                i,
                acl.mdl.get_input_name_by_index(desc, i),
                self._dims(acl.mdl.get_input_dims, i, "acl.mdl.get_input_dims"),
                acl.mdl.get_input_data_type(desc, i),
                acl.mdl.get_input_size_by_index(desc, i),
            )
            if tensor.name in _HIDDEN_INPUTS:
                self._hidden.append(tensor)
                if tensor.name == DYNAMIC_BATCH_INPUT:
                    self._mbatch_index = i
            else:
                self.inputs.append(tensor)
        for i in range(acl.mdl.get_num_outputs(desc)):
            self.outputs.append(
                OmTensor(
                    i,
                    acl.mdl.get_output_name_by_index(desc, i),
                    self._dims(acl.mdl.get_output_dims, i, "acl.mdl.get_output_dims"),
                    acl.mdl.get_output_data_type(desc, i),
                    acl.mdl.get_output_size_by_index(desc, i),
                )
            )
        if self._mbatch_index is not None:
            info, ret = acl.mdl.get_dynamic_batch(desc)
            self._check(ret, "acl.mdl.get_dynamic_batch")
            self.gears = sorted(int(b) for b in info["batch"])

    def _malloc(self, size: int) -> int:
        # A zero-byte tensor still needs a valid address for the dataset.
        ptr, ret = self.acl.rt.malloc(max(size, 1), ACL_MEM_MALLOC_HUGE_FIRST)
        self._check(ret, f"acl.rt.malloc({size})", "out of device memory?")
        self._device_buffers.append(ptr)
        return int(ptr)

    def _dataset(self, tensors: list[tuple[int, int]]) -> Any:
        acl = self.acl
        dataset = acl.mdl.create_dataset()
        self._datasets.append(dataset)
        for ptr, size in tensors:
            buffer = acl.create_data_buffer(ptr, size)
            _, ret = acl.mdl.add_dataset_buffer(dataset, buffer)
            if ret != ACL_SUCCESS:
                acl.destroy_data_buffer(buffer)
                raise AclError("acl.mdl.add_dataset_buffer", int(ret))
        return dataset

    def _allocate(self) -> None:
        """Device buffers sized by the OM, reused for every run; datasets over them."""
        by_index = sorted([*self.inputs, *self._hidden], key=lambda t: t.index)
        in_ptrs = {t.index: self._malloc(t.size) for t in by_index}
        self._input_ptrs = [in_ptrs[t.index] for t in by_index]
        self._input_ds = self._dataset([(in_ptrs[t.index], t.size) for t in by_index])
        self._output_ptrs = [self._malloc(t.size) for t in self.outputs]
        self._output_ds = self._dataset(
            [(p, t.size) for p, t in zip(self._output_ptrs, self.outputs, strict=True)]
        )
        for tensor in self.outputs:
            ptr, ret = self.acl.rt.malloc_host(max(tensor.size, 1))
            self._check(ret, "acl.rt.malloc_host")
            self._host_buffers.append(ptr)
            self._host_out.append(int(ptr))

    # ----------------------------------------------------------------- running

    @property
    def batch_axis_size(self) -> int | None:
        """The OM's batch size when every input shares a fixed first dimension, else None."""
        firsts = {t.dims[0] for t in self.inputs if t.dims}
        if len(firsts) == 1 and all(t.dims for t in self.inputs):
            size = firsts.pop()
            return size if size > 0 else None
        return None

    def run(self, feeds: dict[str, np.ndarray], split_batch: bool = False) -> dict[str, np.ndarray]:
        """Runs the OM on ``feeds`` and returns every output by the OM's name for it.

        Inputs must have the OM's data types and shapes. A dynamic-batch OM
        takes any batch up to its largest gear (padded to the next gear). With
        ``split_batch`` (a Triton model with ``max_batch_size > 0``), a batch
        of any size is cut into chunks of the OM's batch (or largest gear),
        the last one zero-padded, and the outputs are joined back.

        Raises:
            RequestError: Missing/unknown inputs, wrong data type or shape.
            AclError: pyACL failed.
        """
        if self.closed:
            raise AclError("OmSession.run", -1, "the session is closed")
        feeds = self._checked(feeds)
        batch = self._batch_of(feeds, split_batch)
        if batch is None:
            return self._run_once(feeds, None)
        chunk = max(self.gears) if self.gears else self.batch_axis_size
        assert chunk is not None
        parts: list[dict[str, np.ndarray]] = []
        for start in range(0, batch, chunk):
            piece = {k: v[start : start + chunk] for k, v in feeds.items()}
            rows = min(chunk, batch - start)
            target = next((g for g in self.gears if g >= rows), chunk) if self.gears else chunk
            padded = {k: _pad_rows(v, target) for k, v in piece.items()}
            out = self._run_once(padded, target if self.gears else None)
            parts.append({k: v[:rows] for k, v in out.items()})
        if len(parts) == 1:
            return parts[0]
        return {name: np.concatenate([p[name] for p in parts], axis=0) for name in parts[0]}

    def _checked(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        expected = {t.name for t in self.inputs}
        missing = sorted(expected - set(feeds))
        if missing:
            raise RequestError(f"input(s) {missing} missing; the OM takes {sorted(expected)}")
        unknown = sorted(set(feeds) - expected)
        if unknown:
            raise RequestError(f"unknown input(s) {unknown}; the OM takes {sorted(expected)}")
        checked = {}
        for tensor in self.inputs:
            array = np.asarray(feeds[tensor.name])
            if array.dtype != tensor.dtype:
                raise RequestError(
                    f"input '{tensor.name}': data type {array.dtype} does not match "
                    f"{tensor.dtype} of the compiled model"
                )
            checked[tensor.name] = np.ascontiguousarray(array)
        return checked

    def _batch_of(self, feeds: dict[str, np.ndarray], split_batch: bool) -> int | None:
        """None when the feeds match the OM exactly; else the batch size to split/pad."""
        exact = all(list(feeds[t.name].shape) == t.dims for t in self.inputs)
        if exact and not self.gears:
            return None
        batching = bool(self.gears) or (split_batch and self.batch_axis_size is not None)
        sizes = {feeds[t.name].shape[0] for t in self.inputs if feeds[t.name].ndim}
        for tensor in self.inputs:
            shape = list(feeds[tensor.name].shape)
            if shape == tensor.dims:
                continue
            if batching and len(shape) == len(tensor.dims) and shape[1:] == tensor.dims[1:]:
                continue
            hint = (
                "the batch may vary, the other dimensions are fixed"
                if batching
                else "OM shapes are fixed when ATC compiles (--input_shape); "
                "recompile for this shape or with --dynamic_batch_size"
            )
            raise RequestError(
                f"input '{tensor.name}': shape {shape} does not match the compiled "
                f"shape {tensor.shape_text()} ({hint})"
            )
        if len(sizes) != 1:
            raise RequestError(f"inputs disagree on the batch size: {sorted(sizes)}")
        batch = sizes.pop()
        if batch < 1:
            raise RequestError("the batch is empty")
        if self.gears and not split_batch and batch > self.gears[-1]:
            raise RequestError(
                f"batch {batch} is larger than the largest compiled batch {self.gears[-1]} "
                f"(gears {self.gears})"
            )
        return batch

    def _to_device(self, ptr: int, size: int, array: np.ndarray, name: str) -> None:
        acl = self.acl
        data = array.tobytes()
        if len(data) > size:
            raise RequestError(f"input '{name}' needs {len(data)} bytes, the OM has {size}")
        if hasattr(acl.util, "bytes_to_ptr"):
            host = acl.util.bytes_to_ptr(data)
        else:  # pyACL before bytes_to_ptr existed
            keep = np.frombuffer(data, dtype=np.uint8)
            host = acl.util.numpy_to_ptr(keep)
        self._check(
            acl.rt.memcpy(ptr, size, host, len(data), ACL_MEMCPY_HOST_TO_DEVICE),
            f"acl.rt.memcpy (input '{name}' to device)",
        )

    def _from_device(self, index: int, shape: list[int]) -> np.ndarray:
        acl = self.acl
        tensor = self.outputs[index]
        nbytes = int(np.prod(shape, dtype=np.int64)) * tensor.dtype.itemsize
        if nbytes > tensor.size:
            raise AclError(
                f"output '{tensor.name}'", -1, f"{nbytes} bytes reported, {tensor.size} allocated"
            )
        host = self._host_out[index]
        self._check(
            acl.rt.memcpy(
                host, tensor.size, self._output_ptrs[index], nbytes, ACL_MEMCPY_DEVICE_TO_HOST
            ),
            f"acl.rt.memcpy (output '{tensor.name}' to host)",
        )
        if hasattr(acl.util, "ptr_to_bytes"):
            raw = acl.util.ptr_to_bytes(host, nbytes)
            array = np.frombuffer(raw, dtype=tensor.dtype)
        else:  # older pyACL
            array = acl.util.ptr_to_numpy(host, (nbytes,), _NPY_UBYTE).view(tensor.dtype)
        return array.reshape(shape).copy()

    def _output_shape(self, index: int, batch: int | None) -> list[int]:
        """The output's shape for the gear just run.

        ``get_cur_output_dims`` reports it after an execute. Without that call (older
        pyACL), the dims from ``get_output_dims`` are those of the largest gear of a
        dynamic-batch OM (docs/pyacl.md#dynamic-batch), so the batch axis is the gear set.
        """
        tensor = self.outputs[index]
        getter = getattr(self.acl.mdl, "get_cur_output_dims", None)
        if getter is not None:
            info, ret = getter(self.desc, index)
            dims = [int(d) for d in info.get("dims", [])] if ret == ACL_SUCCESS else []
            if dims and all(d >= 0 for d in dims):
                return dims
        dims = list(tensor.dims)
        if batch is not None and dims and (self.gears or dims[0] < 0):
            dims[0] = batch
        return dims

    def _run_once(self, feeds: dict[str, np.ndarray], batch: int | None) -> dict[str, np.ndarray]:
        acl = self.acl
        with self._lock:
            # pyACL contexts are per thread; Triton may call us from another one.
            self._check(acl.rt.set_context(self.context), "acl.rt.set_context")
            for tensor in self.inputs:
                ptr = self._input_ptrs[tensor.index]
                self._to_device(ptr, tensor.size, feeds[tensor.name], tensor.name)
            if self._mbatch_index is not None:
                self._check(
                    acl.mdl.set_dynamic_batch_size(
                        self.model_id, self._input_ds, self._mbatch_index, batch
                    ),
                    f"acl.mdl.set_dynamic_batch_size({batch})",
                    f"the OM's gears are {self.gears}",
                )
            self._check(
                acl.mdl.execute(self.model_id, self._input_ds, self._output_ds),
                "acl.mdl.execute",
            )
            return {
                tensor.name: self._from_device(i, self._output_shape(i, batch))
                for i, tensor in enumerate(self.outputs)
            }

    # ----------------------------------------------------------------- teardown

    def close(self) -> list[str]:
        """Releases everything, in the documented order; safe to call twice.

        Keeps going when a release fails (a half-released device is worse) and
        returns the failures as text.
        """
        global _open_sessions
        if self.closed:
            return []
        self.closed = True
        acl = self.acl
        problems: list[str] = []

        def release(call: str, ret: Any) -> None:
            if ret != ACL_SUCCESS:
                problems.append(f"{call} returned {ret}")

        if self.context is not None:
            release("acl.rt.set_context", acl.rt.set_context(self.context))
        for dataset in self._datasets:
            for i in range(acl.mdl.get_dataset_num_buffers(dataset)):
                release(
                    "acl.destroy_data_buffer",
                    acl.destroy_data_buffer(acl.mdl.get_dataset_buffer(dataset, i)),
                )
            release("acl.mdl.destroy_dataset", acl.mdl.destroy_dataset(dataset))
        self._datasets = []
        if self.model_id is not None:
            release("acl.mdl.unload", acl.mdl.unload(self.model_id))
            self.model_id = None
        if self.desc is not None:
            release("acl.mdl.destroy_desc", acl.mdl.destroy_desc(self.desc))
            self.desc = None
        for ptr in self._device_buffers:
            release("acl.rt.free", acl.rt.free(ptr))
        for ptr in self._host_buffers:
            release("acl.rt.free_host", acl.rt.free_host(ptr))
        self._device_buffers, self._host_buffers = [], []
        if self.context is not None:
            release("acl.rt.destroy_context", acl.rt.destroy_context(self.context))
            self.context = None
        if self._device_set:
            release("acl.rt.reset_device", acl.rt.reset_device(self.device_id))
            self._device_set = False
        with _INIT_LOCK:
            _open_sessions -= 1
        return problems

    def __enter__(self) -> OmSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _pad_rows(array: np.ndarray, rows: int) -> np.ndarray:
    """``array`` with zero rows appended up to ``rows`` along axis 0."""
    missing = rows - array.shape[0]
    if missing <= 0:
        return array
    pad = np.zeros((missing, *array.shape[1:]), dtype=array.dtype)
    return np.concatenate([array, pad], axis=0)


# --------------------------------------------------------------------------- Triton glue


class TensorSpec:
    """One input or output as the model config declares it."""

    def __init__(self, entry: dict[str, Any], batched: bool) -> None:
        self.name: str = entry["name"]
        self.data_type: str = entry.get("data_type", "TYPE_FP32")
        if self.data_type not in TRITON_TO_NUMPY:
            raise ValueError(
                f"tensor '{self.name}': data type {self.data_type} is not supported by OM models"
            )
        self.dtype = np.dtype(TRITON_TO_NUMPY[self.data_type])
        self.dims: list[int] = [int(d) for d in entry.get("dims", [])]
        self.batched = batched


def _parameter(config: dict[str, Any], key: str, default: str = "") -> str:
    value = config.get("parameters", {}).get(key)
    if isinstance(value, dict):
        return str(value.get("string_value", default))
    return default if value is None else str(value)


def _device_id(config: dict[str, Any]) -> int:
    raw = _parameter(config, "device_id", "0").strip() or "0"
    if not raw.isdigit():
        raise ValueError(f"parameter device_id must be a whole number, got {raw!r}")
    return int(raw)


def _check_tensor(spec: TensorSpec, tensor: OmTensor, kind: str) -> None:
    if spec.dtype != tensor.dtype:
        raise ValueError(
            f"config {kind} '{spec.name}' is {spec.data_type} but the OM "
            f"{kind} '{tensor.name}' is {tensor.dtype}"
        )
    om_dims = tensor.dims[1:] if spec.batched else tensor.dims
    if spec.batched and not tensor.dims:
        raise ValueError(
            f"config {kind} '{spec.name}' is batched (max_batch_size > 0) "
            "but the OM tensor has no batch dimension"
        )
    if len(om_dims) != len(spec.dims) or any(
        want >= 0 and got >= 0 and want != got for want, got in zip(spec.dims, om_dims, strict=True)
    ):
        raise ValueError(
            f"config {kind} '{spec.name}' has dims {spec.dims} but the OM has "
            f"{tensor.shape_text()}"
            + (" (the batch dimension is left out of config dims)" if spec.batched else "")
        )


def check_signature(
    session: OmSession, inputs: list[TensorSpec], outputs: list[TensorSpec]
) -> tuple[dict[str, int], str]:
    """Fails (at load, not at the first request) when config and OM disagree.

    Inputs are matched by name. Outputs are matched by :func:`map_om_outputs`: the OM
    calls them ``<op>:<index>:<ONNX output name>`` where the config has the ONNX name.

    Returns:
        The OM output index for each config output name, and a note for the log
        ("" unless the outputs were matched by position).
    """
    om_inputs = {t.name: t for t in session.inputs}
    if not outputs:
        raise ValueError("the model config declares no outputs")
    for spec in inputs:
        tensor = om_inputs.get(spec.name)
        if tensor is None:
            raise ValueError(
                f"config input '{spec.name}' is not an input of the OM (it has {sorted(om_inputs)})"
            )
        _check_tensor(spec, tensor, "input")
    indices, note = map_om_outputs(
        [t.name for t in session.outputs], [spec.name for spec in outputs]
    )
    for spec, index in zip(outputs, indices, strict=True):
        _check_tensor(spec, session.outputs[index], "output")
    missing = sorted(set(om_inputs) - {s.name for s in inputs})
    if missing:
        raise ValueError(f"the model config does not declare OM input(s) {missing}")
    return dict(zip((spec.name for spec in outputs), indices, strict=True)), note


class TritonPythonModel:
    """The backend's model class; Triton makes one per model instance (one stub process)."""

    def initialize(self, args: dict[str, str]) -> None:
        self.config: dict[str, Any] = json.loads(args["model_config"])
        self.model_name: str = self.config.get("name", args.get("model_name", "?"))
        self.max_batch_size = int(self.config.get("max_batch_size", 0))
        batched = self.max_batch_size > 0
        self.inputs = [TensorSpec(e, batched) for e in self.config.get("input", [])]
        self.outputs = [TensorSpec(e, batched) for e in self.config.get("output", [])]
        filename = str(self.config.get("default_model_filename") or DEFAULT_MODEL_FILENAME)
        # For Python-based backends ``model_repository`` is the model's own directory.
        path = Path(args["model_repository"]) / str(args["model_version"]) / filename
        if not path.is_file():
            raise FileNotFoundError(f"OM file {path} not found")
        self.session: OmSession | None = OmSession(path, _device_id(self.config))
        try:
            indices, note = check_signature(self.session, self.inputs, self.outputs)
        except Exception:
            self.finalize()
            raise
        #: Config output name -> the OM's name for it (``<op>:<index>:<ONNX name>``).
        self.om_output_names = {
            name: self.session.outputs[index].name for name, index in indices.items()
        }
        if note:
            print(f"acl backend: model '{self.model_name}': {note}", flush=True)

    def execute(self, requests: list[Any]) -> list[Any]:
        responses: list[Any] = [None] * len(requests)
        ready: list[tuple[int, dict[str, np.ndarray], list[str]]] = []
        for index, request in enumerate(requests):
            try:
                ready.append((index, self._read_inputs(request), self._requested(request)))
            except RequestError as exc:
                responses[index] = self._error(str(exc))
        if self.max_batch_size > 0 and len(ready) > 1:
            self._run_together(ready, responses)
        else:
            for member in ready:
                self._run_together([member], responses)
        return responses

    def _read_inputs(self, request: Any) -> dict[str, np.ndarray]:
        feeds = {}
        for spec in self.inputs:
            tensor = pb_utils.get_input_tensor_by_name(request, spec.name)
            if tensor is None:
                raise RequestError(f"input '{spec.name}' is missing from the request")
            array = tensor.as_numpy()
            if array.dtype != spec.dtype:
                raise RequestError(
                    f"input '{spec.name}': data type {array.dtype} does not match "
                    f"{spec.data_type} in the model config"
                )
            if self.max_batch_size > 0 and (
                array.ndim == 0 or array.shape[0] > self.max_batch_size
            ):
                raise RequestError(
                    f"input '{spec.name}': batch size must be 1..{self.max_batch_size}, "
                    f"got shape {list(array.shape)}"
                )
            feeds[spec.name] = array
        return feeds

    def _requested(self, request: Any) -> list[str]:
        known = [spec.name for spec in self.outputs]
        names = list(request.requested_output_names() or [])
        unknown = [n for n in names if n not in known]
        if unknown:
            raise RequestError(f"unknown output(s) {unknown}; the model has {known}")
        return names or known

    def _run_together(
        self, members: list[tuple[int, dict[str, np.ndarray], list[str]]], responses: list[Any]
    ) -> None:
        """One OM run for ``members`` (concatenated along the batch axis when several)."""
        assert self.session is not None
        if len(members) == 1:
            feeds, sizes = members[0][1], None
        else:
            feeds = {
                name: np.concatenate([m[1][name] for m in members], axis=0)
                for name in members[0][1]
            }
            sizes = [next(iter(m[1].values())).shape[0] for m in members]
        try:
            results = self.session.run(feeds, split_batch=self.max_batch_size > 0)
        except RequestError as exc:
            if sizes is not None:  # shapes differ between requests: run them one by one
                for member in members:
                    self._run_together([member], responses)
                return
            responses[members[0][0]] = self._error(str(exc))
            return
        except AclError as exc:
            for index, _, _ in members:
                responses[index] = self._error(
                    f"pyACL failed to run model '{self.model_name}': {exc}"
                )
            return
        specs = {spec.name: spec for spec in self.outputs}
        offset = 0
        for position, (index, _, names) in enumerate(members):
            tensors = []
            for name in names:
                array = results[self.om_output_names[name]]
                if sizes is not None:
                    array = array[offset : offset + sizes[position]]
                array = np.ascontiguousarray(array, dtype=specs[name].dtype)
                tensors.append(pb_utils.Tensor(name, array))
            if sizes is not None:
                offset += sizes[position]
            responses[index] = pb_utils.InferenceResponse(output_tensors=tensors)

    @staticmethod
    def _error(message: str) -> Any:
        return pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(message))

    def finalize(self) -> None:
        session, self.session = getattr(self, "session", None), None
        if session is not None:
            acl = session.acl
            problems = session.close()
            if problems:
                print(f"acl backend: releasing '{self.model_name}': {'; '.join(problems)}")
            # One stub process per model instance: it is done with the NPU now.
            finalize_acl(acl)

"""Reading the end of Triton's log, and the GE backend's error phrases found in it.

:func:`read_log_tail` reads a bounded window of Triton's log since its last start;
:func:`classify_ge_message` sorts a log line or a load failure reason into the kind of GE
failure it reports (:data:`GE_LOG_PHRASES`, docs/ge-backend.md#log-phrases), and
:data:`GE_ADVICE` says what to do about each kind. Pure text functions: the checks and the
context build on them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from model_store.text import Message, say

#: How much of the end of Triton's log is read (bounded: the log grows for months).
LOG_TAIL_BYTES = 2 << 20

#: The line EmbeddedTriton writes before each run: ``# 2026-01-02 03:04:05 $ tritonserver ...``.
_START_MARK = re.compile(r"^# \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \$ ")

#: Exact phrases of the GE backend's log and errors (docs/ge-backend.md#log-phrases) and
#: what kind of failure each one means. Order matters: the first phrase found wins, so the
#: generic wrappers ("Failed to create model state", "init instance error") come last.
GE_LOG_PHRASES: list[tuple[str, str]] = [
    # reading the model and its config
    ("Model file not found: dir path ", "parse"),
    ("not support model_mode_", "parse"),
    ("-1 dim has no name", "parse"),
    ("-1 dim find error", "parse"),
    (" have not find ", "parse"),
    ("JSON parsing error: ", "parse"),
    ("aclgrphParseONNX execute failed, ret is: ", "parse"),
    ("aclgrphParseTensorFlow execute failed, ret is: ", "parse"),
    # opening the NPU
    ("aclInit failed, ret is: ", "device"),
    ("aclrtGetDeviceCount failed, ret is: ", "device"),
    ("no npu card detected!", "device"),
    ("aclrtSetDevice execute failed, code is: ", "device"),
    # GE initialisation, graph compile and load
    (" GEInitialize failed.", "compile"),
    ("Create session failed.", "compile"),
    ("session_->AddGraph failed, ret is: ", "compile"),
    ("session_->CompileGraph failed, ret is: ", "compile"),
    ("aclrtCreateStream execute failed, code is:", "compile"),
    ("session_->LoadGraph failed, ret is: ", "compile"),
    ("InitGraphSession failed for graph_id: ", "compile"),
    # running requests
    ("execute model failed, ret is: ", "execute"),
    ("aclrtSynchronizeStream is failed, ret code is ", "execute"),
    ("malloc dev buffer failed, ret is:", "execute"),
    ("aclrtMemcpy is failed, ret code is ", "execute"),
    ("infer output failed!", "execute"),
    ("TransToGeData failed, ret is:", "execute"),
    ("ProcessRequests fail please check triton log find error info", "execute"),
    # generic wrappers around the above
    ("Init failed with exception: ", "compile"),
    ("init instance error, please check log for more info.", "compile"),
    ("Failed to create model state: ", "parse"),
]

_PLOG = say(
    "restart Triton with plog on its console (`ASCEND_SLOG_PRINT_TO_STDOUT=1 "
    "ASCEND_GLOBAL_LOG_LEVEL=1` in its environment), repeat the load or request and look for "
    '"ERROR" lines in its output (plog files are under $HOME/ascend/log)'
)

#: What to do for each kind of GE failure (grouped as in docs/ge-backend.md#log-phrases).
GE_ADVICE: dict[str, Message] = {
    "parse": say(
        "The GE backend could not read the model. This is usually the ONNX export itself or a "
        "mismatch with config.pbtxt: input/output names and their order must match the ONNX, "
        "every -1 output dim needs a name made of input dim names, and the model directory must "
        "hold exactly one .onnx. Re-export (the backend's docs suggest opset 14) and publish a "
        "new version."
    ),
    "device": say(
        "The GE backend could not open an NPU. See the device nodes and npu-smi checks; make "
        "sure device_ids in config.pbtxt names NPUs that exist, and that Triton's container has "
        "/dev/davinciN, /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc and the driver "
        "mounts."
    ),
    "compile": say(
        "GE could not initialise, compile or load the graph. To see why, %(plog)s. An ATC "
        "compile of the same ONNX (the npu_ge build's pre-flight step) usually names an "
        "unsupported operator in plain words.",
        plog=_PLOG,
    ),
    "execute": say(
        "The model loaded but a request failed on the NPU. Check that request shapes fit the "
        "config (static_model and graph.ge.dynamicDims gears must cover every batch sent); "
        '"malloc dev buffer failed" means NPU memory ran out (see npu-smi). To see the cause, '
        "%(plog)s.",
        plog=_PLOG,
    ),
    "other": say(
        "Read Triton's reason above and the Triton log around it; the model's version page "
        "shows how that version was built and verified."
    ),
}


def classify_ge_message(text: str) -> str | None:
    """The kind of GE backend failure ``text`` reports, or ``None`` if it has no known phrase.

    Example:
        >>> classify_ge_message("session_->CompileGraph failed, ret is: 1343225857")
        'compile'
        >>> classify_ge_message("all good") is None
        True
    """
    for phrase, kind in GE_LOG_PHRASES:
        if phrase in text:
            return kind
    return None


def read_log_tail(path: Path, max_bytes: int = LOG_TAIL_BYTES) -> list[str]:
    """The last ``max_bytes`` of a log, as lines, starting after its last start mark.

    A missing file gives ``[]``. The first, partial line of the window is dropped.
    """
    try:
        with path.open("rb") as log:
            size = log.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes)
            log.seek(start)
            data = log.read(max_bytes)
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    if start > 0 and lines:
        lines = lines[1:]
    for index in range(len(lines) - 1, -1, -1):
        if _START_MARK.match(lines[index]):
            return lines[index + 1 :]
    return lines

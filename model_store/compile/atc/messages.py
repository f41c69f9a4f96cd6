"""Reading ATC's console output: coded error and warning lines, summary phrases, advice.

:func:`parse_atc_line` recognises the lines that matter in ATC's output (``E10001: ...``,
``ATC run success``) and :func:`explain` turns an error code into what it means and what to
do (:data:`EXPLANATIONS`, from docs/atc.md). Pure functions over text: the runner
(:mod:`model_store.compile.atc.running`) feeds them ATC's lines as they come. The explanations
are :func:`~model_store.text.say` sentences: the English ``str``, with the template the web layer
translates.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from model_store.text import Message, as_json, say

#: Console phrases ATC prints (main_impl.cc; docs/atc.md#console-output).
START_PHRASE = "ATC start working now"
SUCCESS_PHRASE = "ATC run success"
FAILURE_PHRASE = "ATC run failed"

MessageKind = Literal["error", "warning", "success", "failure", "start"]

# "E10001: [PID: 1234] 2024-05-06-07:08:09.123.456 Value [x] for parameter ..."
# The [PID] / timestamp part only appears in newer CANN versions.
_CODE_LINE = re.compile(
    r"\s*(?P<code>[EW][0-9A-Z]{5})\s*:\s*"
    r"(?:\[PID:\s*(?P<pid>[0-9]+)\]\s*)?"
    r"(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6}){0,2})?"
    r"\s*(?P<text>.*)"
)


@dataclass
class AtcMessage:
    """One meaningful line of ATC output.

    Attributes:
        kind: ``error``/``warning`` (a coded line), ``success``/``failure``/``start``
            (ATC's summary phrases).
        code: The error code such as ``E10001`` (None for the phrases).
        text: The message after the code, PID and timestamp.
        line: The line as printed.
        pid: The ``[PID: n]`` value, when printed.
        timestamp: The timestamp after the PID, when printed.
        details: Indented lines that followed (``Solution: ...``, ``TraceBack ...``).
    """

    kind: MessageKind
    code: str | None
    text: str
    line: str
    pid: int | None = None
    timestamp: str | None = None
    details: list[str] = field(default_factory=list)

    @property
    def explanation(self) -> Message | None:
        """What the code means and what to do, in plain words (None for phrases)."""
        return explain(self.code) if self.code else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the explanation included (a stored message)."""
        return asdict(self) | {"explanation": as_json(self.explanation)}


def parse_atc_line(line: str) -> AtcMessage | None:
    """Recognises an ATC error/warning line or one of its summary phrases.

    Args:
        line: One line of ATC's combined stdout/stderr.

    Returns:
        An :class:`AtcMessage`, or None for progress and other lines.
    """
    stripped = line.strip()
    if not stripped:
        return None
    if stripped.startswith(SUCCESS_PHRASE):
        return AtcMessage("success", None, stripped, line)
    if stripped.startswith(FAILURE_PHRASE):
        return AtcMessage("failure", None, stripped, line)
    if stripped.startswith(START_PHRASE):
        return AtcMessage("start", None, stripped, line)
    match = _CODE_LINE.fullmatch(line.rstrip("\r\n"))
    if match is None:
        return None
    code = match["code"]
    if not any(ch.isdigit() for ch in code):  # "ERRORS:" and the like are not codes
        return None
    return AtcMessage(
        kind="error" if code.startswith("E") else "warning",
        code=code,
        text=match["text"].strip(),
        line=line,
        pid=int(match["pid"]) if match["pid"] else None,
        timestamp=match["ts"],
    )


_UNSUPPORTED_OP_ADVICE = say(
    "Check the operator against the CANN ONNX operator list for your version; re-export the "
    "model with an opset between 11 and 18, simplify it (onnxslim) so the operator is folded "
    "away, or replace the operator in the model. If it still fails, deploy with the npu_ge "
    "target, which compiles online and may fall back to other engines."
)

#: Known ATC codes -> what they mean and what to do.
EXPLANATIONS: dict[str, Message] = {
    "E10001": say(
        "A command-line value is invalid (ATC names the parameter and the reason). Fix that "
        "option: a typo in soc_version, an input name in input_shape that the model does not "
        "have, or a shape with the wrong number of dimensions are the usual causes."
    ),
    "E10054": say(
        "A required parameter is empty or a value was not quoted as a whole. Fill in the "
        "named option; values such as input_shape must reach ATC as a single argument."
    ),
    "E10007": say(
        "--framework is missing. ONNX models need --framework=5; the hub always passes it, so "
        "this points to a hand-edited command."
    ),
    "E19999": say(
        "ATC hit an inner error without a more specific code. Read the detail log under "
        "$HOME/ascend/log/debug/plog/ (or rerun with log level 'info' and "
        "ASCEND_SLOG_PRINT_TO_STDOUT=1) and check that the toolkit matches the chip."
    ),
    "E19010": say(
        "ATC has no parser for an operator of this model (an operator outside the standard "
        "ONNX domain, or an opset newer than this CANN supports). %(advice)s",
        advice=_UNSUPPORTED_OP_ADVICE,
    ),
    "EZ3003": say(
        "An operator of this model has no kernel on this chip in this CANN version, so ATC "
        "cannot compile it. %(advice)s",
        advice=_UNSUPPORTED_OP_ADVICE,
    ),
    "E40000": say(
        "The operator compiler (TBE) failed to start or compile. The CANN environment is "
        "usually incomplete: check ASCEND_OPP_PATH and PYTHONPATH (source set_env.sh), that "
        "the ops package matching the chip is installed, and the Python packages CANN needs."
    ),
    "E10003": say(
        "A gear option does not fit the input shape: each gear of --dynamic_dims needs one "
        "value per -1 in --input_shape. Give every gear exactly that many values."
    ),
    "E10035": say(
        "Too few gears: --dynamic_batch_size, --dynamic_image_size and --dynamic_dims need at "
        "least 2 (GE refuses a single gear given to an online graph the same way). Add a "
        "second gear, or fix that one size in the input shape and drop the gears."
    ),
    "E10039": say(
        "The same gear is listed twice in --dynamic_batch_size, --dynamic_image_size or "
        "--dynamic_dims. Remove the repeat; every gear must be different."
    ),
    "E40001": say(
        "ATC's operator compiler found no usable Python: neither `python3 -V` nor `python -V` "
        "ran from PATH, or no libpython3.Y.so.1.0 could be loaded (from python3-config's "
        "prefix/lib or LD_LIBRARY_PATH). Point ATC_PYTHON at a shared-library Python 3 that "
        "meets CANN's requirements, check it on the Diagnostics page (ATC's Python), and "
        "restart the worker."
    ),
    "E40002": say(
        "The python3 that ATC found on PATH is older than 3.7, which ATC refuses. Set "
        "ATC_PYTHON to a Python within the range your CANN release documents (3.7 or later) "
        "and restart the worker."
    ),
    "E40020": say(
        "A Python module failed to import in ATC's operator compiler; the message names the "
        "module and the Python error. Usually a package CANN needs (numpy, protobuf 3.20.x, "
        "decorator, sympy, scipy, attrs, psutil, cffi) is missing or the wrong version in "
        "ATC's Python, or set_env.sh was not sourced (CANN's own modules missing from "
        "PYTHONPATH). Install it into the interpreter ATC_PYTHON names (the Diagnostics page "
        "lists what is missing) and restart the worker."
    ),
    "EC0010": say(
        "A Python module failed to import (reported by CANN's tuning component; same cause "
        "as E40020): a package CANN needs is missing or the wrong version in ATC's Python. "
        "Install it into the interpreter ATC_PYTHON names (the Diagnostics page lists what "
        "is missing) and restart the worker."
    ),
    "W11001": say(
        "A warning: an operator did not hit the preferred operator library and uses a slower "
        "implementation. The model still compiled; expect lower performance on that operator."
    ),
}


def explain(code: str) -> Message:
    """Plain-words meaning of an ATC code, with a generic answer for unknown ones."""
    known = EXPLANATIONS.get(code)
    if known:
        return known
    if code.startswith("W"):
        return say(
            "ATC warning %(code)s. The compile can still succeed; look the code up in the CANN "
            "error code reference if the result misbehaves.",
            code=code,
        )
    return say(
        "ATC reported error %(code)s. Read the message and the lines below it (they often name "
        "a cause and a solution), look the code up in the CANN error code reference, and check "
        "the detail log under $HOME/ascend/log/.",
        code=code,
    )

"""ATC, the Ascend Tensor Compiler: find it, build its command line, run it, read its log.

ATC turns an ONNX model into an ``.om`` file for one Ascend chip
(``atc --model=x.onnx --framework=5 --output=out/x --soc_version=Ascend310P3``,
docs/atc.md#command-line). The worker runs it for the ``acl`` target and, where CANN
is installed, as a pre-flight compile for ``npu_ge``. This module is the whole
contract with the tool:

* :func:`cann_status` says whether ATC is there and, if not, what to set;
* :func:`atc_environment` is the environment CANN's ``set_env.sh`` would give;
* :class:`AtcOptions` / :func:`build_atc_command` turn the user's choices into
  an argument list (never a shell string) after checking every value;
* :func:`run_atc` runs it in its own process group, streams its output line by
  line, honours cancellation and a timeout, and checks the ``.om`` was written;
* :func:`parse_atc_line` / :data:`EXPLANATIONS` turn ATC's error codes into
  plain words with what to do.

Not run against a real CANN toolkit: written from the documented flags, log
phrases and error codes in docs/atc.md and tested against the fake
``atc`` in tests/fakes, which follows the same documentation.

Example:
    >>> status = cann_status()
    >>> argv = build_atc_command(status.atc_path, Path("m.onnx"), Path("out/m"),
    ...                          AtcOptions(soc_version="Ascend310P3"))
    >>> result = run_atc(argv, env=atc_environment(status, os.environ), cwd=Path("out"),
    ...                  on_line=print)
    >>> result.raise_for_failure()
"""

from __future__ import annotations

import contextlib
import os
import platform
import queue
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from model_store import spawn
from model_store.errors import ModelStoreError

# --------------------------------------------------------------------------- errors


class AtcUnavailable(ModelStoreError):
    """ATC (the CANN toolkit) is not installed or cannot be started here."""

    code = "cann_missing"


class AtcFailed(ModelStoreError):
    """ATC ran and did not produce an ``.om`` file (errors, cancel or timeout)."""

    code = "atc_failed"

    def __init__(self, message: str, result: AtcResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class InvalidAtcOptions(ModelStoreError):
    """Compile options that ATC would refuse, or that are unsafe to pass on."""

    code = "invalid_atc_options"


# --------------------------------------------------------------------------- finding CANN

#: Where ``set_env.sh`` points ASCEND_TOOLKIT_HOME on a default install.
DEFAULT_TOOLKIT_HOME = "/usr/local/Ascend/ascend-toolkit/latest"

# Places of the atc binary inside a toolkit home: current layouts put it in
# bin/ (a link into compiler/bin/), older ones (CANN 5.x) in atc/bin/.
_ATC_IN_TOOLKIT = ("bin/atc", "compiler/bin/atc", "atc/bin/atc")

_MISSING_HINT = (
    "set ATC_PATH to the atc binary or ASCEND_TOOLKIT_HOME to the CANN toolkit, "
    f"e.g. {DEFAULT_TOOLKIT_HOME}"
)


@dataclass
class CannStatus:
    """Whether ATC can run here, where it is, and if not, why (in plain words)."""

    available: bool
    atc_path: str | None
    toolkit_home: str | None
    version: str | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        """The status as JSON-ready data (diagnostics page, API)."""
        return asdict(self)


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _atc_in_toolkit(root: Path) -> tuple[Path, Path] | None:
    """``(atc, toolkit_home)`` inside ``root`` or ``root/latest``, or None."""
    for home in (root, root / "latest"):
        for relative in _ATC_IN_TOOLKIT:
            candidate = home / relative
            if _is_executable(candidate):
                return candidate, home
    return None


def _looks_like_toolkit(path: Path) -> bool:
    if (path / "opp").is_dir() or (path / "compiler").is_dir():
        return True
    return _version_file(path) is not None


def _toolkit_home_of(atc: Path) -> Path | None:
    """The toolkit home that holds ``atc`` (…/latest for …/latest/bin/atc), if it looks like one."""
    for parent in list(atc.parents)[:3]:
        if _looks_like_toolkit(parent):
            return parent
    return None


def _version_file(home: Path) -> Path | None:
    """The toolkit's install-info file, if any.

    These are the places public CANN install guides read
    (docs/cann.md#toolkit-version-files): ``<home>/<arch>-linux/ascend_toolkit_install.info``
    (``version=...``) and ``<home>/compiler/version.info`` (``Version=...``).
    """
    candidates = [home / f"{platform.machine()}-linux" / "ascend_toolkit_install.info"]
    with contextlib.suppress(OSError):
        candidates += sorted(home.glob("*-linux/ascend_toolkit_install.info"))
    candidates.append(home / "compiler" / "version.info")
    return next((c for c in candidates if c.is_file()), None)


def _toolkit_version(home: Path | None) -> str | None:
    """The ``version=`` value of the toolkit's install-info file, or None."""
    if home is None:
        return None
    path = _version_file(home)
    if path is None:
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "version" and value.strip():
            return value.strip()
    return None


def _found(atc: Path, home: Path | None, how: str) -> CannStatus:
    version = _toolkit_version(home)
    shown = f" (CANN {version})" if version else ""
    return CannStatus(
        available=True,
        atc_path=str(atc),
        toolkit_home=str(home) if home is not None else None,
        version=version,
        reason=f"ATC found at {atc} via {how}{shown}.",
    )


def cann_status(env: Mapping[str, str] | None = None) -> CannStatus:
    """Finds ATC the way the worker will run it.

    Order: ``ATC_PATH`` (the binary), then ``ASCEND_TOOLKIT_HOME`` and
    ``ASCEND_HOME_PATH`` (a toolkit home, or its parent holding ``latest/``),
    then ``atc`` on ``PATH``. An explicit setting that points at nothing is
    reported as such rather than silently skipped.

    Args:
        env: The environment to look in; ``os.environ`` when None.

    Returns:
        A :class:`CannStatus`; when ATC is missing its ``reason`` says what to set.
    """
    env = os.environ if env is None else env
    explicit = env.get("ATC_PATH", "").strip()
    if explicit:
        atc = Path(explicit)
        if not atc.is_file():
            return CannStatus(
                False, None, None, None, f"ATC_PATH={explicit} does not exist; {_MISSING_HINT}."
            )
        if not os.access(atc, os.X_OK):
            return CannStatus(
                False,
                None,
                None,
                None,
                f"ATC_PATH={explicit} is not executable; make it executable (chmod +x) "
                f"or {_MISSING_HINT}.",
            )
        home_var = env.get("ASCEND_TOOLKIT_HOME", "").strip()
        home = Path(home_var) if home_var and Path(home_var).is_dir() else _toolkit_home_of(atc)
        return _found(atc, home, "ATC_PATH")

    problems = []
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        value = env.get(var, "").strip()
        if not value:
            continue
        hit = _atc_in_toolkit(Path(value))
        if hit is not None:
            return _found(hit[0], hit[1], var)
        places = ", ".join(f"{value}/{rel}" for rel in _ATC_IN_TOOLKIT)
        problems.append(
            f"{var}={value} holds no executable atc (looked at {places} and under latest/)"
        )

    on_path = shutil.which("atc", path=env.get("PATH"))
    if on_path:
        atc = Path(on_path)
        return _found(atc, _toolkit_home_of(atc), "PATH")

    found_nothing = "; ".join(problems) if problems else "ATC (CANN toolkit) is not installed here"
    return CannStatus(False, None, None, None, f"{found_nothing}; {_MISSING_HINT}.")


def require_atc(env: Mapping[str, str] | None = None) -> CannStatus:
    """Like :func:`cann_status`, but raises :class:`AtcUnavailable` when ATC is missing."""
    status = cann_status(env)
    if not status.available:
        raise AtcUnavailable(status.reason)
    return status


def atc_environment(status: CannStatus, base_env: Mapping[str, str]) -> dict[str, str]:
    """The environment ATC runs in: ``base_env`` plus what CANN's ``set_env.sh`` exports.

    Derived from ``status.toolkit_home`` (H): ``PATH`` gains H/bin and the
    ccec compiler; ``LD_LIBRARY_PATH`` gains H/lib64 and its opskernel /
    nnengine plugins and the op-tiling libraries; ``PYTHONPATH`` gains
    H/python/site-packages and the TBE op implementations (ATC compiles
    operators with Python); ``ASCEND_TOOLKIT_HOME``, ``ASCEND_HOME_PATH``,
    ``ASCEND_AICPU_PATH`` (H), ``ASCEND_OPP_PATH`` (H/opp) and
    ``TOOLCHAIN_HOME`` (H/toolkit) are set unless ``base_env`` already sets
    them. Path lists are prepended, as ``set_env.sh`` does, and keep every
    entry ``base_env`` had.

    Args:
        status: Where ATC and its toolkit are (from :func:`cann_status`).
        base_env: The environment to start from (usually ``os.environ``).

    Returns:
        A new dict; ``base_env`` is not modified.
    """
    env = dict(base_env)
    front: dict[str, list[Path]] = {"PATH": [], "LD_LIBRARY_PATH": [], "PYTHONPATH": []}
    if status.toolkit_home:
        home = Path(status.toolkit_home)
        for key, value in (
            ("ASCEND_TOOLKIT_HOME", home),
            ("ASCEND_HOME_PATH", home),
            ("ASCEND_AICPU_PATH", home),
            ("ASCEND_OPP_PATH", home / "opp"),
            ("TOOLCHAIN_HOME", home / "toolkit"),
        ):
            if not env.get(key):
                env[key] = str(value)
        tbe = home / "opp" / "built-in" / "op_impl" / "ai_core" / "tbe"
        front["PATH"] += [home / "bin", home / "compiler" / "ccec_compiler" / "bin"]
        front["LD_LIBRARY_PATH"] += [
            home / "lib64",
            home / "lib64" / "plugin" / "opskernel",
            home / "lib64" / "plugin" / "nnengine",
            tbe / "op_tiling" / "lib" / "linux" / platform.machine(),
        ]
        front["PYTHONPATH"] += [home / "python" / "site-packages", tbe]
    if status.atc_path:
        front["PATH"].insert(0, Path(status.atc_path).parent)
    for key, additions in front.items():
        existing = [p for p in env.get(key, "").split(os.pathsep) if p]
        added = [str(p) for p in additions]
        merged = list(dict.fromkeys([*added, *existing]))
        if merged:
            env[key] = os.pathsep.join(merged)
    return env


# --------------------------------------------------------------------------- options

#: soc_version values seen in CANN's own sources (docs/atc.md#soc-versions); for UI suggestions.
KNOWN_SOC_VERSIONS = (
    "Ascend310",
    "Ascend310P1",
    "Ascend310P3",
    "Ascend310B1",
    "Ascend910A",
    "Ascend910B1",
    "Ascend910B2",
    "Ascend910B3",
    "Ascend910B4",
    "Ascend910_9391",
    "Ascend910_9392",
    "Ascend910_9381",
    "Ascend910_9382",
    "Ascend910_9372",
    "Ascend910_9362",
)
# "Ascend" + the chip Name from npu-smi (310P3, 910B4, 910ProB) or, on A3,
# Chip Name_NPU Name (910_9391).
_SOC_PATTERN = re.compile(r"Ascend[0-9]{3}[A-Za-z0-9]{0,10}(?:_[0-9]{4})?")

INPUT_FORMATS = ("NCHW", "NHWC", "ND", "NCDHW")
PRECISION_MODES = (
    "force_fp16",
    "force_fp32",
    "cube_fp16in_fp32out",
    "allow_fp32_to_fp16",
    "must_keep_origin_dtype",
    "allow_mix_precision",
    "allow_mix_precision_fp16",
    "allow_mix_precision_bf16",
    "allow_fp32_to_bf16",
)
PRECISION_MODES_V2 = (
    "fp16",
    "origin",
    "cube_fp16in_fp32out",
    "mixed_float16",
    "mixed_bfloat16",
    "cube_hif8",
    "mixed_hif8",
)
OP_SELECT_IMPLMODES = (
    "high_precision",
    "high_performance",
    "high_precision_for_all",
    "high_performance_for_all",
)
LOG_LEVELS = ("debug", "info", "warning", "error", "null")
ONNX_FRAMEWORK = 5
#: ATC accepts 2 to 100 batch gears (docs/atc.md#dynamic-batch).
MIN_BATCH_GEARS, MAX_BATCH_GEARS = 2, 100
#: Our own ceiling on one gear's batch size (ATC states none); larger is a typo.
MAX_BATCH_GEAR_VALUE = 2048

# Flags that build_atc_command owns; ``extra`` may not set them a second time.
_MANAGED_FLAGS = frozenset(
    {
        "model",
        "framework",
        "output",
        "soc_version",
        "input_shape",
        "input_format",
        "precision_mode",
        "precision_mode_v2",
        "dynamic_batch_size",
        "out_nodes",
        "op_select_implmode",
        "log",
        "mode",
        "om",
        "json",
        "weight",
    }
)
_FLAG_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_DIM = re.compile(r"-1|[0-9]{1,9}|[0-9]{1,9}~[0-9]{1,9}")
_FORBIDDEN_CHARS = set("\"'`$\\=")


def _unsafe_value(value: str) -> str | None:
    """Why ``value`` cannot be passed to ATC as a flag value, or None if it is sane.

    The command is an argv list, so nothing here is about shell injection as
    such; but a value with spaces, quotes, ``=`` or newlines is never what a
    user meant, would make the copyable command line misleading, and could
    smuggle a second ``--flag=`` into a parser that re-splits its input.
    """
    if not value:
        return "it is empty"
    if len(value) > 4096:
        return "it is longer than 4096 characters"
    if any(not ch.isprintable() for ch in value):
        return "it contains a newline or another control character"
    if any(ch.isspace() for ch in value):
        return "it contains whitespace"
    bad = sorted(_FORBIDDEN_CHARS.intersection(value))
    if bad:
        return "it contains " + " ".join(bad)
    if value.startswith("-") and not value[1:2].isdigit():
        return "it starts with '-' (it would read as another flag)"
    return None


def parse_input_shape(text: str) -> list[tuple[str, list[str]]]:
    """Splits ``"x:1,3,224,224;mask:1,-1"`` into ``[("x", ["1","3","224","224"]), ...]``.

    The name is everything before the *last* ``:`` (tensor names such as
    ``input:0`` contain one). Dims stay strings since ranges (``1~10``) are allowed.

    Raises:
        ValueError: With a plain-words reason when the text is malformed.
    """
    entries = []
    for chunk in text.split(";"):
        name, sep, dims_text = chunk.rpartition(":")
        if not sep or not name:
            raise ValueError(f"'{chunk}' is not 'name:dim,dim,...'")
        dims = dims_text.split(",") if dims_text else []
        for dim in dims:
            if not _DIM.fullmatch(dim):
                raise ValueError(
                    f"dimension '{dim}' of '{name}' is not a size, -1 or a range like 1~8"
                )
        entries.append((name, dims))
    return entries


@dataclass
class AtcOptions:
    """What the user chose for one ATC compile (each flag: docs/atc.md#options).

    Attributes:
        soc_version: The chip the OM will run on, e.g. ``Ascend310P3``; must
            match the serving machine (``npu-smi info``).
        input_shape: ``"name:n,c,h,w;name2:..."``; ``-1`` marks the batch axis
            with ``dynamic_batch_size``.
        input_format: ``NCHW`` (ATC's default for ONNX), ``NHWC``, ``ND`` or ``NCDHW``.
        precision_mode: Legacy precision switch (``force_fp16`` is ATC's default).
        precision_mode_v2: Preferred precision switch; exclusive with ``precision_mode``.
        dynamic_batch_size: Batch gears, e.g. ``[1, 2, 4, 8]``.
        out_nodes: ``"node:0;node2:0"`` or ONNX output names ``"out1;out2"``.
        op_select_implmode: ``high_performance`` (default), ``high_precision``, or
            their ``*_for_all`` variants.
        log: ATC's ``--log`` level.
        framework: Always 5 (ONNX) in this product.
        extra: Further ``--flag=value`` pairs, flag names without dashes.
    """

    soc_version: str
    input_shape: str | None = None
    input_format: str | None = None
    precision_mode: str | None = None
    precision_mode_v2: str | None = None
    dynamic_batch_size: list[int] | None = None
    out_nodes: str | None = None
    op_select_implmode: str | None = None
    log: str = "error"
    framework: int = ONNX_FRAMEWORK
    extra: dict[str, str] = field(default_factory=dict)

    def validate(self) -> list[str]:
        """Every problem with these options, in plain words; empty when ATC can take them."""
        problems = []
        for name in (
            "soc_version",
            "input_shape",
            "input_format",
            "precision_mode",
            "precision_mode_v2",
            "out_nodes",
            "op_select_implmode",
            "log",
        ):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str):
                problems.append(f"{name} must be text, not {type(value).__name__}.")
                continue
            reason = _unsafe_value(value)
            if reason:
                problems.append(f"{name} {value[:40]!r} is not allowed: {reason}.")
        if problems:
            return problems  # the checks below assume sane strings

        if not _SOC_PATTERN.fullmatch(self.soc_version):
            problems.append(
                f"soc_version {self.soc_version!r} is not an Ascend chip name: use 'Ascend' "
                "followed by the Name column of 'npu-smi info' (e.g. Ascend310P3, Ascend910B4)."
            )
        if self.framework != ONNX_FRAMEWORK:
            problems.append(
                f"framework must be {ONNX_FRAMEWORK} (ONNX); the hub only compiles ONNX models."
            )
        problems += self._check_choices()
        problems += self._check_shapes()
        problems += self._check_extra()
        return problems

    def _check_choices(self) -> list[str]:
        problems = []
        for name, value, allowed in (
            ("input_format", self.input_format, INPUT_FORMATS),
            ("precision_mode", self.precision_mode, PRECISION_MODES),
            ("precision_mode_v2", self.precision_mode_v2, PRECISION_MODES_V2),
            ("op_select_implmode", self.op_select_implmode, OP_SELECT_IMPLMODES),
            ("log", self.log, LOG_LEVELS),
        ):
            if value is not None and value not in allowed:
                problems.append(f"{name} {value!r} is not one of {', '.join(allowed)}.")
        if self.precision_mode and self.precision_mode_v2:
            problems.append(
                "precision_mode and precision_mode_v2 are both set; ATC takes only one. "
                "Keep precision_mode_v2."
            )
        if self.out_nodes is not None:
            for node in self.out_nodes.split(";"):
                if not node or node.endswith(":"):
                    problems.append(
                        f"out_nodes {self.out_nodes!r} is not 'node:0;node2:0' or 'out1;out2'."
                    )
                    break
        return problems

    def _check_shapes(self) -> list[str]:
        problems = []
        entries: list[tuple[str, list[str]]] = []
        if self.input_shape is not None:
            try:
                entries = parse_input_shape(self.input_shape)
            except ValueError as exc:
                problems.append(f"input_shape {self.input_shape!r} is malformed: {exc}.")
        gears = self.dynamic_batch_size
        if gears is None:
            return problems
        if not all(isinstance(g, int) and not isinstance(g, bool) for g in gears):
            return [*problems, "dynamic_batch_size must be a list of whole numbers."]
        if not MIN_BATCH_GEARS <= len(gears) <= MAX_BATCH_GEARS:
            problems.append(
                f"dynamic_batch_size has {len(gears)} gear(s); ATC takes {MIN_BATCH_GEARS} to "
                f"{MAX_BATCH_GEARS} (for one batch size use a static input_shape instead)."
            )
        if any(g < 1 for g in gears):
            problems.append("dynamic_batch_size gears must be positive.")
        if any(g > MAX_BATCH_GEAR_VALUE for g in gears):
            problems.append(f"dynamic_batch_size gears must be at most {MAX_BATCH_GEAR_VALUE}.")
        if len(set(gears)) != len(gears):
            problems.append("dynamic_batch_size lists a gear twice.")
        if self.input_shape is None:
            problems.append(
                "dynamic_batch_size needs input_shape with -1 as the batch (first) dimension, "
                "e.g. 'x:-1,3,224,224'."
            )
        elif entries and not any(dims and dims[0] == "-1" for _, dims in entries):
            problems.append(
                "dynamic_batch_size needs -1 as the batch (first) dimension of an input in "
                f"input_shape; {self.input_shape!r} has none."
            )
        elif any("~" in dim for _, dims in entries for dim in dims):
            problems.append("dynamic_batch_size cannot be combined with shape ranges (1~8).")
        return problems

    def _check_extra(self) -> list[str]:
        problems = []
        for key, value in self.extra.items():
            if not isinstance(key, str) or not _FLAG_NAME.fullmatch(key):
                problems.append(
                    f"extra option name {str(key)[:40]!r} is not a flag name "
                    "(lower-case letters, digits and '_', without leading dashes)."
                )
                continue
            if key in _MANAGED_FLAGS:
                problems.append(f"extra option {key!r} is set through its own field, not extra.")
                continue
            reason = _unsafe_value(value) if isinstance(value, str) else "it is not text"
            if reason:
                problems.append(f"extra option {key}={str(value)[:40]!r} is not allowed: {reason}.")
        return problems


def _check_path(path: Path, what: str) -> None:
    text = str(path)
    if not text or any(not ch.isprintable() for ch in text):
        raise InvalidAtcOptions(
            f"The {what} path {text[:60]!r} is empty or has control characters."
        )


def build_atc_command(
    atc_path: str, model: Path, output_stem: Path, options: AtcOptions
) -> list[str]:
    """The ATC argument list for compiling ``model`` into ``<output_stem>.om``.

    Flags use ATC's ``--flag=value`` spelling (docs/atc.md#command-line), in a fixed order
    so the same options give the same command.

    Args:
        atc_path: The atc binary (``CannStatus.atc_path``).
        model: The ONNX file.
        output_stem: The output path *without* ``.om`` (ATC appends it).
        options: The compile options; validated here.

    Returns:
        ``[atc_path, "--model=...", "--framework=5", "--output=...", "--soc_version=...", ...]``.

    Raises:
        InvalidAtcOptions: If ``options.validate()`` finds problems or a path is unusable.
    """
    problems = options.validate()
    if problems:
        raise InvalidAtcOptions("The ATC options cannot be used: " + " ".join(problems))
    _check_path(model, "model")
    _check_path(output_stem, "output")
    if output_stem.suffix == ".om":
        raise InvalidAtcOptions(
            f"The output {output_stem} ends in .om; give the name without it (ATC appends .om)."
        )
    argv = [
        str(atc_path),
        f"--model={model}",
        f"--framework={options.framework}",
        f"--output={output_stem}",
        f"--soc_version={options.soc_version}",
    ]
    if options.input_format:
        argv.append(f"--input_format={options.input_format}")
    if options.input_shape:
        argv.append(f"--input_shape={options.input_shape}")
    if options.dynamic_batch_size:
        argv.append("--dynamic_batch_size=" + ",".join(str(g) for g in options.dynamic_batch_size))
    if options.precision_mode:
        argv.append(f"--precision_mode={options.precision_mode}")
    if options.precision_mode_v2:
        argv.append(f"--precision_mode_v2={options.precision_mode_v2}")
    if options.out_nodes:
        argv.append(f"--out_nodes={options.out_nodes}")
    if options.op_select_implmode:
        argv.append(f"--op_select_implmode={options.op_select_implmode}")
    argv.append(f"--log={options.log}")
    argv += [f"--{key}={value}" for key, value in sorted(options.extra.items())]
    return argv


def format_command(argv: Sequence[str]) -> str:
    """``argv`` as one shell line a user can copy and run (each word quoted as needed)."""
    return shlex.join(str(a) for a in argv)


# --------------------------------------------------------------------------- reading the log

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
    def explanation(self) -> str | None:
        """What the code means and what to do, in plain words (None for phrases)."""
        return explain(self.code) if self.code else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the explanation included."""
        data = asdict(self)
        data["explanation"] = self.explanation
        return data


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


_UNSUPPORTED_OP_ADVICE = (
    "Check the operator against the CANN ONNX operator list for your version; re-export the "
    "model with an opset between 11 and 18, simplify it (onnxslim) so the operator is folded "
    "away, or replace the operator in the model. If it still fails, deploy with the npu_ge "
    "target, which compiles online and may fall back to other engines."
)

#: Known ATC codes -> what they mean and what to do.
EXPLANATIONS: dict[str, str] = {
    "E10001": (
        "A command-line value is invalid (ATC names the parameter and the reason). Fix that "
        "option: a typo in soc_version, an input name in input_shape that the model does not "
        "have, or a shape with the wrong number of dimensions are the usual causes."
    ),
    "E10054": (
        "A required parameter is empty or a value was not quoted as a whole. Fill in the "
        "named option; values such as input_shape must reach ATC as a single argument."
    ),
    "E10007": (
        "--framework is missing. ONNX models need --framework=5; the hub always passes it, so "
        "this points to a hand-edited command."
    ),
    "E19999": (
        "ATC hit an inner error without a more specific code. Read the detail log under "
        "$HOME/ascend/log/debug/plog/ (or rerun with log level 'info' and "
        "ASCEND_SLOG_PRINT_TO_STDOUT=1) and check that the toolkit matches the chip."
    ),
    "E19010": (
        "ATC has no parser for an operator of this model (an operator outside the standard "
        "ONNX domain, or an opset newer than this CANN supports). " + _UNSUPPORTED_OP_ADVICE
    ),
    "EZ3003": (
        "An operator of this model has no kernel on this chip in this CANN version, so ATC "
        "cannot compile it. " + _UNSUPPORTED_OP_ADVICE
    ),
    "E40000": (
        "The operator compiler (TBE) failed to start or compile. The CANN environment is "
        "usually incomplete: check ASCEND_OPP_PATH and PYTHONPATH (source set_env.sh), that "
        "the ops package matching the chip is installed, and the Python packages CANN needs."
    ),
    "W11001": (
        "A warning: an operator did not hit the preferred operator library and uses a slower "
        "implementation. The model still compiled; expect lower performance on that operator."
    ),
}


def explain(code: str) -> str:
    """Plain-words meaning of an ATC code, with a generic answer for unknown ones."""
    known = EXPLANATIONS.get(code)
    if known:
        return known
    if code.startswith("W"):
        return (
            f"ATC warning {code}. The compile can still succeed; look the code up in the CANN "
            "error code reference if the result misbehaves."
        )
    return (
        f"ATC reported error {code}. Read the message and the lines below it (they often name "
        "a cause and a solution), look the code up in the CANN error code reference, and check "
        "the detail log under $HOME/ascend/log/."
    )


# --------------------------------------------------------------------------- running ATC


@dataclass
class AtcResult:
    """How one ATC run ended.

    ``success`` means: exit status 0, not cancelled, not timed out, and the
    ``.om`` file really exists (``om_path``).
    """

    returncode: int
    success: bool
    om_path: Path | None
    messages: list[AtcMessage]
    duration_s: float
    cancelled: bool
    timed_out: bool

    @property
    def errors(self) -> list[AtcMessage]:
        """The coded error lines, in order."""
        return [m for m in self.messages if m.kind == "error"]

    @property
    def warnings(self) -> list[AtcMessage]:
        """The coded warning lines, in order."""
        return [m for m in self.messages if m.kind == "warning"]

    def summary(self) -> str:
        """One paragraph for the job page: what happened and, on failure, what to do."""
        if self.success:
            warned = f" with {len(self.warnings)} warning(s)" if self.warnings else ""
            return f"ATC compiled the model in {self.duration_s:.1f} s{warned}: {self.om_path}."
        if self.cancelled:
            return f"ATC was cancelled after {self.duration_s:.1f} s."
        if self.timed_out:
            return (
                f"ATC did not finish within {self.duration_s:.0f} s and was stopped. Large "
                "models can take long; raise the timeout or simplify the model first."
            )
        errors = self.errors
        if errors:
            first = errors[0]
            return f"ATC failed with {first.code}: {first.text} — {first.explanation}"
        if self.returncode == 0:
            return "ATC exited with status 0 but wrote no .om file; see the log."
        return f"ATC failed with exit status {self.returncode} and no error code; see the log."

    def raise_for_failure(self) -> None:
        """Raises :class:`AtcFailed` (carrying this result) unless the run succeeded."""
        if not self.success:
            raise AtcFailed(self.summary(), self)


_POLL_S = 0.1
#: How long ATC gets after SIGTERM before SIGKILL.
_KILL_GRACE_S = 3.0
#: How long to wait for the pipe to close after ATC exited (a leftover child
#: holding it open must not hang the worker).
_DRAIN_GRACE_S = 2.0


def _pump(stream: IO[bytes], lines: queue.Queue[str | None]) -> None:
    """Reader thread: one decoded line at a time into ``lines``; None at end of output."""
    try:
        for raw in iter(stream.readline, b""):
            lines.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
    finally:
        lines.put(None)


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    # ATC forks operator-compile workers; they are in its group (start_new_session).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _output_stem(argv: Sequence[str], cwd: Path | None) -> Path | None:
    for arg in reversed(argv):
        if arg.startswith("--output="):
            stem = Path(arg.split("=", 1)[1])
            if not stem.is_absolute() and cwd is not None:
                stem = cwd / stem
            return stem
    return None


def _om_candidates(stem: Path) -> list[Path]:
    # ATC writes <stem>.om, on some versions <stem>_<os>_<arch>.om (docs/atc.md#command-line).
    exact = stem.with_name(stem.name + ".om")
    try:
        others = sorted(stem.parent.glob(glob_escape(stem.name) + "_*.om"))
    except OSError:
        others = []
    return [exact, *others]


def glob_escape(text: str) -> str:
    """``text`` with glob metacharacters escaped (``[`` -> ``[[]``)."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def _file_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _snapshot(stem: Path | None) -> dict[Path, tuple[int, int, int] | None]:
    if stem is None:
        return {}
    return {p: _file_key(p) for p in _om_candidates(stem)}


def _find_om(stem: Path | None, before: dict[Path, tuple[int, int, int] | None]) -> Path | None:
    """The .om this run wrote: exists, non-empty, and not the same file as before the run."""
    if stem is None:
        return None
    for path in _om_candidates(stem):
        key = _file_key(path)
        if key is not None and key[2] > 0 and key != before.get(path):
            return path
    return None


def run_atc(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None,
    on_line: Callable[[str], None],
    cancelled: Callable[[], bool] = lambda: False,
    timeout: float = 3600,
) -> AtcResult:
    """Runs ATC and reports its output line by line as it comes.

    ATC runs in its own process group so that cancelling or timing out stops
    the operator-compile workers it forks too (SIGTERM, then SIGKILL after a
    grace period). stdout and stderr are merged so errors appear in order.
    ``on_line`` and ``cancelled`` are called from the calling thread.

    Args:
        argv: From :func:`build_atc_command`.
        env: From :func:`atc_environment`.
        cwd: Working directory (ATC writes fusion_result.json and kernel_meta there).
        on_line: Gets every output line, without its newline.
        cancelled: Polled about ten times a second; True stops ATC.
        timeout: Seconds before ATC is stopped.

    Returns:
        An :class:`AtcResult`; call ``raise_for_failure()`` to turn failure into AtcFailed.

    Raises:
        AtcUnavailable: If the binary cannot be started at all.
    """
    argv = [str(a) for a in argv]
    stem = _output_stem(argv, cwd)
    before = _snapshot(stem)
    started = time.monotonic()
    try:
        proc = spawn.start(
            argv,
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            new_session=True,
        )
    except OSError as exc:
        raise AtcUnavailable(
            f"ATC could not be started ({argv[0]}): {exc}; {_MISSING_HINT}."
        ) from exc
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True)
    reader.start()

    messages: list[AtcMessage] = []
    last: AtcMessage | None = None
    was_cancelled = timed_out = eof = False
    stop_sent_at: float | None = None
    exited_at: float | None = None
    deadline = started + timeout
    next_check = started
    try:
        while True:
            line: str | None = None
            idle = False
            if eof:
                time.sleep(_POLL_S)  # output closed; wait for the exit itself
                idle = True
            else:
                try:
                    line = lines.get(timeout=_POLL_S)
                except queue.Empty:
                    idle = True
                else:
                    eof = line is None
            if line is not None:
                on_line(line)
                message = parse_atc_line(line)
                if message is not None:
                    messages.append(message)
                    last = message if message.code else None
                elif last is not None and line[:1] in (" ", "\t") and line.strip():
                    last.details.append(line.strip())
                else:
                    last = None
            now = time.monotonic()
            # While output streams in, look at the clock every _POLL_S only.
            if not (idle or eof) and now < next_check:
                continue
            next_check = now + _POLL_S
            if stop_sent_at is None:
                if cancelled():
                    was_cancelled = True
                elif now >= deadline:
                    timed_out = True
                if was_cancelled or timed_out:
                    _signal_group(proc, signal.SIGTERM)
                    stop_sent_at = now
            elif now - stop_sent_at > _KILL_GRACE_S and proc.poll() is None:
                _signal_group(proc, signal.SIGKILL)
            if proc.poll() is not None:
                if eof:
                    break
                exited_at = exited_at or now
                if now - exited_at > _DRAIN_GRACE_S:
                    _signal_group(proc, signal.SIGKILL)  # a leftover child holds the pipe
                    break
    finally:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGKILL)
        returncode = proc.wait()
        reader.join(timeout=_DRAIN_GRACE_S)
        proc.stdout.close()

    duration = time.monotonic() - started
    om_path = None
    if returncode == 0 and not (was_cancelled or timed_out):
        om_path = _find_om(stem, before)
        if om_path is None:
            messages.append(
                AtcMessage(
                    "failure",
                    None,
                    f"ATC exited with status 0 but no new .om file appeared for {stem}",
                    "",
                )
            )
    return AtcResult(
        returncode=returncode,
        success=om_path is not None,
        om_path=om_path,
        messages=messages,
        duration_s=duration,
        cancelled=was_cancelled,
        timed_out=timed_out,
    )

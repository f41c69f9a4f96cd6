"""The user's ATC compile options: what ATC accepts, their checks, and the command line.

:class:`AtcOptions` holds one compile's choices and lists every problem with them in plain
words; :func:`build_atc_command` turns valid options into an argument list (never a shell
string) in a fixed order, and :func:`format_command` shows it as a line a user can copy. The
allowed values follow ATC's documented flags (docs/atc.md#options).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from model_store.errors import ModelStoreError


class InvalidAtcOptions(ModelStoreError):
    """Compile options that ATC would refuse, or that are unsafe to pass on."""

    code = "invalid_atc_options"


#: soc_version values CANN ships a platform file for (``<toolkit>/<arch>-linux/data/
#: platform_config/<name>.ini``) and its runtime reports (docs/atc.md#soc-versions); for the
#: suggestions and the self-test. Any other name of the same form is accepted: ATC, which looks
#: for that name's platform file, is the judge.
KNOWN_SOC_VERSIONS = (
    "Ascend310",
    "Ascend310P1",
    "Ascend310P3",
    "Ascend310P5",
    "Ascend310P7",
    "Ascend310B1",
    "Ascend310B2",
    "Ascend310B3",
    "Ascend310B4",
    "Ascend910A",
    "Ascend910ProA",
    "Ascend910ProB",
    "Ascend910PremiumA",
    "Ascend910B",
    "Ascend910B1",
    "Ascend910B2",
    "Ascend910B2C",
    "Ascend910B3",
    "Ascend910B4",
    "Ascend910B4-1",
    "Ascend910_9391",
    "Ascend910_9392",
    "Ascend910_9381",
    "Ascend910_9382",
    "Ascend910_9372",
    "Ascend910_9362",
    "Ascend910_9363",
)
#: "Ascend" + three digits + the chip's letters and digits (310P3, 910B2C, 910ProB), then an
#: optional "-<n>" variant (910B4-1) and an optional "_<4 or 5>" product suffix (910_9391 on A3,
#: the 950 family's _957b): what the runtime's rtGetSocVersion and npu-smi name.
SOC_PATTERN = r"Ascend[0-9]{3}[A-Za-z0-9]{0,12}(?:-[0-9]{1,2})?(?:_[0-9A-Za-z]{4,5})?"
_SOC_PATTERN = re.compile(SOC_PATTERN)

#: --input_format values ATC takes for an ONNX model; anything else, NHWC included, is E10001
#: (docs/atc.md#options).
INPUT_FORMATS = ("NCHW", "ND", "NCDHW")
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
#: ATC and GE accept 2 to 100 gears: fewer is E10035 (docs/atc.md#dynamic-batch).
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


def parse_gears(text: str) -> list[list[int]]:
    """``"1,224;2,448"`` (``--dynamic_dims``, ``graph.ge.dynamicDims``) -> ``[[1, 224], [2, 448]]``.

    Gears are separated by ``;`` (a trailing one is dropped, as ATC does), the values of one
    gear by ``,``.

    Raises:
        ValueError: With a plain-words reason when a value is not a whole number.
    """
    gears = []
    for chunk in text.rstrip(";").split(";"):
        values = chunk.split(",")
        if not all(v.isdigit() for v in values):
            raise ValueError(f"gear '{chunk}' is not whole numbers separated by ','")
        gears.append([int(v) for v in values])
    return gears


def gear_problems(gears: Sequence[Sequence[int]], what: str) -> list[str]:
    """GE's checks on a list of gears, in plain words with the code GE reports.

    The same rules hold for ``--dynamic_batch_size`` and ``--dynamic_dims`` in ATC and for
    gears given to an online graph (``graph.ge.dynamicDims`` of the GE backend): at least
    2 gears (``E10035``), at most 100 as documented, every gear with as many values
    (``E10037``), no gear twice (``E10039``) (``CheckDynamicParams``;
    docs/atc.md#dynamic-batch).

    Args:
        gears: One list of values per gear (a batch gear is a one-value list).
        what: How to name the option in the messages, e.g. ``"dynamic_dims"``.
    """
    problems = []
    if len(gears) < MIN_BATCH_GEARS:
        problems.append(
            f"{what} has {len(gears)} gear(s); ATC and GE need at least {MIN_BATCH_GEARS} and "
            "refuse fewer with E10035 (for one size, fix it in the input shape instead)."
        )
    elif len(gears) > MAX_BATCH_GEARS:
        problems.append(f"{what} has {len(gears)} gear(s); ATC takes at most {MAX_BATCH_GEARS}.")
    if len({len(g) for g in gears}) > 1:
        problems.append(f"{what}: every gear needs the same number of values (E10037).")
    if len({tuple(g) for g in gears}) != len(gears):
        repeated = sorted({tuple(g) for g in gears if list(gears).count(g) > 1})
        shown = "; ".join(",".join(map(str, g)) for g in repeated)
        problems.append(f"{what} lists a gear twice ({shown}); GE refuses that with E10039.")
    return problems


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
        input_format: ``NCHW`` (ATC's default for ONNX), ``ND`` or ``NCDHW``; ATC refuses
            ``NHWC`` for ONNX.
        precision_mode: Legacy precision switch (``force_fp16`` is ATC's default).
        precision_mode_v2: Preferred precision switch; exclusive with ``precision_mode``.
        dynamic_batch_size: Batch gears, e.g. ``[1, 2, 4, 8]``.
        out_nodes: ``"node:0;node2:0"`` or ONNX output names ``"out1;out2"``.
        op_select_implmode: ``high_performance`` (default), ``high_precision``, or
            their ``*_for_all`` variants.
        log: ATC's ``--log`` level.
        framework: Always 5 (ONNX) in this product.
        extra: Further ``--flag=value`` pairs, flag names without dashes. A
            ``dynamic_dims`` here (``"1,224;2,448"``) is checked like ATC checks it.
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
        if self.input_format is not None and self.input_format not in INPUT_FORMATS:
            problems.append(
                f"input_format {self.input_format!r} is not accepted for an ONNX model: ATC "
                f"takes {', '.join(INPUT_FORMATS)} and refuses anything else with E10001. "
                "Use ND for an input that is not NCHW (an NHWC image input included)."
            )
        for name, value, allowed in (
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
        dims_text = self.extra.get("dynamic_dims")
        if isinstance(dims_text, str) and _unsafe_value(dims_text) is None:
            problems += self._check_dynamic_dims(dims_text, entries)
        gears = self.dynamic_batch_size
        if gears is None:
            return problems
        if not all(isinstance(g, int) and not isinstance(g, bool) for g in gears):
            return [*problems, "dynamic_batch_size must be a list of whole numbers."]
        problems += gear_problems([[g] for g in gears], "dynamic_batch_size")
        if any(g < 1 for g in gears):
            problems.append("dynamic_batch_size gears must be positive.")
        if any(g > MAX_BATCH_GEAR_VALUE for g in gears):
            problems.append(f"dynamic_batch_size gears must be at most {MAX_BATCH_GEAR_VALUE}.")
        if dims_text is not None:
            problems.append(
                "dynamic_batch_size and dynamic_dims exclude each other (ATC: E10009); keep one."
            )
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

    def _check_dynamic_dims(self, text: str, entries: list[tuple[str, list[str]]]) -> list[str]:
        """``--dynamic_dims``: ATC's checks (docs/atc.md#dynamic-batch)."""
        try:
            gears = parse_gears(text)
        except ValueError as exc:
            return [f"dynamic_dims {text!r} is malformed: {exc}."]
        problems = gear_problems(gears, "dynamic_dims")
        if any(v < 1 for gear in gears for v in gear):
            problems.append("dynamic_dims values must be positive.")
        slots = sum(dims.count("-1") for _, dims in entries)
        if self.input_shape is None or not slots:
            problems.append(
                "dynamic_dims needs input_shape with -1 for each geared dim, e.g. "
                "'x:1,-1' with dynamic_dims '4;8;16' (ATC: E10001)."
            )
        elif any(len(gear) != slots for gear in gears):
            problems.append(
                f"dynamic_dims: each gear needs {slots} value(s), one per -1 in input_shape "
                "(ATC: E10003)."
            )
        if any("~" in dim for _, dims in entries for dim in dims):
            problems.append("dynamic_dims cannot be combined with shape ranges (1~8).")
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


def _allowed_path_char(ch: str) -> bool:
    return (ch.isascii() and (ch.isalnum() or ch in "./_-")) or "\u4e00" <= ch <= "\u9fa5"


def atc_path_problem(path: Path | str, what: str) -> str | None:
    """Why ATC would refuse ``path`` for ``--model`` or ``--output``, or None.

    ATC checks the *real* path of ``--model`` and the given ``--output`` and takes only ASCII
    letters, digits, ``.``, ``/``, ``_``, ``-`` and the CJK characters U+4E00 to U+9FA5, else
    E10001 (hicann/ge ``base/common/util.cc``, ``IsAllowedAsciiPathChar``; docs/atc.md#options).
    The hub's own names comply; the store's root, a symlinked mount or ``TMPDIR`` may not.
    """
    real = str(Path(path).resolve()) if what == "--model" else str(path)
    bad = sorted({ch for ch in real if not _allowed_path_char(ch)})
    if not bad:
        return None
    shown = ", ".join(repr(ch) for ch in bad)
    return (
        f"ATC refuses the {what} path {real} (E10001): it holds {shown}; ATC takes only "
        "letters, digits, '.', '/', '_' and '-' in paths. Move MODEL_STORE_ROOT (or TMPDIR) "
        "to a path without them."
    )

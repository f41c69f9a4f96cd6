"""ATC, the Ascend Tensor Compiler: find it, build its command line, run it, read its log.

ATC turns an ONNX model into an ``.om`` file for one Ascend chip
(``atc --model=x.onnx --framework=5 --output=out/x --soc_version=Ascend310P3``,
docs/atc.md#command-line). The worker runs it for the ``acl`` target and, where CANN
is installed, as a pre-flight compile for ``npu_ge``. This package is the whole
contract with the tool, one submodule per concern (each imports only those above it):

* :mod:`~model_store.compile.atc.environment`: :func:`cann_status` says whether ATC is
  there (either install layout) and, if not, what to set; :func:`atc_environment` is the
  environment CANN's ``set_env.sh`` would give, with ATC's own Python (``ATC_PYTHON``)
  first on ``PATH`` and never the hub's virtualenv;
* :mod:`~model_store.compile.atc.python`: :data:`PROBE_SCRIPT` / :func:`assess_probe`
  check that interpreter against CANN's documented version and packages;
* :mod:`~model_store.compile.atc.options`: :class:`AtcOptions` / :func:`build_atc_command`
  turn the user's choices into an argument list (never a shell string) after checking
  every value;
* :mod:`~model_store.compile.atc.messages`: :func:`parse_atc_line` / :data:`EXPLANATIONS`
  turn ATC's error codes into plain words with what to do;
* :mod:`~model_store.compile.atc.running`: :func:`run_atc` runs it in its own process
  group, streams its output line by line, honours cancellation and a timeout, and checks
  the ``.om`` was written.

The public names of all five are re-exported here, so ``from model_store.compile.atc import
run_atc`` keeps working; code that patches a name must patch it in the submodule that looks
it up.

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

from model_store.compile.atc.environment import (
    ATC_PYTHON_VAR,
    DEFAULT_CANN_HOME,
    DEFAULT_TOOLKIT_HOME,
    AtcUnavailable,
    CannStatus,
    atc_environment,
    atc_python_setting,
    cann_layout,
    cann_status,
    default_toolkit_homes,
    hub_python_dirs,
    require_atc,
)
from model_store.compile.atc.messages import (
    EXPLANATIONS,
    FAILURE_PHRASE,
    START_PHRASE,
    SUCCESS_PHRASE,
    AtcMessage,
    MessageKind,
    explain,
    parse_atc_line,
)
from model_store.compile.atc.options import (
    INPUT_FORMATS,
    KNOWN_SOC_VERSIONS,
    LOG_LEVELS,
    MAX_BATCH_GEAR_VALUE,
    MAX_BATCH_GEARS,
    MIN_BATCH_GEARS,
    ONNX_FRAMEWORK,
    OP_SELECT_IMPLMODES,
    PRECISION_MODES,
    PRECISION_MODES_V2,
    SOC_PATTERN,
    AtcOptions,
    InvalidAtcOptions,
    build_atc_command,
    format_command,
    gear_problems,
    parse_gears,
    parse_input_shape,
)
from model_store.compile.atc.python import (
    ATC_PYTHON_PACKAGES,
    PROBE_SCRIPT,
    PythonAssessment,
    assess_probe,
    parse_probe,
)
from model_store.compile.atc.running import AtcFailed, AtcResult, glob_escape, run_atc

__all__ = [
    "ATC_PYTHON_PACKAGES",
    "ATC_PYTHON_VAR",
    "DEFAULT_CANN_HOME",
    "DEFAULT_TOOLKIT_HOME",
    "EXPLANATIONS",
    "FAILURE_PHRASE",
    "INPUT_FORMATS",
    "KNOWN_SOC_VERSIONS",
    "LOG_LEVELS",
    "MAX_BATCH_GEARS",
    "MAX_BATCH_GEAR_VALUE",
    "MIN_BATCH_GEARS",
    "ONNX_FRAMEWORK",
    "OP_SELECT_IMPLMODES",
    "PRECISION_MODES",
    "PRECISION_MODES_V2",
    "PROBE_SCRIPT",
    "SOC_PATTERN",
    "START_PHRASE",
    "SUCCESS_PHRASE",
    "AtcFailed",
    "AtcMessage",
    "AtcOptions",
    "AtcResult",
    "AtcUnavailable",
    "CannStatus",
    "InvalidAtcOptions",
    "MessageKind",
    "PythonAssessment",
    "assess_probe",
    "atc_environment",
    "atc_python_setting",
    "build_atc_command",
    "cann_layout",
    "cann_status",
    "default_toolkit_homes",
    "explain",
    "format_command",
    "gear_problems",
    "glob_escape",
    "hub_python_dirs",
    "parse_atc_line",
    "parse_gears",
    "parse_input_shape",
    "parse_probe",
    "require_atc",
    "run_atc",
]

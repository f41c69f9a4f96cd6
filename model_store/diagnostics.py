"""The Ascend/Triton troubleshooting checklist, run automatically (Django-free).

Each check is a small function of an explicit :class:`DiagnosticsContext` and
returns a :class:`Check`: a state (ok / warning / failing / not_applicable), what
it found in plain words with the concrete values, and what to do about it. All
outside contact goes through the context (environment, ``which``, ``run`` for
subprocesses, the Triton calls, the devices report, ``/dev``), so tests pass plain
functions and temporary directories instead of a real host.

What the checks look for is written up, with its upstream sources, in docs/: the CANN
environment that ``set_env.sh`` gives (docs/cann.md#install-layouts), ATC (docs/atc.md),
the ``npu_ge`` backend library and what it links (docs/ge-backend.md#identity-and-build),
the device nodes and mounts a container needs (docs/ge-backend.md#runtime-environment),
npu-smi's table (docs/npu-smi.md#the-info-table), the GE backend's log phrases
(docs/ge-backend.md#log-phrases) and its reload caveats
(docs/ge-backend.md#statistics-reload-and-unload). None of it has been run on Ascend
hardware by this project (docs/cann.md#what-has-run-on-ascend-hardware).

Example:
    >>> ctx = DiagnosticsContext(env={}, triton_url="127.0.0.1:8000",
    ...                          is_live=lambda: False, is_ready=lambda: False,
    ...                          repository_index=lambda: [])
    >>> checks = run_checks(ctx)
    >>> summary_line(checks)  # doctest: +SKIP
    '9 checks: 1 failing, 8 not applicable'
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from model_store import spawn
from model_store.compile.atc import atc_environment, cann_status
from model_store.devices import read_devices
from model_store.runtime.access import API_KEY_HEADER, RESTRICTED_APIS, RESTRICTED_OPTIONS
from model_store.runtime.errors import TritonAccessDenied

__all__ = [
    "CHECKS",
    "GE_LOG_PHRASES",
    "STATES",
    "Check",
    "DiagnosticsContext",
    "classify_ge_message",
    "read_log_tail",
    "run_bounded",
    "run_checks",
    "summarize",
    "summary_line",
]

CheckState = Literal["ok", "warning", "failing", "not_applicable"]
TritonProtocol = Literal["http", "grpc"]
#: Every state, from best to worst; ``not_applicable`` is listed last, it is neither.
STATES: tuple[CheckState, ...] = ("ok", "warning", "failing", "not_applicable")
_SEVERITY = {"ok": 0, "not_applicable": 0, "warning": 1, "failing": 2}

#: Seconds any one subprocess (npu-smi, atc, ldd) may take.
COMMAND_TIMEOUT = 5.0
#: How much of the end of Triton's log is read (bounded: the log grows for months).
LOG_TAIL_BYTES = 2 << 20
#: Device memory use (HBM, or memory on chips without HBM) from which the chip is "near full".
MEMORY_WARN_PCT = 90.0

_CANN_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH")
#: The line EmbeddedTriton writes before each run: ``# 2026-01-02 03:04:05 $ tritonserver ...``.
_START_MARK = re.compile(r"^# \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \$ ")
_LDD_MISSING = re.compile(r"^\s*(\S+)\s*=>\s*not found", re.MULTILINE)


@dataclass
class Check:
    """The result of one check.

    Attributes:
        id: Stable machine name, e.g. ``cann_env``.
        title: Short human title.
        state: ``ok``, ``warning``, ``failing`` or ``not_applicable``.
        found: What the check found, in plain words with concrete values.
        advice: What to do; ``""`` when there is nothing to do.
        details: Supporting lines (ldd output, log lines, one line per chip...).
    """

    id: str
    title: str
    state: CheckState
    found: str
    advice: str = ""
    details: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The check as JSON-ready data."""
        return asdict(self)


def run_bounded(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """:func:`subprocess.run` capturing text output, with a timeout, no check, never a shell."""
    kwargs.setdefault("timeout", COMMAND_TIMEOUT)
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("check", False)
    return spawn.run(list(argv), **kwargs)


@dataclass
class DiagnosticsContext:
    """Everything the checks read from the outside world.

    Attributes:
        env: The environment to judge (the web process's own, usually).
        backends_dir: Triton's ``--backend-directory``; ``None`` when not known here.
        triton_url: Triton's HTTP address, for the messages.
        is_live / is_ready: Triton liveness and readiness; ``None`` when no Triton is configured.
        repository_index: Triton's repository index rows (``name``, ``version``,
            ``state``, ``reason``), asked with the hub's key; may raise when Triton does
            not answer, ``TritonAccessDenied`` when it refuses the key.
        repository_index_without_key: The same question asked over ``"http"`` or
            ``"grpc"`` without any key, as anyone on the network could.
        grpc_url: Triton's gRPC address, for the messages ("" when none is configured).
        api_key_set: Whether the hub has a TRITON_API_KEY (its value is never needed here).
        triton_log_path: Triton's log file, if this host has one.
        devices: A :func:`model_store.devices.read_devices` report, or a callable
            returning one; ``None`` runs ``read_devices`` with ``which`` and ``run``.
        which: Finds a program on PATH (:func:`shutil.which`).
        run: Runs a program (signature of :func:`subprocess.run`).
        dev_dir: Where device nodes live.
        ascend_root: Where CANN and the driver are installed by default.
        timeout: Seconds any one subprocess may take.
    """

    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    backends_dir: Path | None = None
    triton_url: str = ""
    is_live: Callable[[], bool] | None = None
    is_ready: Callable[[], bool] | None = None
    repository_index: Callable[[], list[dict[str, str]]] | None = None
    repository_index_without_key: Callable[[TritonProtocol], list[dict[str, str]]] | None = None
    grpc_url: str = ""
    api_key_set: bool = False
    triton_log_path: Path | None = None
    devices: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None
    which: Callable[[str], str | None] = shutil.which
    run: Callable[..., Any] = run_bounded
    dev_dir: Path = Path("/dev")
    ascend_root: Path = Path("/usr/local/Ascend")
    timeout: float = COMMAND_TIMEOUT
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def _once(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per context (several checks share Triton and npu-smi answers).

        An exception is remembered too and raised again for every caller.
        """
        if key not in self._memo:
            try:
                self._memo[key] = (True, compute())
            except Exception as exc:
                self._memo[key] = (False, exc)
        ok, value = self._memo[key]
        if not ok:
            raise value
        return value

    def device_report(self) -> Mapping[str, Any]:
        """The npu-smi report (``available``, ``npus``, ``reason``...)."""

        def compute() -> Mapping[str, Any]:
            if self.devices is None:
                return read_devices(runner=self.run, which=self.which, timeout=self.timeout)
            if callable(self.devices):
                return self.devices()
            return self.devices

        report: Mapping[str, Any] = self._once("devices", compute)
        return report

    def triton_live(self) -> bool:
        return self.is_live is not None and bool(self._once("live", self.is_live))

    def triton_ready(self) -> bool:
        return self.is_ready is not None and bool(self._once("ready", self.is_ready))

    def index(self) -> list[dict[str, str]]:
        """The repository index; raises when Triton is not configured or does not answer."""
        if self.repository_index is None:
            raise LookupError("no Triton is configured")
        if not self.triton_live():
            raise LookupError(f"Triton at {self.triton_url} is not reachable")
        rows: list[dict[str, str]] = self._once("index", self.repository_index)
        return rows

    def log_lines(self) -> list[str]:
        """Lines of the end of Triton's log since its last start (``[]`` when there is none)."""
        if self.triton_log_path is None:
            return []
        path = self.triton_log_path
        lines: list[str] = self._once("log", lambda: read_log_tail(path))
        return lines


# --------------------------------------------------------------------------- GE log phrases

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

_PLOG = (
    "restart Triton with plog on its console (`ASCEND_SLOG_PRINT_TO_STDOUT=1 "
    "ASCEND_GLOBAL_LOG_LEVEL=1` in its environment), repeat the load or request and look for "
    '"ERROR" lines in its output (plog files are under $HOME/ascend/log)'
)

#: What to do for each kind of GE failure (grouped as in docs/ge-backend.md#log-phrases).
GE_ADVICE: dict[str, str] = {
    "parse": (
        "The GE backend could not read the model. This is usually the ONNX export itself or a "
        "mismatch with config.pbtxt: input/output names and their order must match the ONNX, "
        "every -1 output dim needs a name made of input dim names, and the model directory must "
        "hold exactly one .onnx. Re-export (the backend's docs suggest opset 14) and publish a "
        "new version."
    ),
    "device": (
        "The GE backend could not open an NPU. See the device nodes and npu-smi checks; make "
        "sure device_ids in config.pbtxt names NPUs that exist, and that Triton's container has "
        "/dev/davinciN, /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc and the driver "
        "mounts."
    ),
    "compile": (
        f"GE could not initialise, compile or load the graph. To see why, {_PLOG}. An ATC "
        "compile of the same ONNX (the npu_ge build's pre-flight step) usually names an "
        "unsupported operator in plain words."
    ),
    "execute": (
        "The model loaded but a request failed on the NPU. Check that request shapes fit the "
        "config (static_model and graph.ge.dynamicDims gears must cover every batch sent); "
        '"malloc dev buffer failed" means NPU memory ran out (see npu-smi). To see the cause, '
        f"{_PLOG}."
    ),
    "other": (
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


def _ge_log_hits(ctx: DiagnosticsContext, limit: int = 20) -> list[tuple[str, str]]:
    """``(kind, line)`` for the last ``limit`` log lines holding a GE phrase."""
    hits = [(kind, line.strip()) for line in ctx.log_lines() if (kind := classify_ge_message(line))]
    return hits[-limit:]


# --------------------------------------------------------------------------- helpers


def _make(cid: str, state: CheckState, found: str, advice: str = "", details: Any = ()) -> Check:
    return Check(cid, TITLES[cid], state, found, advice if state != "ok" else "", list(details))


def _worst(states: Sequence[CheckState]) -> CheckState:
    return max(states, key=lambda s: _SEVERITY[s], default="ok")


def _set_env_script(ctx: DiagnosticsContext, home: str | None) -> str:
    """The ``set_env.sh`` to source: next to the toolkit in use, else the default install's."""
    candidates = []
    if home:
        path = Path(home)
        candidates += [path / "set_env.sh", path.parent / "set_env.sh"]
    default = ctx.ascend_root / "ascend-toolkit" / "set_env.sh"
    candidates.append(default)
    return str(next((c for c in candidates if c.is_file()), default))


def _cann_installed_dir(ctx: DiagnosticsContext) -> Path | None:
    toolkit = ctx.ascend_root / "ascend-toolkit"
    return toolkit if toolkit.is_dir() else None


def _has_cann(ctx: DiagnosticsContext) -> bool:
    """Any sign of a CANN toolkit: its variables, ATC_PATH, the default install, atc on PATH."""
    return bool(
        any(ctx.env.get(v, "").strip() for v in (*_CANN_VARS, "ATC_PATH"))
        or _cann_installed_dir(ctx)
        or ctx.which("atc")
    )


def _npus_present(ctx: DiagnosticsContext) -> bool:
    """True when npu-smi lists chips or /dev holds davinci nodes."""
    try:
        report = ctx.device_report()
    except Exception:
        report = {}
    if report.get("available") and report.get("npus"):
        return True
    return bool(_davinci_nodes(ctx))


def _davinci_nodes(ctx: DiagnosticsContext) -> list[Path]:
    try:
        return sorted(
            (p for p in ctx.dev_dir.glob("davinci*") if p.name[len("davinci") :].isdigit()),
            key=lambda p: int(p.name[len("davinci") :]),
        )
    except OSError:
        return []


def _run(ctx: DiagnosticsContext, argv: list[str], **kwargs: Any) -> tuple[int | None, str]:
    """Run ``argv``; ``(exit code, stdout+stderr)``, or ``(None, why it did not run)``."""
    try:
        done = ctx.run(argv, capture_output=True, text=True, timeout=ctx.timeout, **kwargs)
    except subprocess.TimeoutExpired:
        return None, f"{Path(argv[0]).name} did not answer within {ctx.timeout:g} s"
    except OSError as exc:
        return None, f"{Path(argv[0]).name} could not be started: {exc}"
    out = (getattr(done, "stdout", "") or "") + (getattr(done, "stderr", "") or "")
    if isinstance(out, bytes):
        out = out.decode("utf-8", "replace")
    return getattr(done, "returncode", 1), out


# --------------------------------------------------------------------------- the checks


def check_cann_env(ctx: DiagnosticsContext) -> Check:
    """CANN's variables set, pointing at directories that exist, and lib64 on LD_LIBRARY_PATH."""
    values = {v: ctx.env.get(v, "").strip() for v in _CANN_VARS}
    home = values["ASCEND_TOOLKIT_HOME"] or values["ASCEND_HOME_PATH"] or None
    script = _set_env_script(ctx, home)
    source = (
        f"Run `source {script}` in the environment that starts the worker and Triton "
        "(shell, service unit or container entrypoint), then restart them."
    )
    if not any(values.values()):
        installed = _cann_installed_dir(ctx)
        if installed is None and not _has_cann(ctx):
            return _make(
                "cann_env",
                "not_applicable",
                "No CANN toolkit on this host; Ascend targets cannot compile or serve here. "
                "CPU (onnxruntime) models are unaffected.",
            )
        where = f"at {installed}" if installed else "(ATC_PATH or atc on PATH)"
        return _make(
            "cann_env",
            "failing",
            f"A CANN toolkit is installed {where}, but its environment is not set: "
            f"{', '.join(_CANN_VARS)} are all empty.",
            source,
        )

    details, problems, missing = [], [], []
    for var, value in values.items():
        if not value:
            missing.append(var)
            details.append(f"{var} is not set")
        elif not Path(value).exists():
            problems.append(f"{var}={value} does not exist")
            details.append(f"{var}={value} (does not exist)")
        else:
            details.append(f"{var}={value}")

    ld_entries = [
        os.path.normpath(p) for p in ctx.env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p
    ]
    wanted = [Path(home) / "lib64"] if home else []
    driver = ctx.ascend_root / "driver" / "lib64" / "driver"
    if driver.is_dir():
        wanted.append(driver)
    absent_libs = [str(d) for d in wanted if os.path.normpath(d) not in ld_entries]
    details.append(f"LD_LIBRARY_PATH={ctx.env.get('LD_LIBRARY_PATH', '')}")

    if problems:
        return _make(
            "cann_env",
            "failing",
            "CANN's environment points at paths that do not exist: " + "; ".join(problems) + ".",
            f"Fix or unset these variables. {source}",
            details,
        )
    if missing or absent_libs:
        parts = []
        if missing:
            parts.append(f"{', '.join(missing)} not set")
        if absent_libs:
            parts.append(f"LD_LIBRARY_PATH lacks {', '.join(absent_libs)}")
        return _make(
            "cann_env",
            "warning",
            f"CANN's environment is only partly set: {'; '.join(parts)}.",
            source,
            details,
        )
    return _make(
        "cann_env",
        "ok",
        f"CANN's environment is set (toolkit {home}) and its lib64 is on LD_LIBRARY_PATH.",
        details=details,
    )


def check_atc(ctx: DiagnosticsContext) -> Check:
    """ATC found (the way the worker finds it) and able to start."""
    status = cann_status(ctx.env)
    atc = status.atc_path or ctx.which("atc")
    if not atc:
        if not _has_cann(ctx):
            return _make(
                "atc",
                "not_applicable",
                "ATC is not installed here (no CANN toolkit); the acl target and the npu_ge "
                "pre-flight compile need it. CPU (onnxruntime) models are unaffected.",
            )
        return _make(
            "atc",
            "failing",
            f"A CANN toolkit is present but ATC was not found: {status.reason}",
            "Install the CANN toolkit's compiler component, or point ATC_PATH at the atc binary "
            "(ASCEND_TOOLKIT_HOME at the toolkit), then restart the worker.",
        )
    version = f"CANN {status.version}" if status.version else "CANN version unknown"
    code, output = _run(ctx, [atc, "--help"], env=atc_environment(status, ctx.env))
    lines = [line for line in output.splitlines() if line.strip()][:20]
    if code is None:
        return _make(
            "atc",
            "warning",
            f"ATC is at {atc} ({version}) but {output}.",
            "Run `atc --help` by hand in the worker's environment to see what it waits for.",
            lines,
        )
    if code != 0 or "error while loading shared libraries" in output:
        return _make(
            "atc",
            "failing",
            f"ATC is at {atc} ({version}) but `atc --help` failed with exit code {code}.",
            "Usually a library is missing from LD_LIBRARY_PATH: source CANN's set_env.sh in the "
            "worker's environment. The output below names what failed.",
            lines,
        )
    return _make("atc", "ok", f"ATC is at {atc} ({version}) and starts.", details=lines)


#: Who usually supplies a library the npu_ge backend links [inferred from the build's link
#: list and the backend image's Dockerfile, not from a real host; see
#: docs/ge-backend.md#identity-and-build and docs/ge-backend.md#runtime-environment].
_LIB_OWNERS: list[tuple[tuple[str, ...], str]] = [
    (
        ("libonnxruntime",),
        "onnxruntime's lib directory (/opt/onnxruntime/lib in the backend's image) must be on "
        "Triton's LD_LIBRARY_PATH",
    ),
    (
        ("libascend_hal", "libdrv", "libdcmi", "libtsd"),
        "the NPU driver: mount /usr/local/Ascend/driver/lib64/ (and /usr/local/dcmi) into "
        "Triton's container and add /usr/local/Ascend/driver/lib64/driver to its LD_LIBRARY_PATH",
    ),
    (
        ("libtritonserver",),
        "Triton's own lib directory ($TRITON_HOME_PATH/lib) must be on its LD_LIBRARY_PATH",
    ),
    (
        (
            "libascendcl",
            "libgraph",
            "libge_",
            "libfmk_",
            "libregister",
            "libacl",
            "liberror_manager",
            "libascend",
        ),
        "the CANN toolkit: source /usr/local/Ascend/ascend-toolkit/set_env.sh in Triton's "
        "environment (it puts the toolkit's lib64 on LD_LIBRARY_PATH)",
    ),
]


def _lib_owner(name: str) -> str:
    for prefixes, owner in _LIB_OWNERS:
        if name.startswith(prefixes):
            return owner
    return "find the package that ships it and put its directory on Triton's LD_LIBRARY_PATH"


def check_npu_ge_backend(ctx: DiagnosticsContext) -> Check:
    """``<backends>/npu_ge/libtriton_npu_ge.so`` present and every library it links found."""
    npus = _npus_present(ctx)
    absent_state: CheckState = "warning" if npus else "not_applicable"
    no_npu = "" if npus else " There is no NPU on this host, so that is expected."
    install = (
        "Install CANN's GE backend (hicann/triton-inference-server-ge-backend; its build installs "
        "libtriton_npu_ge.so into $TRITON_HOME_PATH/backends/npu_ge), or serve Ascend models "
        "through the acl target instead."
    )
    if ctx.backends_dir is None:
        return _make(
            "npu_ge_backend",
            absent_state,
            "Triton's backend directory is not known here (not the embedded Triton, and "
            f"TRITON_HOME_PATH is not set), so the npu_ge backend cannot be inspected.{no_npu}",
            "Open this page where Triton runs, or set TRITON_HOME_PATH to its install "
            "(the backend lives in $TRITON_HOME_PATH/backends/npu_ge)."
            if npus
            else "",
        )
    backend_dir = ctx.backends_dir / "npu_ge"
    library = backend_dir / "libtriton_npu_ge.so"
    if not library.is_file():
        readme_name = backend_dir / "libnpu_ge.so"
        if readme_name.is_file():
            return _make(
                "npu_ge_backend",
                "failing" if npus else "warning",
                f"{readme_name} exists but Triton loads a backend from libtriton_npu_ge.so "
                f"(libtriton_<backend>.so), which is missing.",
                f"Rename or link it (`ln -s libnpu_ge.so {library}`), then restart Triton.",
            )
        return _make(
            "npu_ge_backend",
            absent_state,
            f"No npu_ge backend in {ctx.backends_dir} (looked for {library}); models for the "
            f"npu_ge target cannot load in this Triton.{no_npu}",
            install if npus else "",
        )
    ldd = ctx.which("ldd")
    if not ldd:
        return _make(
            "npu_ge_backend",
            "warning",
            f"{library} is present, but ldd is not available to check what it links.",
            f"Run `ldd {library}` on the Triton host and look for 'not found'.",
        )
    code, output = _run(ctx, [ldd, str(library)], env=dict(ctx.env))
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if code is None or (code != 0 and "=>" not in output):
        return _make(
            "npu_ge_backend",
            "warning",
            f"{library} is present, but ldd could not read it: "
            f"{output.strip() or f'exit code {code}'}.",
            "Check that the file is a complete shared library built for this machine "
            "(rebuild or reinstall the backend if not).",
            lines,
        )
    missing = _LDD_MISSING.findall(output)
    if missing:
        owners: dict[str, list[str]] = {}
        for name in missing:
            owners.setdefault(_lib_owner(name), []).append(name)
        advice = " ".join(f"{', '.join(names)}: {owner}." for owner, names in owners.items())
        return _make(
            "npu_ge_backend",
            "failing",
            f"{library} is present but {len(missing)} of the libraries it needs cannot be "
            f"found: {', '.join(missing)}. Triton cannot load npu_ge models until they are.",
            f"{advice} Then restart Triton. (ldd ran with this process's environment; "
            "Triton's may differ.)",
            lines,
        )
    return _make(
        "npu_ge_backend",
        "ok",
        f"{library} is present and all {sum('=>' in line for line in lines)} libraries it "
        "needs resolve (ldd, in this process's environment).",
        details=lines,
    )


_CONTROL_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")


def check_davinci_devices(ctx: DiagnosticsContext) -> Check:
    """The device nodes an Ascend process needs: ``davinciN`` plus the three control nodes."""
    nodes = _davinci_nodes(ctx)
    present = [n for n in _CONTROL_NODES if (ctx.dev_dir / n).exists()]
    absent = [n for n in _CONTROL_NODES if n not in present]
    listed = [str(p) for p in nodes] + [str(ctx.dev_dir / n) for n in present]
    device_flags = " ".join(f"`--device {ctx.dev_dir / n}`" for n in absent)
    try:
        report = ctx.device_report()
    except Exception:
        report = {}
    chips = len(report.get("npus") or []) if report.get("available") else 0
    if not nodes and not present:
        if chips:
            return _make(
                "davinci_devices",
                "failing",
                f"npu-smi lists {chips} chip(s) but {ctx.dev_dir} has no davinci device nodes: "
                "this process runs without the NPU devices (a container started without them?).",
                f"Start the container with `--device {ctx.dev_dir}/davinciN` for each NPU plus "
                + " ".join(f"`--device {ctx.dev_dir / n}`" for n in _CONTROL_NODES)
                + ".",
            )
        return _make(
            "davinci_devices",
            "not_applicable",
            f"No Ascend device nodes under {ctx.dev_dir} (no davinciN, davinci_manager, "
            "devmm_svm or hisi_hdc): no Ascend NPU is visible to this process.",
        )
    if not nodes:
        return _make(
            "davinci_devices",
            "failing",
            f"{', '.join(present)} exist but there is no {ctx.dev_dir}/davinciN node: "
            "no NPU is usable by this process.",
            f"Pass `--device {ctx.dev_dir}/davinciN` for each NPU Triton should use.",
            listed,
        )
    if absent:
        return _make(
            "davinci_devices",
            "failing",
            f"{len(nodes)} NPU node(s) present ({', '.join(p.name for p in nodes)}) but "
            f"{', '.join(absent)} missing; ACL cannot open a device without them.",
            f"Add {device_flags} to the container (the GE backend's guide maps all of them).",
            listed,
        )
    unusable = [str(p) for p in [*nodes] if not os.access(p, os.R_OK | os.W_OK)]
    if unusable:
        return _make(
            "davinci_devices",
            "warning",
            f"The device nodes exist, but this process's user cannot open {', '.join(unusable)}.",
            "Run the worker and Triton as a user allowed to open the NPU devices "
            "(check the nodes' group and permissions).",
            listed,
        )
    return _make(
        "davinci_devices",
        "ok",
        f"{len(nodes)} NPU node(s) ({', '.join(p.name for p in nodes)}) and "
        f"{', '.join(_CONTROL_NODES)} are present.",
        details=listed,
    )


def _memory_use(chip: Mapping[str, Any]) -> tuple[str, int, int] | None:
    """``(kind, used, total)`` of HBM, else of memory; ``None`` when neither is known."""
    for kind, used, total in (
        ("HBM", "hbm_used_mb", "hbm_total_mb"),
        ("memory", "memory_used_mb", "memory_total_mb"),
    ):
        if chip.get(total):
            return kind, int(chip.get(used) or 0), int(chip[total])
    return None


def _chip_name(chip: Mapping[str, Any]) -> str:
    chip_id = chip.get("chip_id")
    suffix = f" chip {chip_id}" if chip_id is not None else ""
    return f"NPU {chip.get('npu_id')}{suffix} ({chip.get('name', '?')})"


def check_npu_smi(ctx: DiagnosticsContext) -> Check:
    """npu-smi answers; every chip healthy; HBM (or memory) below 90 %."""
    report = ctx.device_report()
    if not report.get("available"):
        reason = str(report.get("reason") or "npu-smi gave no answer")
        if "not found" in reason:
            return _make("npu_smi", "not_applicable", f"{reason[0].upper()}{reason[1:]}.")
        return _make(
            "npu_smi",
            "failing",
            f"npu-smi is installed but gave no table: {reason}.",
            "Run `npu-smi info` by hand on this host. Check that the NPU driver is installed "
            "(/usr/local/Ascend/driver) and, in a container, that /usr/local/bin/npu-smi, "
            "/usr/local/dcmi and the driver's lib64 are mounted.",
        )
    chips: list[Mapping[str, Any]] = list(report.get("npus") or [])
    warnings = [f"npu-smi parse note: {w}" for w in report.get("warnings") or []]
    if not chips:
        return _make(
            "npu_smi",
            "warning",
            "npu-smi ran but listed no NPU.",
            "Run `npu-smi info` by hand; the driver may not see the cards (check the driver "
            "install and `lspci`).",
            warnings,
        )
    states: list[CheckState] = ["ok"]
    found: list[str] = []
    advice: list[str] = []
    details: list[str] = []
    sick = [c for c in chips if c.get("health") != "OK"]
    full = []
    for chip in chips:
        use = _memory_use(chip)
        line = f"{_chip_name(chip)}: health {chip.get('health')}"
        if use:
            kind, used, total = use
            pct = 100.0 * used / total
            line += f", {kind} {used} / {total} MB ({pct:.0f} %)"
            if pct >= MEMORY_WARN_PCT:
                full.append(f"{_chip_name(chip)} {kind} {pct:.0f} % used")
        details.append(line)
    if sick:
        states.append("warning" if all(c.get("health") == "Warning" for c in sick) else "failing")
        found.append(
            "unhealthy: " + ", ".join(f"{_chip_name(c)} reports {c.get('health')}" for c in sick)
        )
        advice.append(
            "Run `npu-smi info` on the host to see the alarm and check the driver's log; models "
            "placed on that NPU may fail to load or run, so move them elsewhere with device_ids "
            "in config.pbtxt until it is healthy again."
        )
    if full:
        states.append("warning")
        found.append("HBM near exhaustion: " + ", ".join(full))
        advice.append(
            "The GE backend does not release NPU memory when a model is unloaded, so repeated "
            "reloads may accumulate HBM use: restart Triton at a quiet moment, and see which "
            "processes hold memory with `npu-smi info`."
        )
    if not found:
        found.append(f"{len(chips)} chip(s), all healthy, memory below {MEMORY_WARN_PCT:.0f} %")
    version = f" {report['version']}" if report.get("version") else ""
    return _make(
        "npu_smi",
        _worst(states),
        f"npu-smi{version}: {'; '.join(found)}.",
        " ".join(advice),
        details + warnings,
    )


def check_triton_reachable(ctx: DiagnosticsContext) -> Check:
    """Triton answers ``/v2/health/live`` and ``/v2/health/ready``."""
    if ctx.is_live is None:
        return _make(
            "triton_reachable", "not_applicable", "No Triton is configured for this dashboard."
        )
    url = f"http://{ctx.triton_url}" if "://" not in ctx.triton_url else ctx.triton_url
    log = f"; its log is {ctx.triton_log_path}" if ctx.triton_log_path else ""
    if not ctx.triton_live():
        return _make(
            "triton_reachable",
            "failing",
            f"Triton at {url} is not reachable (no answer on /v2/health/live).",
            f"Start it (`make run` starts the embedded Triton{log}), or set TRITON_URL to the "
            "HTTP address (host:port) of the running Triton and check that nothing blocks "
            "that port.",
        )
    if not ctx.triton_ready():
        return _make(
            "triton_reachable",
            "warning",
            f"Triton at {url} is live but not ready (/v2/health/ready says no).",
            "Triton reports not ready while it starts and, with strict readiness, when a model "
            f"failed to load: see the load failure check below and the Triton log{log}.",
        )
    return _make("triton_reachable", "ok", f"Triton at {url} is live and ready.")


def _restrict_advice() -> str:
    """The tritonserver options that restrict the repository API, as the advice shows them."""
    setting = f"{','.join(RESTRICTED_APIS)}:{API_KEY_HEADER}=<key>"
    flags = " and ".join(f"`{option}={setting}`" for option in RESTRICTED_OPTIONS)
    return (
        f"Start tritonserver with {flags} (Triton 2.51 syntax: a colon before the header "
        "name) and give the web, worker and beat processes the same key as TRITON_API_KEY; "
        "docker-compose.yml does both from TRITON_API_KEY in .env. A Triton that rejects these "
        "options is too old to restrict its API: upgrade it, and until then let nothing but "
        "the hub reach its HTTP and gRPC ports."
    )


def _probe_without_key(ctx: DiagnosticsContext) -> tuple[list[str], list[str], list[str]]:
    """Ask the repository index without a key on each port: ``(open, refused, unknown)``.

    Each list holds port names such as ``HTTP (triton:8000)``; ``unknown`` says why.
    """
    assert ctx.repository_index_without_key is not None
    ports: list[tuple[TritonProtocol, str]] = [("http", f"HTTP ({ctx.triton_url})")]
    if ctx.grpc_url:
        ports.append(("grpc", f"gRPC ({ctx.grpc_url})"))
    answered, refused, unknown = [], [], []
    for protocol, name in ports:
        try:
            ctx.repository_index_without_key(protocol)
            answered.append(name)
        except TritonAccessDenied:
            refused.append(name)
        except Exception as exc:
            unknown.append(f"{name} could not be asked: {exc}")
    return answered, refused, unknown


def _hub_key_refused(ctx: DiagnosticsContext) -> Check:
    found = (
        "Triton refuses the hub's repository calls: the hub's TRITON_API_KEY does not match "
        "the key Triton was started with."
        if ctx.api_key_set
        else "Triton's repository API is restricted, but the hub has no TRITON_API_KEY to send."
    )
    return _make(
        "triton_access",
        "failing",
        f"{found} Publishing, rollback and reconcile cannot load or unload models until it does.",
        "Set TRITON_API_KEY (or TRITON_API_KEY_FILE) for the web, worker and beat processes "
        "to the key in Triton's `--http-restricted-api` and `--grpc-restricted-protocol` "
        "options, then restart them.",
    )


def check_triton_access(ctx: DiagnosticsContext) -> Check:
    """Triton refuses repository calls (index, load, unload) without the hub's key, and
    accepts the hub's."""
    if ctx.is_live is None or ctx.repository_index_without_key is None:
        return _make(
            "triton_access", "not_applicable", "No Triton is configured for this dashboard."
        )
    if not ctx.triton_live():
        return _make(
            "triton_access",
            "not_applicable",
            f"Triton at {ctx.triton_url} is not reachable; see the Triton check.",
        )
    try:
        ctx.index()
    except TritonAccessDenied:
        return _hub_key_refused(ctx)
    except Exception as exc:
        return _make(
            "triton_access",
            "not_applicable",
            f"Triton's repository index could not be read ({exc}); see the Triton check.",
        )
    answered, refused, unknown = _probe_without_key(ctx)
    if answered:
        unchecked = " (Triton does not check the hub's TRITON_API_KEY)" if ctx.api_key_set else ""
        return _make(
            "triton_access",
            "warning",
            f"Triton's repository API is open to anyone who can reach it: without any key, "
            f"{' and '.join(answered)} answered the repository index, so anyone could also "
            f"load and unload models{unchecked}.",
            _restrict_advice(),
            unknown,
        )
    if unknown:
        return _make(
            "triton_access",
            "warning",
            f"Triton refuses repository calls without the hub's key on {' and '.join(refused)}, "
            "but not every port could be asked.",
            "Check TRITON_GRPC_URL: the hub loads models over gRPC when it is set.",
            unknown,
        )
    return _make(
        "triton_access",
        "ok",
        f"Triton refuses repository calls without the hub's key on {' and '.join(refused)}, "
        "and accepts the hub's TRITON_API_KEY.",
    )


def _index_or_reason(ctx: DiagnosticsContext) -> tuple[list[dict[str, str]] | None, str]:
    try:
        return ctx.index(), ""
    except Exception as exc:
        return None, f"Triton's repository index could not be read ({exc})"


def check_stuck_loading(ctx: DiagnosticsContext) -> Check:
    """Models LOADING; failing when a GE init failure may have blocked later loads."""
    rows, why = _index_or_reason(ctx)
    if rows is None:
        return _make("stuck_loading", "not_applicable", f"{why}; see the Triton check.")
    loading = [r for r in rows if r.get("state") == "LOADING"]
    if not loading:
        return _make("stuck_loading", "ok", f"No model is LOADING ({len(rows)} in the index).")
    names = ", ".join(f"{r.get('name')} v{r.get('version') or '?'}" for r in loading)
    init_failures = [line for kind, line in _ge_log_hits(ctx) if kind in ("device", "compile")]
    if init_failures:
        return _make(
            "stuck_loading",
            "failing",
            f"{len(loading)} model(s) LOADING ({names}) after a GE initialisation failure in "
            "the Triton log: the GE backend can hang later loads after one fails.",
            "Restart Triton (the only recovery); then fix the model whose load failed first "
            "(see the load failure check) before loading it again.",
            init_failures,
        )
    return _make(
        "stuck_loading",
        "warning",
        f"{len(loading)} model(s) LOADING: {names}.",
        "The GE backend compiles the ONNX when it loads, which can take minutes. If a model "
        "stays LOADING far longer than its first load took, restart Triton: after one failed "
        "load the GE backend may keep later loads waiting forever.",
    )


def check_load_failures(ctx: DiagnosticsContext) -> Check:
    """UNAVAILABLE models with their reason, and GE error phrases in the Triton log."""
    rows, why = _index_or_reason(ctx)
    hits = _ge_log_hits(ctx)
    failed = [
        r
        for r in rows or []
        if r.get("state") == "UNAVAILABLE" and r.get("reason", "").strip() not in ("", "unloaded")
    ]
    kinds: list[str] = []
    details: list[str] = []
    for row in failed:
        kind = classify_ge_message(row.get("reason", "")) or "other"
        kinds.append(kind)
        details.append(f"{row.get('name')} v{row.get('version') or '?'} [{kind}]: {row['reason']}")
    log_kinds = [kind for kind, _ in hits]
    details += [f"log [{kind}]: {line}" for kind, line in hits]
    advice = " ".join(GE_ADVICE[k] for k in dict.fromkeys([*kinds, *log_kinds]))
    log_note = (
        f" The Triton log ({ctx.triton_log_path}) has {len(hits)} GE error line(s) since it "
        "started."
        if hits
        else ""
    )
    if failed:
        names = ", ".join(f"{r.get('name')} ({k})" for r, k in zip(failed, kinds, strict=True))
        return _make(
            "load_failures",
            "failing",
            f"{len(failed)} model(s) failed to load: {names}.{log_note}",
            advice,
            details,
        )
    if hits:
        return _make(
            "load_failures",
            "warning",
            f"No model is UNAVAILABLE now, but the Triton log ({ctx.triton_log_path}) has "
            f"{len(hits)} GE error line(s) since it started "
            f"({', '.join(dict.fromkeys(log_kinds))}).",
            advice,
            details,
        )
    if rows is None:
        log_words = (
            f" The Triton log ({ctx.triton_log_path}) has no GE error since it started."
            if ctx.triton_log_path
            else ""
        )
        return _make("load_failures", "not_applicable", f"{why}; see the Triton check.{log_words}")
    log_words = f"; no GE error in {ctx.triton_log_path}" if ctx.triton_log_path else ""
    return _make(
        "load_failures",
        "ok",
        f"No model failed to load ({len(rows)} in the index){log_words}.",
    )


TITLES: dict[str, str] = {
    "cann_env": "CANN environment",
    "atc": "ATC (Ascend Tensor Compiler)",
    "npu_ge_backend": "npu_ge backend library",
    "davinci_devices": "NPU device nodes",
    "npu_smi": "NPUs (npu-smi)",
    "triton_reachable": "Triton reachable",
    "triton_access": "Triton repository API restricted to the hub",
    "stuck_loading": "Models stuck LOADING",
    "load_failures": "Model load failures",
}

CheckFn = Callable[[DiagnosticsContext], Check]

#: The checklist, in the order a person would work through it.
CHECKS: list[tuple[str, CheckFn]] = [
    ("cann_env", check_cann_env),
    ("atc", check_atc),
    ("npu_ge_backend", check_npu_ge_backend),
    ("davinci_devices", check_davinci_devices),
    ("npu_smi", check_npu_smi),
    ("triton_reachable", check_triton_reachable),
    ("triton_access", check_triton_access),
    ("stuck_loading", check_stuck_loading),
    ("load_failures", check_load_failures),
]


def run_checks(
    ctx: DiagnosticsContext, checks: Sequence[tuple[str, CheckFn]] | None = None
) -> list[Check]:
    """Run every check in order; one that raises becomes a failing check, never a crash.

    Each outside call is bounded (subprocesses by ``ctx.timeout``, Triton by its client's
    timeout, the log by :data:`LOG_TAIL_BYTES`) and shared answers are asked once.
    """
    results = []
    for cid, fn in CHECKS if checks is None else checks:
        try:
            results.append(fn(ctx))
        except Exception as exc:
            results.append(
                Check(
                    cid,
                    TITLES.get(cid, cid),
                    "failing",
                    f"the check itself failed: {type(exc).__name__}: {exc}",
                    "This is a bug in the dashboard's diagnostics; the other checks still ran. "
                    "Please report it with the text above.",
                )
            )
    return results


def summarize(checks: Sequence[Check]) -> dict[str, int]:
    """How many checks are in each state (every state present, zeros included)."""
    counts: dict[str, int] = dict.fromkeys(STATES, 0)
    for check in checks:
        counts[check.state] += 1
    return counts


def summary_line(checks: Sequence[Check]) -> str:
    """E.g. ``"8 checks: 4 ok, 1 failing, 3 not applicable"`` (zero counts left out)."""
    counts = summarize(checks)
    parts = [f"{counts[s]} {s.replace('_', ' ')}" for s in STATES if counts[s]]
    noun = "check" if len(checks) == 1 else "checks"
    return f"{len(checks)} {noun}: {', '.join(parts)}" if parts else f"0 {noun}"

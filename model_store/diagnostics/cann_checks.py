"""Diagnostics checks of the CANN toolkit: its environment, ATC, and ATC's Python.

:func:`check_cann_env` compares CANN's variables with what ``set_env.sh`` gives and says
which install layout and version it found (docs/cann.md#install-layouts), :func:`check_atc`
finds and starts ATC the way the worker does (docs/atc.md), and :func:`check_atc_python` runs
the interpreter ATC's operator compiler will use and checks its version and packages
(docs/atc.md#python-environment). Each is not applicable on a host without CANN. The check of
Triton's ``npu_ge`` backend library is in :mod:`~model_store.diagnostics.ge_backend_checks`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from model_store.compile.atc.environment import (
    ATC_PYTHON_VAR,
    LAYOUT_NAMES,
    AtcUnavailable,
    CannStatus,
    atc_environment,
    atc_python_setting,
    cann_status,
    default_toolkit_homes,
)
from model_store.compile.atc.python import PROBE_SCRIPT, assess_probe, parse_probe
from model_store.diagnostics.context import (
    Check,
    DiagnosticsContext,
    make_check,
)
from model_store.text import Said, joined, say

_CANN_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH")

#: ATC's Python imports numpy, scipy and sympy; that takes longer than one command may.
PYTHON_PROBE_TIMEOUT_FACTOR = 6


def _status(ctx: DiagnosticsContext) -> CannStatus:
    """:func:`cann_status` with this context's default install root."""
    homes = default_toolkit_homes(ctx.ascend_root, ctx.env.get("HOME") or None)
    return cann_status(ctx.env, default_homes=homes)


def _set_env_script(ctx: DiagnosticsContext, home: str | None) -> str:
    """The ``set_env.sh`` to source: next to the toolkit in use, else the default install's."""
    candidates = []
    if home:
        path = Path(home)
        candidates += [path / "set_env.sh", path.parent / "set_env.sh"]
    defaults = [ctx.ascend_root / "cann" / "set_env.sh"]
    defaults.append(ctx.ascend_root / "ascend-toolkit" / "set_env.sh")
    candidates += defaults
    installed = _cann_installed_dir(ctx)
    fallback = defaults[0] if installed is not None and installed.name == "cann" else defaults[1]
    return str(next((c for c in candidates if c.is_file()), fallback))


def _cann_installed_dir(ctx: DiagnosticsContext) -> Path | None:
    """The default install's directory, either layout (``cann`` first, CANN 8.5+)."""
    for name in ("cann", "ascend-toolkit"):
        toolkit = ctx.ascend_root / name
        if toolkit.is_dir():
            return toolkit
    return None


def _layout_lines(status: CannStatus) -> tuple[list[Said], list[Said]]:
    """Details naming the layout and versions, and warnings about the 8.5 ops package."""
    if status.toolkit_home is None:
        return [], []
    name = LAYOUT_NAMES.get(status.layout or "") or say("an unrecognised layout")
    details: list[Said] = [
        say("layout: %(layout)s at %(home)s", layout=name, home=status.toolkit_home),
        f"CANN version: {status.version or 'unknown (no ascend_toolkit_install.info)'}",
    ]
    warnings: list[Said] = []
    if status.ops_version:
        details.append(f"ops package version: {status.ops_version}")
        if status.version and status.ops_version != status.version:
            warnings.append(
                say(
                    "the ops package (%(ops)s) does not match the toolkit (%(toolkit)s); CANN "
                    "needs the same version in the same path",
                    ops=status.ops_version,
                    toolkit=status.version,
                )
            )
    elif status.layout == "cann":
        warnings.append(
            say(
                "no ops package was found (<arch>-linux/ascend_ops_install.info); from CANN 8.5 "
                "ATC needs the ops package for the target chip"
            )
        )
    return details, warnings


def _has_cann(ctx: DiagnosticsContext) -> bool:
    """Any sign of a CANN toolkit: its variables, ATC_PATH, the default install, atc on PATH."""
    return bool(
        any(ctx.env.get(v, "").strip() for v in (*_CANN_VARS, "ATC_PATH"))
        or _cann_installed_dir(ctx)
        or ctx.which("atc")
    )


def _run(
    ctx: DiagnosticsContext, argv: list[str], timeout: float | None = None, **kwargs: Any
) -> tuple[int | None, str, Said]:
    """Run ``argv``; ``(exit code, stdout+stderr, "")``, or ``(None, "", why it did not run)``."""
    timeout = ctx.timeout if timeout is None else timeout
    try:
        done = ctx.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired:
        return (
            None,
            "",
            say(
                "%(program)s did not answer within %(timeout)s s",
                program=Path(argv[0]).name,
                timeout=f"{timeout:g}",
            ),
        )
    except OSError as exc:
        return (
            None,
            "",
            say(
                "%(program)s could not be started: %(error)s",
                program=Path(argv[0]).name,
                error=str(exc),
            ),
        )
    out = (getattr(done, "stdout", "") or "") + (getattr(done, "stderr", "") or "")
    if isinstance(out, bytes):
        out = out.decode("utf-8", "replace")
    return getattr(done, "returncode", 1), out, ""


def check_cann_env(ctx: DiagnosticsContext) -> Check:
    """CANN's variables set, pointing at directories that exist, and lib64 on LD_LIBRARY_PATH."""
    values = {v: ctx.env.get(v, "").strip() for v in _CANN_VARS}
    home = values["ASCEND_TOOLKIT_HOME"] or values["ASCEND_HOME_PATH"] or None
    script = _set_env_script(ctx, home)
    source = say(
        "Run `source %(script)s` in the environment that starts the worker and Triton "
        "(shell, service unit or container entrypoint), then restart them.",
        script=script,
    )
    if not any(values.values()):
        installed = _cann_installed_dir(ctx)
        if installed is None and not _has_cann(ctx):
            return make_check(
                "cann_env",
                "not_applicable",
                say(
                    "No CANN toolkit on this host; Ascend targets cannot compile or serve here. "
                    "CPU (onnxruntime) models are unaffected."
                ),
            )
        found = (
            say(
                "A CANN toolkit is installed at %(where)s, but its environment is not set: "
                "%(variables)s are all empty.",
                where=str(installed),
                variables=", ".join(_CANN_VARS),
            )
            if installed
            else say(
                "A CANN toolkit is installed (ATC_PATH or atc on PATH), but its environment is "
                "not set: %(variables)s are all empty.",
                variables=", ".join(_CANN_VARS),
            )
        )
        return make_check("cann_env", "failing", found, source)

    status = _status(ctx)
    layout_details, layout_warnings = _layout_lines(status)
    details, missing = list(layout_details), []
    problems: list[Said] = []
    for var, value in values.items():
        if not value:
            missing.append(var)
            details.append(f"{var} is not set")
        elif not Path(value).exists():
            problems.append(say("%(setting)s does not exist", setting=f"{var}={value}"))
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
        return make_check(
            "cann_env",
            "failing",
            say(
                "CANN's environment points at paths that do not exist: %(problems)s.",
                problems=joined(problems, "; "),
            ),
            say("Fix or unset these variables. %(source)s", source=source),
            details,
        )
    if missing or absent_libs or layout_warnings:
        parts: list[Said] = []
        if missing:
            parts.append(say("%(variables)s not set", variables=", ".join(missing)))
        if absent_libs:
            parts.append(
                say("LD_LIBRARY_PATH lacks %(directories)s", directories=", ".join(absent_libs))
            )
        parts += layout_warnings
        advice: Said = source
        if layout_warnings:
            advice = say(
                "%(source)s Install the ops package of your chip with the toolkit's version "
                "into the toolkit's path (docs/cann.md#install-layouts).",
                source=source,
            )
        return make_check(
            "cann_env",
            "warning",
            say("CANN's environment is only partly set: %(parts)s.", parts=joined(parts, "; ")),
            advice,
            details,
        )
    found = say("toolkit %(home)s", home=home)
    if status.toolkit_home:
        version = (
            say("CANN %(version)s", version=status.version)
            if status.version
            else say("version unknown")
        )
        layout = LAYOUT_NAMES.get(status.layout or "") or say("an unrecognised layout")
        found = say(
            "toolkit %(home)s: %(version)s, %(layout)s", home=home, version=version, layout=layout
        )
    return make_check(
        "cann_env",
        "ok",
        say(
            "CANN's environment is set (%(found)s) and its lib64 is on LD_LIBRARY_PATH.",
            found=found,
        ),
        details=details,
    )


def check_atc(ctx: DiagnosticsContext) -> Check:
    """ATC found (the way the worker finds it) and able to start."""
    status = _status(ctx)
    atc = status.atc_path or ctx.which("atc")
    if not atc:
        if not _has_cann(ctx):
            return make_check(
                "atc",
                "not_applicable",
                say(
                    "ATC is not installed here (no CANN toolkit); the acl target and the npu_ge "
                    "pre-flight compile need it. CPU (onnxruntime) models are unaffected."
                ),
            )
        return make_check(
            "atc",
            "failing",
            say(
                "A CANN toolkit is present but ATC was not found: %(reason)s", reason=status.reason
            ),
            say(
                "Install the CANN toolkit's compiler component, or point ATC_PATH at the atc "
                "binary (ASCEND_TOOLKIT_HOME at the toolkit), then restart the worker."
            ),
        )
    version = (
        say("CANN %(version)s", version=status.version)
        if status.version
        else say("CANN version unknown")
    )
    try:
        env = atc_environment(status, ctx.env)
    except AtcUnavailable as exc:
        return make_check(
            "atc",
            "failing",
            say(
                "ATC is at %(atc)s (%(version)s) but cannot be given its Python: %(error)s",
                atc=atc,
                version=version,
                error=exc.message,
            ),
            say(
                "Fix %(variable)s in the worker's environment, then restart the worker.",
                variable=ATC_PYTHON_VAR,
            ),
        )
    code, output, why = _run(ctx, [atc, "--help"], env=env)
    lines = [line for line in output.splitlines() if line.strip()][:20]
    if code is None:
        return make_check(
            "atc",
            "warning",
            say("ATC is at %(atc)s (%(version)s) but %(why)s.", atc=atc, version=version, why=why),
            say("Run `atc --help` by hand in the worker's environment to see what it waits for."),
            [why],
        )
    if code != 0 or "error while loading shared libraries" in output:
        return make_check(
            "atc",
            "failing",
            say(
                "ATC is at %(atc)s (%(version)s) but `atc --help` failed with exit code %(code)s.",
                atc=atc,
                version=version,
                code=code,
            ),
            say(
                "Usually a library is missing from LD_LIBRARY_PATH: source CANN's set_env.sh in "
                "the worker's environment. The output below names what failed."
            ),
            lines,
        )
    return make_check(
        "atc",
        "ok",
        say("ATC is at %(atc)s (%(version)s) and starts.", atc=atc, version=version),
        details=lines,
    )


def check_atc_python(ctx: DiagnosticsContext) -> Check:
    """The interpreter ATC's operator compiler will run: its version, packages and libpython.

    ATC runs the first ``python3`` on its ``PATH`` (docs/atc.md#python-environment); the
    worker's ATC gets ``ATC_PYTHON``'s directory first, or the ``PATH`` without the hub's
    virtualenv (:func:`~model_store.compile.atc.environment.atc_environment`). This runs
    that interpreter with ATC's environment and reads what it can import.
    """
    configured = ctx.env.get(ATC_PYTHON_VAR, "").strip()
    if not configured and not _has_cann(ctx):
        return make_check(
            "atc_python",
            "not_applicable",
            say(
                "No CANN toolkit here and %(variable)s is not set; ATC's Python only matters "
                "where ATC runs.",
                variable=ATC_PYTHON_VAR,
            ),
        )
    fix = say(
        "Set %(variable)s in the worker's environment to the python3 of an environment "
        "that meets CANN's requirements (docs/atc.md#python-environment), then restart it.",
        variable=ATC_PYTHON_VAR,
    )
    status = _status(ctx)
    _, problem = atc_python_setting(ctx.env)
    if problem:
        return make_check("atc_python", "failing", problem, fix)
    env = atc_environment(status, ctx.env)
    where: Said
    if configured:
        interpreter: str | None = str(Path(configured).parent / "python3")
        where = ATC_PYTHON_VAR
    else:
        path = env.get("PATH", "")
        interpreter = shutil.which("python3", path=path) or shutil.which("python", path=path)
        where = say("first on ATC's PATH; %(variable)s is not set", variable=ATC_PYTHON_VAR)
    if interpreter is None:
        return make_check(
            "atc_python",
            "failing",
            say(
                "No python3 is on ATC's PATH and %(variable)s is not set: ATC's operator "
                "compiler fails with E40001.",
                variable=ATC_PYTHON_VAR,
            ),
            fix,
            [f"ATC's PATH: {env.get('PATH', '')}"],
        )
    timeout = ctx.timeout * PYTHON_PROBE_TIMEOUT_FACTOR
    code, output, why = _run(ctx, [interpreter, "-c", PROBE_SCRIPT], timeout=timeout, env=env)
    report = parse_probe(output) if code is not None else None
    if report is None:
        # Without an exit code, ``why`` is the one line saying why it did not run.
        lines: list[Said] = [why]
        if code is not None:
            lines = [line for line in output.splitlines() if line.strip()]
            del lines[:-10]  # the last ten
        found = (
            say(
                "ATC's Python %(interpreter)s (%(where)s) did not run the check: %(why)s.",
                interpreter=interpreter,
                where=where,
                why=why,
            )
            if code is None
            else say(
                "ATC's Python %(interpreter)s (%(where)s) did not run the check "
                "(exit code %(code)s).",
                interpreter=interpreter,
                where=where,
                code=code,
            )
        )
        return make_check("atc_python", "failing", found, fix, lines)
    verdict = assess_probe(report, status.version, where)
    return make_check("atc_python", verdict.state, verdict.summary, verdict.advice, verdict.details)

"""Diagnostics checks of the Ascend software: CANN's environment, ATC, the GE backend library.

:func:`check_cann_env` compares CANN's variables with what ``set_env.sh`` gives
(docs/cann.md#install-layouts), :func:`check_atc` finds and starts ATC the way the worker
does (docs/atc.md), and :func:`check_npu_ge_backend` checks that Triton's ``npu_ge`` backend
library is installed and that every library it links resolves
(docs/ge-backend.md#identity-and-build). Each is not applicable on a host without CANN.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

from model_store.compile.atc.environment import atc_environment, cann_status
from model_store.diagnostics.context import Check, CheckState, DiagnosticsContext, make_check
from model_store.diagnostics.device_checks import npus_present

_CANN_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH")

_LDD_MISSING = re.compile(r"^\s*(\S+)\s*=>\s*not found", re.MULTILINE)


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
            return make_check(
                "cann_env",
                "not_applicable",
                "No CANN toolkit on this host; Ascend targets cannot compile or serve here. "
                "CPU (onnxruntime) models are unaffected.",
            )
        where = f"at {installed}" if installed else "(ATC_PATH or atc on PATH)"
        return make_check(
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
        return make_check(
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
        return make_check(
            "cann_env",
            "warning",
            f"CANN's environment is only partly set: {'; '.join(parts)}.",
            source,
            details,
        )
    return make_check(
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
            return make_check(
                "atc",
                "not_applicable",
                "ATC is not installed here (no CANN toolkit); the acl target and the npu_ge "
                "pre-flight compile need it. CPU (onnxruntime) models are unaffected.",
            )
        return make_check(
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
        return make_check(
            "atc",
            "warning",
            f"ATC is at {atc} ({version}) but {output}.",
            "Run `atc --help` by hand in the worker's environment to see what it waits for.",
            lines,
        )
    if code != 0 or "error while loading shared libraries" in output:
        return make_check(
            "atc",
            "failing",
            f"ATC is at {atc} ({version}) but `atc --help` failed with exit code {code}.",
            "Usually a library is missing from LD_LIBRARY_PATH: source CANN's set_env.sh in the "
            "worker's environment. The output below names what failed.",
            lines,
        )
    return make_check("atc", "ok", f"ATC is at {atc} ({version}) and starts.", details=lines)


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
    npus = npus_present(ctx)
    absent_state: CheckState = "warning" if npus else "not_applicable"
    no_npu = "" if npus else " There is no NPU on this host, so that is expected."
    install = (
        "Install CANN's GE backend (hicann/triton-inference-server-ge-backend; its build installs "
        "libtriton_npu_ge.so into $TRITON_HOME_PATH/backends/npu_ge), or serve Ascend models "
        "through the acl target instead."
    )
    if ctx.backends_dir is None:
        return make_check(
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
            return make_check(
                "npu_ge_backend",
                "failing" if npus else "warning",
                f"{readme_name} exists but Triton loads a backend from libtriton_npu_ge.so "
                f"(libtriton_<backend>.so), which is missing.",
                f"Rename or link it (`ln -s libnpu_ge.so {library}`), then restart Triton.",
            )
        return make_check(
            "npu_ge_backend",
            absent_state,
            f"No npu_ge backend in {ctx.backends_dir} (looked for {library}); models for the "
            f"npu_ge target cannot load in this Triton.{no_npu}",
            install if npus else "",
        )
    ldd = ctx.which("ldd")
    if not ldd:
        return make_check(
            "npu_ge_backend",
            "warning",
            f"{library} is present, but ldd is not available to check what it links.",
            f"Run `ldd {library}` on the Triton host and look for 'not found'.",
        )
    code, output = _run(ctx, [ldd, str(library)], env=dict(ctx.env))
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if code is None or (code != 0 and "=>" not in output):
        return make_check(
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
        return make_check(
            "npu_ge_backend",
            "failing",
            f"{library} is present but {len(missing)} of the libraries it needs cannot be "
            f"found: {', '.join(missing)}. Triton cannot load npu_ge models until they are.",
            f"{advice} Then restart Triton. (ldd ran with this process's environment; "
            "Triton's may differ.)",
            lines,
        )
    return make_check(
        "npu_ge_backend",
        "ok",
        f"{library} is present and all {sum('=>' in line for line in lines)} libraries it "
        "needs resolve (ldd, in this process's environment).",
        details=lines,
    )

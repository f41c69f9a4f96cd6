"""Diagnostics check of Triton's ``npu_ge`` backend library (CANN's GE backend).

:func:`check_npu_ge_backend` checks that ``<backends>/npu_ge/libtriton_npu_ge.so`` is
installed and that every library it links resolves (``ldd``), and names who usually supplies
a library that does not (docs/ge-backend.md#identity-and-build). A missing backend is a
warning on a host with NPUs and not applicable on one without.
"""

from __future__ import annotations

import re

from model_store.diagnostics.cann_checks import _run
from model_store.diagnostics.context import (
    Check,
    CheckState,
    DiagnosticsContext,
    make_check,
)
from model_store.diagnostics.device_checks import npus_present
from model_store.text import Message, Said, joined, say

_LDD_MISSING = re.compile(r"^\s*(\S+)\s*=>\s*not found", re.MULTILINE)


#: Who usually supplies a library the npu_ge backend links [inferred from the build's link
#: list and the backend image's Dockerfile, not from a real host; see
#: docs/ge-backend.md#identity-and-build and docs/ge-backend.md#runtime-environment].
_LIB_OWNERS: list[tuple[tuple[str, ...], Message]] = [
    (
        ("libonnxruntime",),
        say(
            "onnxruntime's lib directory (/opt/onnxruntime/lib in the backend's image) must be "
            "on Triton's LD_LIBRARY_PATH"
        ),
    ),
    (
        ("libascend_hal", "libdrv", "libdcmi", "libtsd"),
        say(
            "the NPU driver: mount /usr/local/Ascend/driver/lib64/ (and /usr/local/dcmi) into "
            "Triton's container and add /usr/local/Ascend/driver/lib64/driver to its "
            "LD_LIBRARY_PATH"
        ),
    ),
    (
        ("libtritonserver",),
        say("Triton's own lib directory ($TRITON_HOME_PATH/lib) must be on its LD_LIBRARY_PATH"),
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
        say(
            "the CANN toolkit: source /usr/local/Ascend/ascend-toolkit/set_env.sh in Triton's "
            "environment (it puts the toolkit's lib64 on LD_LIBRARY_PATH)"
        ),
    ),
]


def _lib_owner(name: str) -> Said:
    for prefixes, owner in _LIB_OWNERS:
        if name.startswith(prefixes):
            return owner
    return say("find the package that ships it and put its directory on Triton's LD_LIBRARY_PATH")


def check_npu_ge_backend(ctx: DiagnosticsContext) -> Check:
    """``<backends>/npu_ge/libtriton_npu_ge.so`` present and every library it links found."""
    npus = npus_present(ctx)
    absent_state: CheckState = "warning" if npus else "not_applicable"
    no_npu = say("There is no NPU on this host, so that is expected.")
    install = say(
        "Install CANN's GE backend (hicann/triton-inference-server-ge-backend; its build installs "
        "libtriton_npu_ge.so into $TRITON_HOME_PATH/backends/npu_ge), or serve Ascend models "
        "through the acl target instead."
    )
    if ctx.backends_dir is None:
        unseen = say(
            "Triton's backend directory is not visible to the worker on this host (not the "
            "embedded Triton, and TRITON_HOME_PATH is not set), so the npu_ge backend cannot be "
            "inspected."
        )
        return make_check(
            "npu_ge_backend",
            absent_state,
            unseen if npus else joined([unseen, no_npu]),
            say(
                "Set TRITON_HOME_PATH in the worker's environment to Triton's install as the "
                "worker sees it (the backend lives in $TRITON_HOME_PATH/backends/npu_ge). In the "
                "compose stack Triton's own container refuses to start without it "
                "(HUB_REQUIRED_BACKENDS)."
            )
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
                say(
                    "%(file)s exists but Triton loads a backend from libtriton_npu_ge.so "
                    "(libtriton_<backend>.so), which is missing.",
                    file=str(readme_name),
                ),
                say(
                    "Rename or link it (`ln -s libnpu_ge.so %(library)s`), then restart Triton.",
                    library=str(library),
                ),
            )
        absent = say(
            "No npu_ge backend in %(directory)s (looked for %(library)s); models for the "
            "npu_ge target cannot load in this Triton.",
            directory=str(ctx.backends_dir),
            library=str(library),
        )
        return make_check(
            "npu_ge_backend",
            absent_state,
            absent if npus else joined([absent, no_npu]),
            install if npus else "",
        )
    ldd = ctx.which("ldd")
    if not ldd:
        return make_check(
            "npu_ge_backend",
            "warning",
            say(
                "%(library)s is present, but ldd is not available to check what it links.",
                library=str(library),
            ),
            say(
                "Run `ldd %(library)s` on the Triton host and look for 'not found'.",
                library=str(library),
            ),
        )
    code, output, why = _run(ctx, [ldd, str(library)], env=dict(ctx.env))
    lines: list[Said] = [line.strip() for line in output.splitlines() if line.strip()]
    if code is None:
        lines = [why]
    if code is None or (code != 0 and "=>" not in output):
        return make_check(
            "npu_ge_backend",
            "warning",
            say(
                "%(library)s is present, but ldd could not read it: %(why)s.",
                library=str(library),
                why=(why if code is None else output.strip())
                or say("exit code %(code)s", code=code),
            ),
            say(
                "Check that the file is a complete shared library built for this machine "
                "(rebuild or reinstall the backend if not)."
            ),
            lines,
        )
    missing = _LDD_MISSING.findall(output)
    if missing:
        owners: dict[Said, list[str]] = {}
        for name in missing:
            owners.setdefault(_lib_owner(name), []).append(name)
        advice = [
            say("%(libraries)s: %(owner)s.", libraries=", ".join(names), owner=owner)
            for owner, names in owners.items()
        ]
        advice.append(
            say(
                "Then restart Triton. (ldd ran with this process's environment; Triton's may "
                "differ.)"
            )
        )
        return make_check(
            "npu_ge_backend",
            "failing",
            say(
                "%(library)s is present but %(count)s of the libraries it needs cannot be "
                "found: %(missing)s. Triton cannot load npu_ge models until they are.",
                library=str(library),
                count=len(missing),
                missing=", ".join(missing),
            ),
            joined(advice),
            lines,
        )
    return make_check(
        "npu_ge_backend",
        "ok",
        say(
            "%(library)s is present and all %(count)s libraries it needs resolve (ldd, in this "
            "process's environment).",
            library=str(library),
            count=sum("=>" in line for line in output.splitlines()),
        ),
        details=lines,
    )

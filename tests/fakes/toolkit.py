"""A toolkit-shaped folder of CANN stand-ins, plugged in the way real CANN is.

Point ``ASCEND_TOOLKIT_HOME`` at the toolkit home this creates (or source its ``set_env.sh``)
and put its ``npu-smi`` on ``PATH``: the hub then finds the fake ``atc``, the fake pyACL and
the fake ``npu-smi`` exactly where it looks for the real ones, with no other setting::

    eval "$(.venv/bin/python -m tests.fakes.toolkit /tmp/Ascend)" && make run

The folder, for ``layout="ascend-toolkit"`` (CANN before 8.5) and ``layout="cann"`` (8.5 and
later; docs/cann.md#install-layouts)::

    <root>/ascend-toolkit/set_env.sh              <root>/cann/set_env.sh
    <root>/ascend-toolkit/latest/   (the home)    <root>/cann/                  (the home)
        bin/atc                 runs tests/fakes/atc with this interpreter
        opp/  compiler/  lib64/
        <arch>-linux/ascend_toolkit_install.info    version=<version>
        <arch>-linux/ascend_ops_install.info        (cann layout: the ops package, same version)
        <arch>-linux/data/platform_config/<SoC>.ini one per SoC ATC builds for
        python/site-packages/acl -> tests/fakes/acl  (where CANN installs pyACL)
    <root>/driver/tools/npu-smi                 runs tests/fakes/npu-smi (the driver's tool)
    <root>/driver/version.info, lib64/{driver,common}/   copy=True: what compose mounts
    <root>/standins/tests/fakes/                copy=True: the fakes themselves, so the folder
                                                works mounted elsewhere (a container)

CANN's runtime packages of inference-only hosts, ``layout="nnae"`` and ``layout="nnrt"``: pyACL
and the runtime, no ``atc`` (only the toolkit has ATC; docs/cann.md#install-layouts)::

    <root>/<nnae|nnrt>/set_env.sh               exports ASCEND_<NNAE|NNRT>_HOME, no toolkit home
    <root>/<nnae|nnrt>/latest/      (the home)
        lib64/  opp/  python/site-packages/acl -> tests/fakes/acl
        ascend_nnae_install.info                    (nnae: in the home itself)
        <arch>-linux/ascend_nnrt_install.info       (nnrt: beside the platform files)

A non-root install (CANN's install guide: ``${HOME}/Ascend/ascend-toolkit``, ``${HOME}/Ascend/
cann``) is any of these under ``<user home>/Ascend`` without the driver, which root installs
under ``/usr/local/Ascend``: :func:`make_fake_user_install`.

Importable without pytest: ``make run`` has no test dependencies.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import sys
from pathlib import Path
from typing import Literal

FAKES_DIR = Path(__file__).resolve().parent
#: The fake atc script itself.
FAKE_ATC = FAKES_DIR / "atc"
#: The fake npu-smi script itself.
FAKE_NPU_SMI = FAKES_DIR / "npu-smi"
#: The fake pyACL package.
FAKE_ACL = FAKES_DIR / "acl"
FAKE_CANN_VERSION = "8.0.RC3"
#: The driver version the fake install records (driver/version.info).
FAKE_DRIVER_VERSION = "24.1.rc3"

#: The SoC names a real toolkit ships a platform file for (<arch>-linux/data/platform_config/
#: <name>.ini; hicann/runtime's platform files, docs/atc.md#soc-versions). ATC knows a SoC by
#: its file; the fake atc reads the same folder.
PLATFORM_SOCS = frozenset(
    {"Ascend310", "Ascend310P1", "Ascend310P3", "Ascend310P5", "Ascend310P7", "Ascend310B1",
     "Ascend310B2", "Ascend310B3", "Ascend310B4", "Ascend910A", "Ascend910ProA", "Ascend910ProB",
     "Ascend910PremiumA", "Ascend910B", "Ascend910B1", "Ascend910B2", "Ascend910B2C",
     "Ascend910B3", "Ascend910B4", "Ascend910B4-1", "Ascend910_9391", "Ascend910_9392",
     "Ascend910_9381", "Ascend910_9382", "Ascend910_9372", "Ascend910_9362", "Ascend910_9363"}
)  # fmt: skip

Layout = Literal["cann", "ascend-toolkit", "nnae", "nnrt"]
#: CANN's runtime packages: pyACL and the runtime, no ATC.
RUNTIME_LAYOUTS = ("nnae", "nnrt")
#: Where the fake npu-smi goes, relative to the root (the real one ships with the driver).
NPU_SMI_DIR = ("driver", "tools")

# What CANN's set_env.sh exports, as model_store.compile.atc.environment.atc_environment
# documents it; $home is the toolkit home, found from the script's own place.
_SET_ENV_BODY = """\
export ASCEND_TOOLKIT_HOME="$home"
export ASCEND_HOME_PATH="$home"
export ASCEND_AICPU_PATH="$home"
export ASCEND_OPP_PATH="$home/opp"
export TOOLCHAIN_HOME="$home/toolkit"
tbe="$home/opp/built-in/op_impl/ai_core/tbe"
export PATH="$home/bin:$home/compiler/ccec_compiler/bin${PATH:+:$PATH}"
export LD_LIBRARY_PATH="$home/lib64:$home/lib64/plugin/opskernel:$home/lib64/plugin/nnengine\
:$tbe/op_tiling/lib/linux/$(uname -m)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$home/python/site-packages:$tbe${PYTHONPATH:+:$PYTHONPATH}"
unset tbe home
"""


def toolkit_home(root: Path, layout: Layout = "ascend-toolkit") -> Path:
    """The toolkit home of a fake install under ``root`` (what ``ASCEND_TOOLKIT_HOME`` names;
    for a runtime package, its ``latest/``, what ``ASCEND_NNAE_HOME``/``ASCEND_NNRT_HOME`` name)."""
    return root / "cann" if layout == "cann" else root / layout / "latest"


def set_env_script(root: Path, layout: Layout = "ascend-toolkit") -> Path:
    """Where the layout's ``set_env.sh`` is: ``<root>/cann/set_env.sh`` or
    ``<root>/<ascend-toolkit|nnae|nnrt>/set_env.sh``."""
    return root / layout / "set_env.sh"


def _wrapper(path: Path, script: Path, what: str, python: str) -> None:
    """A shell script running ``script`` with ``python`` (the fakes need numpy and onnx)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f"# {what} (tests/fakes/{script.name}); not the real one.\n"
        f'exec {shlex.quote(python)} {shlex.quote(str(script))} "$@"\n'
    )
    path.chmod(0o755)


def _copy_fakes(root: Path) -> Path:
    """A copy of tests/fakes inside ``root`` (``<root>/standins/tests/fakes``): a folder that
    works wherever it is mounted, as in a container, with no link back to this checkout."""
    target = root / "standins" / "tests" / "fakes"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(FAKES_DIR, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (target.parent / "__init__.py").touch()
    return target


# What a runtime package's set_env.sh exports (CANN's environment variable reference, "after
# installation": ASCEND_NNRT_HOME / ASCEND_NNAE_HOME, LD_LIBRARY_PATH, PYTHONPATH,
# ASCEND_AICPU_PATH, ASCEND_OPP_PATH; nnae also PATH). No ASCEND_TOOLKIT_HOME: it is no toolkit.
_RUNTIME_SET_ENV_BODY = """\
export ASCEND_{var}_HOME="$home"
export ASCEND_AICPU_PATH="$home"
export ASCEND_OPP_PATH="$home/opp"
export LD_LIBRARY_PATH="$home/lib64${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
export PYTHONPATH="$home/python/site-packages${{PYTHONPATH:+:$PYTHONPATH}}"
{path}unset home
"""


def _set_env(home: Path, layout: Layout) -> Path:
    """``set_env.sh`` where the layout has it: in the home (cann), or one level up."""
    script = home / "set_env.sh" if layout == "cann" else home.parent / "set_env.sh"
    body = _SET_ENV_BODY
    if layout in RUNTIME_LAYOUTS:
        path = 'export PATH="$home/bin${PATH:+:$PATH}"\n' if layout == "nnae" else ""
        body = _RUNTIME_SET_ENV_BODY.format(var=layout.upper(), path=path)
    script.write_text(
        "# Fake CANN set_env.sh (tests/fakes/toolkit.py): exports what the real one does.\n"
        "# The home is written in at creation: a script sourced by sh cannot find itself.\n"
        f"home={shlex.quote(str(home))}\n" + body
    )
    return script


def _link_pyacl(home: Path, acl: Path = FAKE_ACL, relative: bool = False) -> None:
    """``python/site-packages/acl`` -> the fake pyACL (a link: the fake finds its samples);
    ``relative`` for a copy inside the install, so the folder can be mounted elsewhere."""
    site = home / "python" / "site-packages"
    site.mkdir(parents=True, exist_ok=True)
    link = site / "acl"
    if link.is_symlink() or link.exists():
        if link.resolve() == acl.resolve():
            return
        link.unlink()
    target = Path(os.path.relpath(acl, site)) if relative else acl
    link.symlink_to(target, target_is_directory=True)


def _version_files(home: Path, layout: Layout, version: str, ops: bool = True) -> None:
    arch = platform.machine()
    info_dir = home / f"{arch}-linux"
    info_dir.mkdir(parents=True, exist_ok=True)
    if layout in RUNTIME_LAYOUTS:  # where public install checks read them (nnae: in the home)
        folder = home if layout == "nnae" else info_dir
        (folder / f"ascend_{layout}_install.info").write_text(
            f"package_name=Ascend-cann-{layout}\nversion={version}\narch={arch}\n"
        )
        return
    (info_dir / "ascend_toolkit_install.info").write_text(
        f"package_name=Ascend-cann-toolkit\nversion={version}\narch={arch}\n"
    )
    if layout == "cann" and ops:  # 8.5 splits the operators into an ops package
        write_ops_info(info_dir, version)
    platforms = info_dir / "data" / "platform_config"
    platforms.mkdir(parents=True, exist_ok=True)
    for soc in PLATFORM_SOCS:
        (platforms / f"{soc}.ini").write_text(f"[version]\nSoC_version={soc}\n")


def write_ops_info(info_dir: Path, version: str) -> None:
    """The 8.5 ops package's version file, as its installer leaves it beside the toolkit's."""
    (info_dir / "ascend_ops_install.info").write_text(
        f"package_name=Ascend-cann-ops\nversion={version}\narch={platform.machine()}\n"
    )


def _driver_files(root: Path) -> None:
    """What the driver package leaves beside npu-smi and compose mounts into Triton: its
    library folders (empty here) and ``version.info``."""
    driver = root / "driver"
    for sub in ("lib64/driver", "lib64/common"):
        (driver / sub).mkdir(parents=True, exist_ok=True)
    (driver / "version.info").write_text(f"Version={FAKE_DRIVER_VERSION}\n")


def make_fake_toolkit(
    root: Path,
    *,
    layout: Layout = "ascend-toolkit",
    version: str = FAKE_CANN_VERSION,
    path: str | None = None,
    pyacl: bool = True,
    copy: bool = False,
    python: str | None = None,
    driver: bool = True,
    ops: bool = True,
) -> dict[str, str]:
    """Creates the fake install under ``root``; returns the environment to add.

    Args:
        root: The install root (``/usr/local/Ascend`` on a real host); created if missing.
        layout: ``"ascend-toolkit"`` (``<root>/ascend-toolkit/latest``) or ``"cann"``
            (``<root>/cann``, with the ops package's version file); or a runtime package,
            ``"nnae"`` or ``"nnrt"`` (``<root>/<package>/latest``: pyACL, no ``atc``).
        version: The CANN version the install-info files record.
        path: The ``PATH`` to extend; this process's when None.
        pyacl: Install the fake pyACL under ``python/site-packages`` (a real toolkit always
            has it; False gives a compile-only toolkit, for tests of "pyACL is missing").
        copy: Copy the fakes into ``<root>/standins`` and point everything there, so the
            folder works where it is mounted (a container) without this checkout.
        python: The interpreter the ``atc`` and ``npu-smi`` wrappers run (one with numpy
            and onnx); this process's when None. A container's, with ``copy``.
        driver: Put the driver's fake ``npu-smi`` (and, with ``copy``, its files) under
            ``root`` too; False for CANN installed apart from the driver (a non-root install).
        ops: For the ``cann`` layout, record the ops package too; False for the toolkit
            alone, as its ``.run`` package leaves it (tests/fakes/cann_run.py).

    Returns:
        ``ASCEND_TOOLKIT_HOME`` (the toolkit home; for a runtime package
        ``ASCEND_NNAE_HOME``/``ASCEND_NNRT_HOME`` instead) and ``PATH`` (npu-smi's folder, then
        ``path``). Nothing else is needed: not ``PYTHONPATH``, ``ATC_PATH`` nor ``FAKE_*``.
    """
    root = Path(root)
    home = toolkit_home(root, layout)
    runtime = layout in RUNTIME_LAYOUTS
    for sub in ("opp", "lib64") if runtime else ("bin", "opp", "compiler", "lib64"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    _version_files(home, layout, version, ops)
    fakes = _copy_fakes(root) if copy else FAKES_DIR
    interpreter = python or sys.executable
    if not runtime:  # only the toolkit has ATC
        _wrapper(home / "bin" / "atc", fakes / FAKE_ATC.name, "Fake ATC for tests", interpreter)
    if pyacl:
        _link_pyacl(home, fakes / FAKE_ACL.name, relative=copy)
    _set_env(home, layout)
    base = os.environ.get("PATH", os.defpath) if path is None else path
    tools = root.joinpath(*NPU_SMI_DIR)
    if driver:
        _wrapper(
            tools / "npu-smi", fakes / FAKE_NPU_SMI.name, "Fake npu-smi for tests", interpreter
        )
        if copy:  # a host's install for containers: compose mounts these into Triton
            _driver_files(root)
    home_var = f"ASCEND_{layout.upper()}_HOME" if runtime else "ASCEND_TOOLKIT_HOME"
    return {
        home_var: str(home),
        "PATH": os.pathsep.join(p for p in (str(tools) if driver else "", base) if p),
    }


def make_fake_user_install(
    user_home: Path, *, layout: Layout = "ascend-toolkit", **options: object
) -> Path:
    """A non-root install: CANN under ``<user_home>/Ascend`` (the install guide's own example,
    ``/home/<user>/Ascend/ascend-toolkit/latest``), no driver there (root installs it under
    ``/usr/local/Ascend``). Returns that ``Ascend`` folder: what ``ASCEND_TOOLKIT_ROOT`` names.
    ``options`` go to :func:`make_fake_toolkit`."""
    root = Path(user_home) / "Ascend"
    make_fake_toolkit(root, layout=layout, driver=False, **options)  # type: ignore[arg-type]
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.toolkit",
        description="Create a folder of CANN stand-ins (tests/fakes) and print the exports "
        "that plug it in, for eval in a shell before `make run`.",
    )
    parser.add_argument("root", type=Path, help="install root, e.g. /tmp/Ascend")
    parser.add_argument(
        "--layout", choices=("ascend-toolkit", "cann", "nnae", "nnrt"), default="ascend-toolkit"
    )
    parser.add_argument("--version", default=FAKE_CANN_VERSION, help="CANN version to record")
    parser.add_argument(
        "--copy", action="store_true", help="copy the fakes in, for a folder mounted elsewhere"
    )
    parser.add_argument("--python", help="interpreter for atc and npu-smi (default: this one)")
    parser.add_argument("--no-driver", action="store_true", help="CANN alone, no driver parts")
    parser.add_argument("--no-ops", action="store_true", help="the toolkit without its ops")
    args = parser.parse_args(argv)
    # PATH is left for the shell to expand ("...:$PATH"), so the lines stay right when eval'd
    # later or in another shell.
    env = make_fake_toolkit(
        args.root.resolve(),
        layout=args.layout,
        version=args.version,
        path="",
        copy=args.copy,
        python=args.python,
        driver=not args.no_driver,
        ops=not args.no_ops,
    )
    for key, value in env.items():
        if key == "PATH":
            print(f'export PATH={shlex.quote(value)}:"$PATH"')
        else:
            print(f"export {key}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

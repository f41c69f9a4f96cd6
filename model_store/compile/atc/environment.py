"""Finding ATC and the CANN toolkit, and the environment ATC runs in.

:func:`cann_status` looks where an operator would point (``ATC_PATH``, ``ASCEND_TOOLKIT_HOME``,
``ASCEND_HOME_PATH``, ``PATH``, then the default installs of both CANN layouts) and says in
plain words what to set when ATC is missing; :func:`atc_environment` gives ATC what CANN's
``set_env.sh`` would export, with the Python interpreter ATC is meant to use
(``ATC_PYTHON``, docs/atc.md#python-environment) first on ``PATH``. Nothing here runs ATC:
the diagnostics page and the targets call these to report whether CANN is usable.

Two install layouts exist (docs/cann.md#install-layouts): CANN 8.5 and later install into
``/usr/local/Ascend/cann`` with its own ``set_env.sh``; older releases into
``/usr/local/Ascend/ascend-toolkit/latest`` with ``set_env.sh`` one level up. Inference-only
hosts may have one of CANN's runtime packages instead, ``nnae`` or ``nnrt``
(``<root>/nnae/latest``, ``<root>/nnrt/latest``, ``set_env.sh`` one level up): pyACL and the
runtime, but no ATC, which only the toolkit has. :func:`cann_status` reports such a host as
"runtime only". CANN may be installed apart from the driver (a non-root install under the
installer's home): ``ASCEND_TOOLKIT_ROOT`` names the folder holding it, ``ASCEND_ROOT`` stays
the driver's.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from model_store.compile.atc.version_files import (
    _toolkit_version,
    _version_file,
    version_in_info_file,
)
from model_store.cpu_quota import usable_cpus
from model_store.errors import ModelStoreError
from model_store.text import Message, Said, as_json, joined, say


class AtcUnavailable(ModelStoreError):
    """ATC (the CANN toolkit) is not installed or cannot be started here."""

    code = "cann_missing"


#: Where CANN and the driver install by default.
DEFAULT_ASCEND_ROOT = "/usr/local/Ascend"
#: The toolkit home of a default install before CANN 8.5 (``ascend-toolkit`` layout).
DEFAULT_TOOLKIT_HOME = "/usr/local/Ascend/ascend-toolkit/latest"
#: The toolkit home of a default install from CANN 8.5 on (``cann`` layout).
DEFAULT_CANN_HOME = "/usr/local/Ascend/cann"
#: The variable naming the Python interpreter ATC should run (docs/atc.md#python-environment).
ATC_PYTHON_VAR = "ATC_PYTHON"
#: The folder holding CANN (cann/, ascend-toolkit/, nnae/, nnrt/) when it is not the driver's
#: ASCEND_ROOT, e.g. a non-root install's /home/<user>/Ascend (docs/cann.md#install-layouts).
TOOLKIT_ROOT_VAR = "ASCEND_TOOLKIT_ROOT"

CannLayout = Literal["cann", "ascend-toolkit", "nnae", "nnrt"]
#: CANN's runtime packages, in the order they are tried: pyACL and the runtime, no ATC
#: (Huawei's CANN install guide, "software packages": only the toolkit converts models).
RUNTIME_PACKAGES: tuple[CannLayout, ...] = ("nnae", "nnrt")
#: How each layout is described to a person.
LAYOUT_NAMES: dict[str, Message] = {
    "cann": say("the CANN 8.5+ layout (<root>/cann, its own set_env.sh)"),
    "ascend-toolkit": say("the pre-8.5 layout (<root>/ascend-toolkit/latest)"),
    "nnae": say("CANN's NNAE engine package (<root>/nnae/latest)"),
    "nnrt": say("CANN's NNRT offline-inference package (<root>/nnrt/latest)"),
}

# Places of the atc binary inside a toolkit home: current layouts put it in
# bin/ (a link into compiler/bin/), older ones (CANN 5.x) in atc/bin/.
_ATC_IN_TOOLKIT = ("bin/atc", "compiler/bin/atc", "atc/bin/atc")

MISSING_HINT = say(
    "set ATC_PATH to the atc binary or ASCEND_TOOLKIT_HOME to the CANN toolkit, "
    "e.g. %(cann_home)s (CANN 8.5 and later) or %(toolkit_home)s",
    cann_home=DEFAULT_CANN_HOME,
    toolkit_home=DEFAULT_TOOLKIT_HOME,
)


@dataclass
class CannStatus:
    """Whether ATC can run here, where it is, and if not, why (in plain words)."""

    available: bool
    atc_path: str | None
    toolkit_home: str | None
    version: str | None
    reason: Said
    layout: CannLayout | None = None
    set_env: str | None = None
    ops_version: str | None = None
    #: The home of a runtime package (nnae/nnrt) found where no ATC is: pyACL, no ATC.
    runtime_home: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The status as JSON-ready data (diagnostics page, API), its reason as a message."""
        return dict(as_json(asdict(self)))


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def default_toolkit_homes(
    ascend_root: Path | str = DEFAULT_ASCEND_ROOT, user_home: str | None = None
) -> list[Path]:
    """The toolkit homes of default installs, newest layout first.

    ``<root>/cann`` (CANN 8.5 and later), then ``<root>/ascend-toolkit/latest``; for a
    non-root install the same under ``$HOME/Ascend`` (docs/cann.md#install-layouts).
    """
    roots = [Path(ascend_root)]
    if user_home:
        roots.append(Path(user_home) / "Ascend")
    return [home for root in roots for home in (root / "cann", root / "ascend-toolkit" / "latest")]


def _install_roots(homes: Sequence[Path]) -> list[Path]:
    """The install roots the toolkit homes ``homes`` lie in (``<root>/cann``,
    ``<root>/ascend-toolkit/latest``), in order, each once."""
    roots = []
    for home in homes:
        if home.name == "cann":
            roots.append(home.parent)
        elif home.parent.name == "ascend-toolkit":
            roots.append(home.parent.parent)
    return list(dict.fromkeys(roots))


def _atc_in_toolkit(root: Path) -> tuple[Path, Path] | None:
    """``(atc, toolkit_home)`` inside ``root``, ``root/latest``, or either layout under it."""
    for home in (root, root / "latest", root / "cann", root / "ascend-toolkit" / "latest"):
        for relative in _ATC_IN_TOOLKIT:
            candidate = home / relative
            if _is_executable(candidate):
                return candidate, home
    return None


def _looks_like_toolkit(path: Path) -> bool:
    if (path / "opp").is_dir() or (path / "compiler").is_dir():
        return True
    return _version_file(path) is not None or (path / "version.cfg").is_file()


def _toolkit_home_of(atc: Path) -> Path | None:
    """The toolkit home that holds ``atc`` (…/latest for …/latest/bin/atc), if it looks like one."""
    for parent in list(atc.parents)[:3]:
        if _looks_like_toolkit(parent):
            return parent
    return None


def cann_layout(home: Path | str | None) -> tuple[CannLayout | None, Path | None]:
    """Which install layout ``home`` belongs to, and the ``set_env.sh`` that sets it up.

    ``ascend-toolkit``: ``.../ascend-toolkit/<version or latest>``, ``set_env.sh`` one level
    up. ``cann``: a home holding its own ``set_env.sh`` (CANN 8.5's ``<root>/cann``).
    ``nnae``, ``nnrt``: the runtime packages, ``.../<package>/latest`` as the pre-8.5 toolkit.
    (None, None) when none is recognisable (a hand-made or partial copy).
    """
    if home is None:
        return None, None
    path = Path(home)
    if path.parent.name == "ascend-toolkit":
        script = path.parent / "set_env.sh"
        return "ascend-toolkit", script if script.is_file() else None
    for package in RUNTIME_PACKAGES:
        if path.parent.name == package:
            script = path.parent / "set_env.sh"
            return package, script if script.is_file() else None
    if (path / "set_env.sh").is_file():
        return "cann", path / "set_env.sh"
    if path.name == "cann":
        return "cann", None
    return None, None


def _found(atc: Path, home: Path | None, how: str) -> CannStatus:
    version = _toolkit_version(home)
    layout, script = cann_layout(home)
    ops_version = _toolkit_version(home, "ascend_ops_install.info")
    reason = (
        say("ATC found at %(atc)s via %(how)s (CANN %(version)s).",
            atc=str(atc), how=how, version=version)
        if version
        else say("ATC found at %(atc)s via %(how)s.", atc=str(atc), how=how)
    )  # fmt: skip
    return CannStatus(
        available=True,
        atc_path=str(atc),
        toolkit_home=str(home) if home is not None else None,
        version=version,
        reason=reason,
        layout=layout,
        set_env=str(script) if script is not None else None,
        ops_version=ops_version,
    )


def cann_status(
    env: Mapping[str, str] | None = None, default_homes: Sequence[Path] | None = None
) -> CannStatus:
    """Finds ATC the way the worker will run it.

    Order: ``ATC_PATH`` (the binary), then ``ASCEND_TOOLKIT_HOME`` and
    ``ASCEND_HOME_PATH`` (a toolkit home, its parent holding ``latest/``, or an install
    root holding ``cann/`` or ``ascend-toolkit/latest/``), then ``atc`` on ``PATH``, then
    the default installs: both layouts under ``ASCEND_TOOLKIT_ROOT`` when it is set, then
    ``default_homes``. An explicit setting that points at nothing is reported as such rather
    than silently skipped.

    Without ATC, a runtime package (``nnae``, then ``nnrt``: ``ASCEND_NNAE_HOME``,
    ``ASCEND_NNRT_HOME``, then ``<root>/<package>/latest`` under the same install roots) makes
    the status "runtime only: pyACL, no ATC": still not available (nothing compiles here), with
    its ``layout``, ``version``, ``set_env`` and ``runtime_home`` filled in.

    Args:
        env: The environment to look in; ``os.environ`` when None.
        default_homes: Default installs to try last; when None, :func:`default_toolkit_homes`
            of ``ASCEND_ROOT`` (else ``/usr/local/Ascend``) and ``$HOME``.

    Returns:
        A :class:`CannStatus`; when ATC is missing its ``reason`` says what to set.
    """
    env = os.environ if env is None else env
    explicit = env.get("ATC_PATH", "").strip()
    if explicit:
        atc = Path(explicit)
        if not atc.is_file():
            return CannStatus(
                False, None, None, None,
                say("ATC_PATH=%(path)s does not exist; %(hint)s.", path=explicit,
                    hint=MISSING_HINT),
            )  # fmt: skip
        if not os.access(atc, os.X_OK):
            return CannStatus(
                False,
                None,
                None,
                None,
                say(
                    "ATC_PATH=%(path)s is not executable; make it executable (chmod +x) or "
                    "%(hint)s.",
                    path=explicit,
                    hint=MISSING_HINT,
                ),
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
            say("%(var)s=%(value)s holds no executable atc (looked at %(places)s and under "
                "latest/)", var=var, value=value, places=places)
        )  # fmt: skip

    on_path = shutil.which("atc", path=env.get("PATH"))
    if on_path:
        atc = Path(on_path)
        return _found(atc, _toolkit_home_of(atc), "PATH")

    if default_homes is None:
        # ASCEND_ROOT: a non-default install root (compose mounts it at the same path).
        root = env.get("ASCEND_ROOT", "").strip() or DEFAULT_ASCEND_ROOT
        default_homes = default_toolkit_homes(root, user_home=env.get("HOME") or None)
    homes = list(default_homes)
    # ASCEND_TOOLKIT_ROOT: CANN apart from the driver's ASCEND_ROOT (a non-root install).
    cann_root = env.get(TOOLKIT_ROOT_VAR, "").strip()
    if cann_root:
        homes = list(dict.fromkeys([*default_toolkit_homes(cann_root), *homes]))
    for home in homes:
        for relative in _ATC_IN_TOOLKIT:
            if _is_executable(home / relative):
                return _found(home / relative, home, f"the default install {home}")

    runtime = _runtime_package(env, _install_roots(homes))
    if runtime is not None:
        return _runtime_only(runtime, problems)
    if cann_root:
        problems.append(
            say("%(var)s=%(value)s holds no CANN (looked for cann/, ascend-toolkit/latest/, "
                "nnae/latest/ and nnrt/latest/)", var=TOOLKIT_ROOT_VAR, value=cann_root)
        )  # fmt: skip
    found_nothing = (
        joined(problems, "; ") if problems else say("ATC (CANN toolkit) is not installed here")
    )
    return CannStatus(
        False, None, None, None,
        say("%(problem)s; %(hint)s.", problem=found_nothing, hint=MISSING_HINT),
    )  # fmt: skip


def _runtime_package(
    env: Mapping[str, str], roots: Sequence[Path]
) -> tuple[CannLayout, Path] | None:
    """The first runtime package (nnae, then nnrt) installed here, as ``(package, home)``:
    named by the variable its ``set_env.sh`` exports (``ASCEND_NNAE_HOME``,
    ``ASCEND_NNRT_HOME``; the home or the folder holding ``latest/``), else under ``roots``
    (``<root>/<package>/latest``, or a ``<root>/<package>/set_env.sh``)."""
    for package in RUNTIME_PACKAGES:
        value = env.get(f"ASCEND_{package.upper()}_HOME", "").strip()
        if value:
            for home in (Path(value) / "latest", Path(value)):
                if home.is_dir():
                    return package, home
    for root in roots:
        for package in RUNTIME_PACKAGES:
            home = root / package / "latest"
            if home.is_dir() or (home.parent / "set_env.sh").is_file():
                return package, home
    return None


def _runtime_only(runtime: tuple[CannLayout, Path], problems: Sequence[Said]) -> CannStatus:
    """The status of a host with a runtime package and no ATC: pyACL can run, nothing compiles."""
    package, home = runtime
    info = f"ascend_{package}_install.info"
    # nnrt keeps it in <home>/<arch>-linux/ as the toolkit does; nnae in <home> itself.
    path = _version_file(home, info) or (home / info if (home / info).is_file() else None)
    layout, script = cann_layout(home)
    note = say(
        "runtime only: pyACL, no ATC (%(package)s at %(home)s)",
        package=LAYOUT_NAMES[package],
        home=str(home),
    )
    return CannStatus(
        available=False,
        atc_path=None,
        toolkit_home=None,
        version=None if path is None else version_in_info_file(path),
        reason=say("%(problem)s; %(hint)s.", problem=joined([*problems, note], "; "),
                   hint=MISSING_HINT),
        layout=layout or package,
        set_env=str(script) if script is not None else None,
        runtime_home=str(home),
    )  # fmt: skip


def require_atc(env: Mapping[str, str] | None = None) -> CannStatus:
    """Like :func:`cann_status`, but raises :class:`AtcUnavailable` when ATC is missing."""
    status = cann_status(env)
    if not status.available:
        raise AtcUnavailable(status.reason)
    return status


def hub_python_dirs(base_env: Mapping[str, str]) -> list[str]:
    """The ``bin`` directories of the hub's own virtualenv (this process's, and VIRTUAL_ENV).

    Empty when the hub does not run from a virtualenv: a system interpreter's directory
    (``/usr/bin``) holds far more than Python and stays on ATC's PATH.
    """
    dirs = []
    if sys.prefix != sys.base_prefix:
        dirs.append(str(Path(sys.prefix) / "bin"))
    venv = base_env.get("VIRTUAL_ENV", "").strip()
    if venv:
        dirs.append(str(Path(venv) / "bin"))
    return list(dict.fromkeys(os.path.normpath(d) for d in dirs))


def atc_python_setting(base_env: Mapping[str, str]) -> tuple[Path | None, str | None]:
    """``ATC_PYTHON`` as ``(interpreter, None)``, ``(None, None)`` when unset, or
    ``(None, why it is unusable)``.

    ATC runs ``python3 -V`` through the shell and loads the matching ``libpython``
    (docs/atc.md#python-environment), so what counts is the ``python3`` in the
    interpreter's directory: it must be there.
    """
    raw = base_env.get(ATC_PYTHON_VAR, "").strip()
    if not raw:
        return None, None
    path = Path(raw)
    fix = (
        f"point {ATC_PYTHON_VAR} at the python3 of an environment that meets CANN's Python "
        "requirements (docs/atc.md#python-environment), or unset it"
    )
    if not path.is_absolute():
        return None, f"{ATC_PYTHON_VAR}={raw} is not an absolute path; {fix}."
    if not _is_executable(path):
        return None, f"{ATC_PYTHON_VAR}={raw} is not an executable file; {fix}."
    if not _is_executable(path.parent / "python3"):
        return None, (
            f"{ATC_PYTHON_VAR}={raw}: ATC runs `python3` from PATH, and {path.parent} has no "
            f"python3; {fix}."
        )
    return path, None


def _without(entries: list[str], dropped: Sequence[str]) -> list[str]:
    gone = set(dropped)
    return [e for e in entries if os.path.normpath(e) not in gone]


def atc_environment(
    status: CannStatus,
    base_env: Mapping[str, str],
    *,
    log: Callable[[str], None] | None = None,
) -> dict[str, str]:
    """The environment ATC runs in: ``base_env`` plus what CANN's ``set_env.sh`` exports.

    Derived from ``status.toolkit_home`` (H): ``PATH`` gains H/bin and the
    ccec compiler; ``LD_LIBRARY_PATH`` gains H/lib64 and its opskernel /
    nnengine plugins and the op-tiling libraries; ``PYTHONPATH`` gains
    H/python/site-packages and the TBE op implementations (ATC compiles
    operators with Python); ``ASCEND_TOOLKIT_HOME``, ``ASCEND_HOME_PATH``,
    ``ASCEND_AICPU_PATH`` (H), ``ASCEND_OPP_PATH`` (H/opp) and
    ``TOOLCHAIN_HOME`` (H/toolkit) are set unless ``base_env`` already sets
    them. Path lists are prepended, as ``set_env.sh`` does, and keep every
    entry ``base_env`` had, except the hub's own virtualenv.

    ATC's operator compiler runs the first ``python3`` on ``PATH``
    (docs/atc.md#python-environment), never the hub's: with ``ATC_PYTHON`` set, that
    interpreter's directory comes first on ``PATH``; without it, the hub's virtualenv
    (:func:`hub_python_dirs`) is taken off ``PATH`` so that the system's ``python3`` is
    found. ``log`` is told which one ATC will use.

    Args:
        status: Where ATC and its toolkit are (from :func:`cann_status`).
        base_env: The environment to start from (usually ``os.environ``).
        log: Gets one line saying which Python ATC will run.

    Returns:
        A new dict; ``base_env`` is not modified.

    Raises:
        AtcUnavailable: ``ATC_PYTHON`` is set but unusable (the message says why).
    """
    interpreter, problem = atc_python_setting(base_env)
    if problem:
        raise AtcUnavailable(problem)
    hub_dirs = hub_python_dirs(base_env)
    env = dict(base_env)
    if hub_dirs and env.get("VIRTUAL_ENV", "").strip():
        env.pop("VIRTUAL_ENV")  # the hub's; it means nothing to ATC's interpreter
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
    if interpreter is not None:
        front["PATH"].insert(0, interpreter.parent)
    for key, additions in front.items():
        existing = [p for p in env.get(key, "").split(os.pathsep) if p]
        if key == "PATH":
            existing = _without(existing, hub_dirs)
        added = [str(p) for p in additions]
        merged = list(dict.fromkeys([*added, *existing]))
        if merged:
            env[key] = os.pathsep.join(merged)
        elif key in env:
            env[key] = ""
    devlib = stub_driver_dir(status, env)
    if devlib is not None:
        # Appended, as CANN's set_env.sh does: never in front of a real driver's libraries.
        libraries = [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(dict.fromkeys([*libraries, str(devlib)]))
    env.setdefault("TE_PARALLEL_COMPILER", str(parallel_compilers(env)))
    if log is not None:
        log(_python_note(interpreter, hub_dirs, env.get("PATH", "")))
        if devlib is not None:
            log(f"No NPU driver on this host: ATC gets the toolkit's stub libraries ({devlib}).")
    return env


#: The driver's HAL, whose presence tells a host with the NPU driver from one without.
_DRIVER_HAL = "libascend_hal.so"


def has_npu_driver(env: Mapping[str, str], ascend_root: Path | None = None) -> bool:
    """Whether this host has the NPU driver's libraries, tested as CANN's ``set_env.sh`` tests
    it (hicann/runtime ``scripts/package/runtime/set_env.sh``): ``libascend_hal.so`` in a
    driver folder on ``LD_LIBRARY_PATH``, under ``<root>/driver/lib64`` (the root
    ``/etc/ascend_install.info`` names, or ``ASCEND_ROOT``), or in the linker's cache."""
    folders = [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if "driver" in p]
    roots = [ascend_root or Path(env.get("ASCEND_ROOT") or "/usr/local/Ascend")]
    with contextlib.suppress(OSError):
        for line in Path("/etc/ascend_install.info").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip().lower() == "driver_install_path_param" and value.strip():
                roots.append(Path(value.strip()))
    folders += [str(root / "driver" / "lib64" / sub) for root in roots for sub in ("", "driver")]
    if any(Path(folder, _DRIVER_HAL).is_file() for folder in folders):
        return True
    with contextlib.suppress(OSError, ValueError):
        cache = Path("/etc/ld.so.cache").read_bytes()
        return _DRIVER_HAL.encode() in cache
    return False


def stub_driver_dir(status: CannStatus, env: Mapping[str, str]) -> Path | None:
    """``<toolkit>/<arch>-linux/devlib`` for a compile-only host, else None.

    On a machine without the NPU driver, ATC needs the toolkit's stub driver libraries on
    ``LD_LIBRARY_PATH`` (hicann/ge ``environment_setup.md``); on a host with the driver they
    must stay off it, since the stub ``libascend_hal.so`` would shadow the real one and pyACL
    would fail to initialise. Only the ATC environment gets it, never pyACL's or Triton's."""
    if not status.toolkit_home or has_npu_driver(env):
        return None
    home = Path(status.toolkit_home)
    for candidate in (home / f"{platform.machine()}-linux" / "devlib", home / "devlib"):
        if candidate.is_dir():
            return candidate
    return None


#: The ATC option upstream caps at 32 (hicann/ge environment_setup.md).
MAX_PARALLEL_COMPILERS = 32


def parallel_compilers(env: Mapping[str, str], cores: int | None = None) -> int:
    """``TE_PARALLEL_COMPILER`` for one ATC run: upstream's advice, CPU cores x 80 % / NPUs
    (hicann/ge ``environment_setup.md``; default 8, 1 to 32), divided further by the builds
    one host runs at once (``ATC_MAX_PARALLEL_BUILDS``), so that several ATC runs together
    stay within the cores. The cores are the ones this process may use (its affinity mask and
    its container's CPU quota, ``model_store.cpu_quota``), not the host's. An explicit
    ``TE_PARALLEL_COMPILER`` in the environment wins."""
    cores = cores or usable_cpus()
    npus = max(1, _int(env.get("ASCEND_NPU_COUNT"), 1))
    builds = max(1, _int(env.get("ATC_MAX_PARALLEL_BUILDS"), 1))
    return max(1, min(MAX_PARALLEL_COMPILERS, int(cores * 0.8 / npus / builds)))


def _int(text: str | None, default: int) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        return default


def _python_note(interpreter: Path | None, hub_dirs: list[str], path: str) -> str:
    """The log line saying which ``python3`` ATC's operator compiler will run."""
    if interpreter is not None:
        return (
            f"ATC's Python: {interpreter.parent / 'python3'} ({ATC_PYTHON_VAR}), first on "
            "ATC's PATH."
        )
    found = shutil.which("python3", path=path) or shutil.which("python", path=path)
    dropped = ""
    if hub_dirs:
        dropped = f"; the hub's virtualenv ({', '.join(hub_dirs)}) is kept off ATC's PATH"
    uses = (
        f"ATC will use {found}, the first python3 on its PATH"
        if found
        else "no python3 is on ATC's PATH, so ATC will fail with E40001"
    )
    return (
        f"ATC's Python: {ATC_PYTHON_VAR} is not set; {uses}{dropped}. Set {ATC_PYTHON_VAR} to "
        "an interpreter that meets CANN's requirements (docs/atc.md#python-environment)."
    )

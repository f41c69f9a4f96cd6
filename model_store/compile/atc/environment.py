"""Finding ATC and the CANN toolkit, and the environment ATC runs in.

:func:`cann_status` looks where an operator would point (``ATC_PATH``, ``ASCEND_TOOLKIT_HOME``,
``ASCEND_HOME_PATH``, ``PATH``) and says in plain words what to set when ATC is missing;
:func:`atc_environment` gives ATC what CANN's ``set_env.sh`` would export. Nothing here runs
ATC: the diagnostics page and the targets call these to report whether CANN is usable.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from model_store.errors import ModelStoreError


class AtcUnavailable(ModelStoreError):
    """ATC (the CANN toolkit) is not installed or cannot be started here."""

    code = "cann_missing"


#: Where ``set_env.sh`` points ASCEND_TOOLKIT_HOME on a default install.
DEFAULT_TOOLKIT_HOME = "/usr/local/Ascend/ascend-toolkit/latest"

# Places of the atc binary inside a toolkit home: current layouts put it in
# bin/ (a link into compiler/bin/), older ones (CANN 5.x) in atc/bin/.
_ATC_IN_TOOLKIT = ("bin/atc", "compiler/bin/atc", "atc/bin/atc")

MISSING_HINT = (
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
                False, None, None, None, f"ATC_PATH={explicit} does not exist; {MISSING_HINT}."
            )
        if not os.access(atc, os.X_OK):
            return CannStatus(
                False,
                None,
                None,
                None,
                f"ATC_PATH={explicit} is not executable; make it executable (chmod +x) "
                f"or {MISSING_HINT}.",
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
    return CannStatus(False, None, None, None, f"{found_nothing}; {MISSING_HINT}.")


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

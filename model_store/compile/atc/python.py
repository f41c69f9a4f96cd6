"""ATC's Python: the interpreter its operator compiler embeds, and whether it meets CANN's needs.

ATC runs ``python3 -V`` from ``PATH`` (3.7 or later, else ``E40002``), loads the matching
``libpython3.Y.so.1.0`` (else ``E40001``) and imports TBE with its third-party packages
into it (a failed import is ``E40020``, or ``EC0010``) (docs/atc.md#python-environment).
:data:`PROBE_SCRIPT` is run *by that interpreter* and prints what it has;
:func:`assess_probe` compares that with what CANN's install guides document, per release.
Running the script is the caller's job (diagnostics, through :mod:`model_store.spawn`).
The verdict's sentences are :func:`~model_store.text.say` messages, so the Diagnostics page can
show them in the reader's language.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from model_store.text import Message, Said, joined, say

#: The packages CANN's install guides list for every release (distribution, module to import).
ATC_PYTHON_PACKAGES: tuple[tuple[str, str], ...] = (
    ("numpy", "numpy"),
    ("protobuf", "google.protobuf"),
    ("decorator", "decorator"),
    ("sympy", "sympy"),
    ("scipy", "scipy"),
    ("attrs", "attr"),
    ("psutil", "psutil"),
    ("cffi", "cffi"),
)
#: ATC refuses older interpreters with E40002.
MIN_PYTHON = (3, 7)
#: Newest Python each release's install guide documents; releases not listed: the newest.
NEWEST_PYTHON = {"8.0": (3, 11), "8.5": (3, 13), "9.0": (3, 13)}
_NEWEST_DOCUMENTED = (3, 13)

#: Run as ``<python> -c PROBE_SCRIPT``; prints one JSON line. Written for any Python 3.
PROBE_SCRIPT = """
import json, os, sys, warnings
warnings.simplefilter("ignore")
out = {"version": list(sys.version_info[:3]), "executable": sys.executable, "packages": {}}
for dist, module in PACKAGES:
    try:
        __import__(module)
    except Exception as exc:
        out["packages"][dist] = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)}
        continue
    version = None
    try:
        from importlib import metadata
        version = metadata.version(dist)
    except Exception:
        version = getattr(sys.modules[module], "__version__", None)
    out["packages"][dist] = {"ok": True, "version": version}
minor = sys.version_info[1]
name = "libpython%d.%d%s.so.1.0" % (sys.version_info[0], minor, "" if minor > 7 else "m")
loaded = None
config = prefix = None
try:
    import ctypes, shutil, subprocess
    # As ATC does: the prefix that the python3-config first on PATH gives, then the soname
    # through the library path and the linker's cache.
    config = shutil.which("python3-config")
    if config:
        prefix = subprocess.run([config, "--prefix"], capture_output=True, text=True,
                                timeout=30).stdout.strip() or None
    candidates = ([os.path.join(prefix, "lib", name)] if prefix else []) + [name]
    for candidate in candidates:
        try:
            ctypes.CDLL(candidate)
        except OSError:
            continue
        loaded = candidate
        break
except Exception:
    pass
out["libpython"] = {"name": name, "loaded": loaded, "python3_config": config, "prefix": prefix}
print("ATC-PYTHON-PROBE " + json.dumps(out))
""".replace("PACKAGES", repr(ATC_PYTHON_PACKAGES), 1)

_PROBE_PREFIX = "ATC-PYTHON-PROBE "

Verdict = Literal["ok", "warning", "failing"]


@dataclass
class PythonAssessment:
    """What the probe found, judged against CANN's documented requirements.

    Attributes:
        state: ``ok``, ``warning`` (outside what CANN documents) or ``failing`` (ATC fails).
        summary: One sentence: the interpreter, its version, and the verdict.
        problems: Each problem, with the ATC code it leads to when there is one.
        advice: What to do, or ``""``.
        details: One line per package and for libpython.
    """

    state: Verdict
    summary: Said
    problems: list[Said] = field(default_factory=list)
    advice: Said = ""
    details: list[str] = field(default_factory=list)


def parse_probe(output: str) -> dict[str, Any] | None:
    """The probe's report from the interpreter's output, or None when it printed none."""
    for line in reversed(output.splitlines()):
        if line.startswith(_PROBE_PREFIX):
            try:
                data = json.loads(line[len(_PROBE_PREFIX) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _numbers(version: str | None) -> tuple[int, ...]:
    """``"1.26.4"`` -> ``(1, 26, 4)``; leading numeric parts only (``"3.20.3rc1"`` -> 3,20,3)."""
    parts = []
    for piece in (version or "").split("."):
        match = re.match(r"[0-9]+", piece)
        if match is None:
            break
        parts.append(int(match.group()))
    return tuple(parts)


def _release(cann_version: str | None) -> str | None:
    """``"8.5.0"`` / ``"8.5.RC1"`` -> ``"8.5"``; None when unknown."""
    match = re.match(r"([0-9]+)\.([0-9]+)", cann_version or "")
    return f"{match.group(1)}.{match.group(2)}" if match else None


def _package_warnings(
    packages: Mapping[str, Any], python: tuple[int, ...], release: str | None
) -> list[Message]:
    """Versions outside the documented pins (docs/atc.md#python-environment)."""
    found = []
    protobuf = packages.get("protobuf") or {}
    if protobuf.get("ok") and _numbers(protobuf.get("version"))[:2] != (3, 20):
        found.append(
            say(
                "protobuf %(version)s is installed; every CANN release documents protobuf 3.20.x",
                version=protobuf.get("version"),
            )
        )
    numpy = packages.get("numpy") or {}
    have = _numbers(numpy.get("version"))
    if numpy.get("ok") and have:
        limit = None
        if release == "8.0" and have[:2] > (1, 24):
            limit = say("CANN 8.0 documents numpy 1.19.2 to 1.24")
        elif release == "8.5" and python[:2] < (3, 13) and have[:1] >= (2,):
            limit = say("CANN 8.5 documents numpy below 2.0 on Python below 3.13")
        elif have[:2] < (1, 19):
            limit = say("CANN documents numpy 1.19.2 or later")
        if limit:
            found.append(
                say(
                    "numpy %(version)s is installed; %(limit)s",
                    version=numpy.get("version"),
                    limit=limit,
                )
            )
    return found


def assess_probe(
    report: Mapping[str, Any], cann_version: str | None, where: Said
) -> PythonAssessment:
    """Judges a probe report against CANN's documented requirements.

    Args:
        report: From :func:`parse_probe`.
        cann_version: The toolkit's version (``CannStatus.version``), for the per-release
            ranges; None uses the newest documented ones.
        where: How the interpreter was chosen, for the summary (e.g. ``"ATC_PYTHON"``).
    """
    version = tuple(int(v) for v in report.get("version") or [] if isinstance(v, int))
    shown: Said = ".".join(map(str, version)) or say("unknown")
    executable = report.get("executable") or "?"
    packages: Mapping[str, Any] = report.get("packages") or {}
    failing: list[Message] = []
    warnings: list[Message] = []
    details = []
    for dist, _ in ATC_PYTHON_PACKAGES:
        entry = packages.get(dist) or {"ok": False, "error": "not probed"}
        if entry.get("ok"):
            details.append(f"{dist} {entry.get('version') or '(version unknown)'}")
        else:
            details.append(f"{dist} missing: {entry.get('error')}")
    missing = [d for d, _ in ATC_PYTHON_PACKAGES if not (packages.get(d) or {}).get("ok")]
    if version[:2] < MIN_PYTHON or version[:1] != (3,):
        failing.append(
            say("Python %(version)s is older than 3.7, which ATC refuses (E40002)", version=shown)
            if version[:1] == (3,)
            else say("Python %(version)s is not Python 3 (ATC fails with E40002)", version=shown)
        )
    if missing:
        failing.append(
            say(
                "%(packages)s cannot be imported (ATC's operator compiler fails with E40020 or "
                "EC0010)",
                packages=", ".join(missing),
            )
        )
    libpython = report.get("libpython") or {}
    if libpython.get("python3_config"):
        details.append(
            f"python3-config on ATC's PATH: {libpython['python3_config']} "
            f"(prefix {libpython.get('prefix') or '?'})"
        )
    elif "python3_config" in libpython:
        details.append("no python3-config on ATC's PATH: ATC loads libpython by its soname")
    if libpython.get("loaded"):
        details.append(f"{libpython.get('name')} loads ({libpython.get('loaded')})")
    else:
        details.append(f"{libpython.get('name') or 'libpython'} cannot be loaded")
        failing.append(
            say(
                "%(library)s cannot be loaded, from python3-config's prefix/lib or the library "
                "path (ATC fails with E40001: it needs a shared-library build)",
                library=libpython.get("name") or say("its libpython"),
            )
        )
    release = _release(cann_version)
    newest = NEWEST_PYTHON.get(release or "", _NEWEST_DOCUMENTED)
    if release and _numbers(release) < (8, 0):
        # Before 8.0 (Ascend 310 hosts run such releases) the documented range is older and
        # not read here: say so instead of judging by the newest releases' range.
        warnings.append(
            say(
                "CANN %(release)s is older than the releases whose Python range the hub knows "
                "(8.0 and later); check its install guide for the Python it supports",
                release=release,
            )
        )
    elif version[:1] == (3,) and version[:2] > newest:
        label: Said = f"CANN {release}" if release else say("current CANN releases")
        warnings.append(
            say(
                "Python %(version)s is newer than the range documented for %(label)s "
                "(%(oldest)s to %(newest)s)",
                version=shown,
                label=label,
                oldest=".".join(map(str, MIN_PYTHON)),
                newest=".".join(map(str, newest)),
            )
        )
    warnings += _package_warnings(packages, version, release)

    summary_start = say(
        "ATC's Python is %(executable)s (%(where)s), Python %(version)s",
        executable=executable,
        where=where,
        version=shown,
    )
    advice = say(
        "Give ATC an interpreter of its own that meets CANN's requirements: a shared-library "
        "Python 3.7 or later within the range your CANN release documents, with numpy, "
        "protobuf 3.20.x, decorator, sympy, scipy, attrs, psutil and cffi installed (e.g. a "
        "conda or virtual environment), and set ATC_PYTHON to its python3; then restart the "
        "worker (docs/atc.md#python-environment)."
    )
    if failing:
        return PythonAssessment(
            "failing",
            say("%(start)s: %(problems)s.", start=summary_start, problems=joined(failing, "; ")),
            [*failing, *warnings],
            advice,
            details,
        )
    if warnings:
        return PythonAssessment(
            "warning",
            say(
                "%(start)s; it has every package ATC needs, but %(problems)s.",
                start=summary_start,
                problems=joined(warnings, "; "),
            ),
            list(warnings),
            advice,
            details,
        )
    return PythonAssessment(
        "ok",
        say(
            "%(start)s, with every package CANN documents and a loadable libpython.",
            start=summary_start,
        ),
        [],
        "",
        details,
    )

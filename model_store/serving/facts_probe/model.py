"""What the Triton that serves can see, reported from inside it (docs/ascend.md#the-serving-side).

This file is not imported by the hub: it is copied as ``model.py`` into a temporary
``_trial-serving-facts-*`` model and loaded into the Triton the hub serves through, where the
Python backend's stub runs it. At ``initialize`` it collects, as raw evidence, what only that
process can see: which backends that Triton has, the CANN installed beside it (its version
files), whether pyACL imports there and what it says (SoC, device count), ``npu-smi info`` as
that container's user, the device nodes' modes and the stub's own Python. Every request
answers the same JSON. The hub parses the evidence with its own code
(:mod:`model_store.serving.facts`), so this stays small.

Written for the oldest stub the hub may meet (Python 3.8: no ``match``, no ``zip(strict=)``),
with the standard library, numpy and the backend's own utilities only. Nothing here writes a
file or changes the device; pyACL is initialised and finalised in this stub process alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

#: Bytes kept of any one file or command output (version files are a few hundred bytes; an
#: npu-smi table of eight chips about 5 KB).
MAX_TEXT = 64 * 1024
NPU_SMI_SECONDS = 15.0
DEFAULT_BACKENDS = "/opt/tritonserver/backends"
CANN_HOMES = ("/usr/local/Ascend/cann", "/usr/local/Ascend/ascend-toolkit/latest")
CANN_FILES = (
    "version.cfg",
    "*-linux/ascend_toolkit_install.info",
    "*-linux/ascend_ops_install.info",
    "compiler/version.info",
)
DEVICE_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _read(path: str | Path, limit: int = MAX_TEXT) -> str | None:
    try:
        with Path(path).open("rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _parent(pid: int) -> int | None:
    text = _read(f"/proc/{pid}/stat", 4096)
    try:
        return int((text or "").rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return None


def _tritonserver_argv() -> list[str]:
    """tritonserver's command line: the stub's parent (or a parent of it)."""
    pid: int | None = os.getppid()
    for _ in range(6):
        if not pid or pid <= 1:
            break
        argv = [a for a in (_read(f"/proc/{pid}/cmdline") or "").split("\0") if a]
        if argv and Path(argv[0]).name.startswith("tritonserver"):
            return argv
        pid = _parent(pid)
    return []


def _backend_dir(argv: list[str]) -> str:
    for index, arg in enumerate(argv):
        if arg.startswith("--backend-directory="):
            return arg.split("=", 1)[1]
        if arg == "--backend-directory" and index + 1 < len(argv):
            return argv[index + 1]
    home = os.environ.get("TRITON_HOME_PATH")
    return str(Path(home) / "backends") if home else DEFAULT_BACKENDS


def _backends(directory: str) -> dict[str, str]:
    """Each backend folder and what makes it one: a library, or a Python-based model.py."""
    found = {}
    try:
        folders = sorted(p for p in Path(directory).iterdir() if p.is_dir())
    except OSError as exc:
        return {"error": str(exc)}
    for folder in folders:
        if (folder / f"libtriton_{folder.name}.so").is_file():
            found[folder.name] = "library"
        elif (folder / "model.py").is_file():
            found[folder.name] = "python"
        else:
            found[folder.name] = "folder"
    return found


def _cann() -> list[dict[str, object]]:
    """The version files of the CANN homes this process would use, first the one it was given."""
    homes: list[str] = []
    given = (os.environ.get("ASCEND_TOOLKIT_HOME"), os.environ.get("ASCEND_HOME_PATH"))
    for home in (*given, *CANN_HOMES):
        if home and home not in homes and Path(home).is_dir():
            homes.append(home)
    found: list[dict[str, object]] = []
    for home in homes:
        files: dict[str, str] = {}
        for pattern in CANN_FILES:
            for path in sorted(Path(home).glob(pattern)):
                text = _read(path, 8192)
                if text is not None:
                    files[str(path.relative_to(home))] = text
        found.append({"home": home, "files": files})
    return found


def _pyacl_places() -> list[str]:
    """Where pyACL may be when ``import acl`` fails: the stub's interpreter is isolated (it
    ignores PYTHONPATH, observed in the Triton the hub embeds), so the hub's acl backend reads
    PYTHONPATH and the toolkit homes by hand; the probe looks where that backend looks, plus
    the pre-8.0 layout ``<home>/pyACL/python/site-packages``."""
    places = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for home in [h.get("home") for h in _cann()] + [
        str(Path(os.environ.get("HOME", "/nonexistent"), "Ascend", layout))
        for layout in ("cann", "ascend-toolkit/latest")
    ]:
        for relative in ("python/site-packages", "pyACL/python/site-packages"):
            places.append(str(Path(str(home), relative)))
    return [p for p in dict.fromkeys(places) if p not in sys.path and Path(p).is_dir()]


def _pyacl() -> dict[str, object]:
    """pyACL as this stub sees it: importable, then init, SoC and device count, finalize."""
    facts: dict[str, object] = {}
    try:
        import acl
    except ImportError:
        places = _pyacl_places()
        sys.path.extend(places)
        try:
            import acl
        except Exception as exc:
            return {"importable": False, "error": _error(exc), "looked_in": places}
        facts["found_by_search"] = True
    except Exception as exc:
        return {"importable": False, "error": _error(exc)}
    facts.update(importable=True, file=getattr(acl, "__file__", None))  # 3.8: no |=
    try:
        facts["init"] = acl.init()
        facts["soc"] = acl.get_soc_name()
        count, ret = acl.rt.get_device_count()
        facts["device_count"], facts["device_count_ret"] = count, ret
    except Exception as exc:
        facts["error"] = _error(exc)
    finally:
        with contextlib.suppress(Exception):  # nothing to add about a finalize after a failure
            acl.finalize()
    return facts


def _npu_smi() -> dict[str, object]:
    # npu-smi must not run twice at once on a host (Huawei's npu-smi reference, npusmi_003 and
    # npusmi_006), so this takes the hub's host-wide npu-smi lock: an exclusive flock on
    # NPU_SMI_LOCK_FILE (default /tmp/triton-model-hub-npu-smi.lock), waiting at most
    # NPU_SMI_SECONDS. A copy of model_store/devices/npu_smi_lock.py, because this file runs
    # inside Triton's stub, where model_store cannot be imported; the imports stay in this
    # function so the rest of the file is as it was. A lock file that cannot be used (a
    # symlink, which is never followed, a folder, no permission) does not stop npu-smi.
    import errno
    import fcntl

    program = shutil.which("npu-smi")
    for candidate in ("/usr/local/sbin/npu-smi", "/usr/local/bin/npu-smi"):
        if program is None and os.access(candidate, os.X_OK):
            program = candidate
    if program is None:
        return {"path": None}
    lock_path = os.environ.get("NPU_SMI_LOCK_FILE", "").strip()
    lock_path = lock_path or "/tmp/triton-model-hub-npu-smi.lock"  # noqa: S108 (O_NOFOLLOW)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    lock = -1
    lock_error = None
    try:
        try:  # an existing file without O_CREAT: fs.protected_regular refuses it in /tmp
            lock = os.open(lock_path, flags)
        except FileNotFoundError:
            try:
                lock = os.open(lock_path, flags | os.O_CREAT | os.O_EXCL, 0o666)
                with contextlib.suppress(OSError):  # 0666 whatever the umask: root and 10001
                    os.fchmod(lock, 0o666)
            except FileExistsError:
                lock = os.open(lock_path, flags)
        if not stat.S_ISREG(os.fstat(lock).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        deadline = time.monotonic() + NPU_SMI_SECONDS
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(lock)
                    return {
                        "path": program,
                        "error": "npu-smi is busy (another process of this host is using it)",
                    }
                time.sleep(0.02)
    except OSError as exc:
        lock_error = f"{lock_path}: {_error(exc)}"
        if lock >= 0:
            os.close(lock)
        lock = -1
    try:
        found = _run_npu_smi(program, ["info"])
        # The chip-to-logical-id map: the HBM layouts (910, 910B) print no device id in the
        # table. The hub reads both with its own parser; one lock holds for both calls.
        if found.get("returncode") == 0:
            found["mapping"] = _run_npu_smi(program, ["info", "-m"])
    finally:
        if lock >= 0:
            os.close(lock)  # releases the lock
    if lock_error:
        found["lock_error"] = lock_error
    return found


def _run_npu_smi(program: str, args: list[str]) -> dict[str, object]:
    try:
        done = subprocess.run(
            [program, *args], capture_output=True, timeout=NPU_SMI_SECONDS, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"path": program, "error": _error(exc)}
    return {
        "path": program,
        "returncode": done.returncode,
        "stdout": done.stdout[:MAX_TEXT].decode("utf-8", "replace"),
        "stderr": done.stderr[-4096:].decode("utf-8", "replace"),
    }


def _device_nodes() -> list[dict[str, object]]:
    dev = Path("/dev")
    paths = [dev / name for name in DEVICE_NODES]
    # davinciN, and a virtual NPU's vdavinciN where nothing renamed it (docs/npu-smi.md).
    paths += sorted(p for p in dev.glob("*davinci*") if re.fullmatch(r"v?davinci\d+", p.name))
    nodes = []
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            continue
        nodes.append({
            "path": str(path),
            "mode": stat.filemode(info.st_mode),
            "uid": info.st_uid,
            "gid": info.st_gid,
            "openable": os.access(path, os.R_OK | os.W_OK),
        })  # fmt: skip
    return nodes


def collect() -> dict[str, object]:
    argv = _tritonserver_argv()
    backend_dir = _backend_dir(argv)
    return {
        "probe": 1,
        "collected_at": time.time(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "uid": os.getuid(),
        "groups": sorted(set(os.getgroups())),
        "tritonserver_found": bool(argv),
        "backend_dir": backend_dir,
        "backends": _backends(backend_dir),
        "cann": _cann(),
        "pyacl": _pyacl(),
        "npu_smi": _npu_smi(),
        "device_nodes": _device_nodes(),
        "ld_library_path": os.environ.get("LD_LIBRARY_PATH", ""),
        "visible_devices": os.environ.get("ASCEND_RT_VISIBLE_DEVICES"),
        # An isolated stub ignores PYTHONPATH and other PYTHON* variables.
        "isolated": bool(sys.flags.isolated or sys.flags.ignore_environment),
    }


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        try:
            facts = collect()
        except Exception as exc:  # the answer says what broke instead of failing the load
            facts = {"probe": 1, "error": _error(exc)}
        self.answer = json.dumps(facts, sort_keys=True).encode("utf-8")

    def execute(self, requests: list[object]) -> list[object]:
        out = np.array([self.answer], dtype=np.object_)
        return [
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("FACTS", out)])
            for _ in requests
        ]

    def finalize(self) -> None:
        pass

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

import glob
import json
import os
import platform
import shutil
import stat
import subprocess
import time

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

#: Bytes kept of any one file or command output (version files are a few hundred bytes; an
#: npu-smi table of eight chips about 5 KB).
MAX_TEXT = 64 * 1024
NPU_SMI_SECONDS = 15.0
DEFAULT_BACKENDS = "/opt/tritonserver/backends"
CANN_HOMES = ("/usr/local/Ascend/cann", "/usr/local/Ascend/ascend-toolkit/latest")
DEVICE_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")


def _read(path, limit=MAX_TEXT):
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def _parent(pid):
    text = _read("/proc/%d/stat" % pid, 4096)
    if not text:
        return None
    try:
        return int(text.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return None


def _tritonserver_argv():
    """tritonserver's command line: the stub's parent (or a parent of it)."""
    pid = os.getppid()
    for _ in range(6):
        if not pid or pid <= 1:
            break
        raw = _read("/proc/%d/cmdline" % pid)
        argv = [a for a in (raw or "").split("\0") if a]
        if argv and os.path.basename(argv[0]).startswith("tritonserver"):
            return argv
        pid = _parent(pid)
    return []


def _backend_dir(argv):
    for index, arg in enumerate(argv):
        if arg.startswith("--backend-directory="):
            return arg.split("=", 1)[1]
        if arg == "--backend-directory" and index + 1 < len(argv):
            return argv[index + 1]
    home = os.environ.get("TRITON_HOME_PATH")
    return os.path.join(home, "backends") if home else DEFAULT_BACKENDS


def _backends(directory):
    """Each backend folder and what makes it one: a library, or a Python-based model.py."""
    found = {}
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        return {"error": str(exc)}
    for name in names:
        folder = os.path.join(directory, name)
        if not os.path.isdir(folder):
            continue
        if os.path.isfile(os.path.join(folder, "libtriton_%s.so" % name)):
            found[name] = "library"
        elif os.path.isfile(os.path.join(folder, "model.py")):
            found[name] = "python"
        else:
            found[name] = "folder"
    return found


def _cann():
    """The version files of the CANN homes this process would use, first the one it was given."""
    homes = []
    for home in (os.environ.get("ASCEND_TOOLKIT_HOME"), os.environ.get("ASCEND_HOME_PATH"),
                 *CANN_HOMES):  # fmt: skip
        if home and home not in homes and os.path.isdir(home):
            homes.append(home)
    found = []
    for home in homes:
        files = {}
        patterns = ("version.cfg", "*-linux/ascend_toolkit_install.info",
                    "*-linux/ascend_ops_install.info", "compiler/version.info")  # fmt: skip
        for pattern in patterns:
            for path in sorted(glob.glob(os.path.join(home, pattern))):
                text = _read(path, 8192)
                if text is not None:
                    files[os.path.relpath(path, home)] = text
        found.append({"home": home, "files": files})
    return found


def _pyacl():
    """pyACL as this stub sees it: importable, then init, SoC and device count, finalize."""
    try:
        import acl  # type: ignore[import-not-found]
    except Exception as exc:
        return {"importable": False, "error": "%s: %s" % (type(exc).__name__, exc)}
    facts = {"importable": True, "file": getattr(acl, "__file__", None)}
    try:
        facts["init"] = acl.init()
        facts["soc"] = acl.get_soc_name()
        count, ret = acl.rt.get_device_count()
        facts["device_count"], facts["device_count_ret"] = count, ret
    except Exception as exc:
        facts["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        try:
            acl.finalize()
        except Exception:  # noqa: S110 - nothing to report about a finalize after a failure
            pass
    return facts


def _npu_smi():
    program = shutil.which("npu-smi")
    for candidate in ("/usr/local/sbin/npu-smi", "/usr/local/bin/npu-smi"):
        if program is None and os.access(candidate, os.X_OK):
            program = candidate
    if program is None:
        return {"path": None}
    try:
        done = subprocess.run(  # noqa: S603 - a fixed argument list
            [program, "info"], capture_output=True, timeout=NPU_SMI_SECONDS, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"path": program, "error": "%s: %s" % (type(exc).__name__, exc)}
    return {
        "path": program,
        "returncode": done.returncode,
        "stdout": done.stdout[:MAX_TEXT].decode("utf-8", "replace"),
        "stderr": done.stderr[-4096:].decode("utf-8", "replace"),
    }


def _device_nodes():
    nodes = []
    names = list(DEVICE_NODES) + sorted(
        os.path.basename(p) for p in glob.glob("/dev/davinci[0-9]*")
    )
    for name in names:
        path = os.path.join("/dev", name)
        try:
            info = os.stat(path)
        except OSError:
            continue
        nodes.append({
            "path": path,
            "mode": stat.filemode(info.st_mode),
            "uid": info.st_uid,
            "gid": info.st_gid,
            "openable": os.access(path, os.R_OK | os.W_OK),
        })  # fmt: skip
    return nodes


def collect():
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
    }


class TritonPythonModel:
    def initialize(self, args):
        try:
            facts = collect()
        except Exception as exc:  # the answer says what broke instead of failing the load
            facts = {"probe": 1, "error": "%s: %s" % (type(exc).__name__, exc)}
        self.answer = json.dumps(facts, sort_keys=True).encode("utf-8")

    def execute(self, requests):
        out = np.array([self.answer], dtype=np.object_)
        return [
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("FACTS", out)])
            for _ in requests
        ]

    def finalize(self):
        pass

"""Ascend device nodes as a stock driver makes them, for tests (not an NPU).

A real host has ``/dev/davinciN`` (one per chip), ``/dev/davinci_manager``, ``/dev/devmm_svm``
and ``/dev/hisi_hdc``, each ``crw-rw----`` owned by the driver's running user and group
(``HwHiAiUser`` by default; tests/fakes/README.md, "Device nodes", gives the sources). The
stand-ins here are character devices with the same owner and mode, made with ``mknod`` as the
null device (1:3): what matters to the hub is who may open them, which the kernel decides
from the mode and the groups exactly as on a real host. Opening them reads nothing.

``mknod`` needs root; :func:`make_device_nodes` skips the test with the reason elsewhere (CI
runs as root). :func:`run_as` runs a command as another user, with or without that group.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest

#: The id the tests give the driver's group (HwHiAiUser is often 1000 on real hosts, but the
#: id is the operator's; nothing may assume it).
DRIVER_GID = 1990
#: The hub image's user (Dockerfile, USER hub).
HUB_UID = 10001
CONTROL_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")


def require_root(what: str = "make device nodes (mknod)") -> None:
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip(f"needs root and setpriv to {what}; CI runs as root")


def make_device_nodes(
    dev_dir: Path, chips: int = 1, gid: int = DRIVER_GID, mode: int = 0o660
) -> list[Path]:
    """``davinci0..chips-1`` and the three control nodes in ``dev_dir``: char 1:3, root:gid,
    ``mode``. Returns them, control nodes first."""
    require_root()
    dev_dir.mkdir(parents=True, exist_ok=True)
    # Like /dev (0755): the unprivileged user the tests switch to lists it; the folders above
    # it (pytest's are 0700) only need to be passed through.
    dev_dir.chmod(0o755)
    for folder in dev_dir.parents:
        if folder == Path("/"):
            break
        folder.chmod(folder.stat().st_mode | 0o011)
    made = []
    for name in (*CONTROL_NODES, *(f"davinci{i}" for i in range(chips))):
        node = dev_dir / name
        if node.exists():
            node.unlink()
        os.mknod(node, stat.S_IFCHR | mode, os.makedev(1, 3))
        os.chown(node, 0, gid)
        node.chmod(mode)  # mknod applies the umask
        made.append(node)
    return made


def run_as(uid: int, groups: Sequence[int] = ()) -> list[str]:
    """The ``setpriv`` prefix that runs a command as ``uid`` with exactly ``groups``."""
    argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}"]
    argv += [f"--groups={','.join(map(str, groups))}"] if groups else ["--clear-groups"]
    return [*argv, "--"]

"""One npu-smi at a time on this host: the file lock every npu-smi run of the hub takes.

Huawei's npu-smi reference says npu-smi must not be used by several threads or processes at
once ("不支持多线程并发使用npu-smi命令", Atlas 200I A2 npu-smi reference, pages npusmi_003 and
npusmi_006). The hub runs it from the worker's host probe, the diagnostics and the self-test
(:func:`~model_store.devices.reading.read_devices`) and from the serving-facts probe inside
Triton (``model_store/serving/facts_probe/model.py``, which keeps its own copy of this lock
because it cannot import ``model_store``). All of them take an exclusive ``flock`` on one file,
``NPU_SMI_LOCK_FILE`` (default ``/tmp/triton-model-hub-npu-smi.lock``), wait for it at most as
long as one npu-smi call may take, and otherwise report :data:`NPU_SMI_BUSY` instead of running
npu-smi beside another one (docs/npu-smi.md#one-npu-smi-at-a-time).

The file is created with mode 0666 whatever the umask, so that Triton (root) and the worker
(uid 10001) can share it; a symlink at that path is never followed. A lock file that cannot be
used (a symlink, a folder, no permission) does not stop npu-smi: the call runs without the lock
and the caller is told why.

Example:
    >>> npu_smi_lock_file({"NPU_SMI_LOCK_FILE": "/run/hub/npu-smi.lock"})
    '/run/hub/npu-smi.lock'
    >>> npu_smi_lock_file({})
    '/tmp/triton-model-hub-npu-smi.lock'
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress

from model_store.text import Message, say

__all__ = [
    "DEFAULT_NPU_SMI_LOCK_FILE",
    "NPU_SMI_BUSY",
    "NPU_SMI_LOCK_ENV",
    "NpuSmiBusy",
    "npu_smi_lock",
    "npu_smi_lock_file",
]

#: The setting that names the lock file.
NPU_SMI_LOCK_ENV = "NPU_SMI_LOCK_FILE"
#: The lock file when the setting is empty: every process of a bare-metal host shares /tmp.
DEFAULT_NPU_SMI_LOCK_FILE = "/tmp/triton-model-hub-npu-smi.lock"  # noqa: S108 (opened safely)
#: What a caller says when another process held the lock for the whole wait.
NPU_SMI_BUSY = say("npu-smi is busy (another process of this host is using it)")
#: How often a waiter tries the lock again (flock itself cannot wait a bounded time).
_POLL_SECONDS = 0.02


class NpuSmiBusy(RuntimeError):
    """Another process held the npu-smi lock for the whole wait; ``message`` says so."""

    def __init__(self) -> None:
        super().__init__(str(NPU_SMI_BUSY))
        self.message = NPU_SMI_BUSY


def npu_smi_lock_file(env: Mapping[str, str] | None = None) -> str:
    """The lock file's path: ``NPU_SMI_LOCK_FILE``, else :data:`DEFAULT_NPU_SMI_LOCK_FILE`."""
    value = (env if env is not None else os.environ).get(NPU_SMI_LOCK_ENV, "").strip()
    return value or DEFAULT_NPU_SMI_LOCK_FILE


def _open_lock_file(path: str) -> int:
    """A read-only descriptor of the lock file, created 0666 if missing; never through a symlink.

    An existing file is opened without ``O_CREAT``: in a sticky world-writable folder such as
    /tmp, Linux's ``fs.protected_regular`` refuses ``O_CREAT`` on a file another user owns,
    even to root. ``flock`` needs no write access, so a read-only descriptor is enough.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:  # another process created it just now
            fd = os.open(path, flags)
        else:
            with suppress(OSError):  # best effort: the umask took bits off 0666
                os.fchmod(fd, 0o666)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
    except OSError:
        os.close(fd)
        raise
    return fd


def _unusable(path: str, exc: OSError) -> Message:
    return say(
        "the npu-smi lock file %(path)s cannot be used (%(error)s), so npu-smi ran without it",
        path=path,
        error=exc.strerror or type(exc).__name__,
    )


@contextmanager
def npu_smi_lock(wait: float, env: Mapping[str, str] | None = None) -> Iterator[Message | None]:
    """Hold the host's npu-smi lock for the ``with`` block.

    Args:
        wait: Seconds to wait for another holder to finish (e.g. the npu-smi timeout).
        env: Where to read ``NPU_SMI_LOCK_FILE`` (default: this process's environment).

    Yields:
        ``None`` under the lock; a message saying why not when the lock file cannot be used
        (the block then runs without it).

    Raises:
        NpuSmiBusy: Another process held the lock for ``wait`` seconds.
    """
    path = npu_smi_lock_file(env)
    note: Message | None = None
    try:
        fd = _open_lock_file(path)
    except OSError as exc:
        fd, note = -1, _unusable(path, exc)
    try:
        if fd >= 0:
            note = _acquire(fd, path, wait)
        yield note
    finally:
        if fd >= 0:
            os.close(fd)  # closing the only descriptor releases the lock


def _acquire(fd: int, path: str, wait: float) -> Message | None:
    """Take the lock on ``fd`` within ``wait`` seconds; a message when locks cannot be had."""
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return None
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise NpuSmiBusy() from None
            time.sleep(min(_POLL_SECONDS, left))
        except OSError as exc:  # no locks on this file system (ENOLCK)
            return _unusable(path, exc)

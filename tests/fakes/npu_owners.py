"""Who holds each fake NPU chip, across containers (tests only; not the driver).

On stock Ascend drivers a chip opened by a process in one container cannot be opened from
another container until that process ends; processes of one container share it; Huawei's
"container sharing mode" (``npu-smi set -t device-share ... -d 1``) lifts this per chip.
See tests/fakes/README.md, "Who holds the chip", for the sources and what is assumed.

Active only when ``FAKE_NPU_OWNERS_DIR`` names a directory (bind-mounted into every container
of a compose test); otherwise every chip opens, as before. A "container" is a PID namespace
(``/proc/self/ns/pid``). In the directory, per chip (its logical id, ``npu-smi info -m``'s
``Chip Logic ID``):

* ``chip<N>.pidns-<inode>.lock``: every process of that namespace that opened the chip holds
  ``flock(LOCK_SH)`` on it for the rest of its life (forked children inherit the descriptor:
  the same container). The kernel drops the lock when the last holder ends, so a chip is
  never held by a dead container;
* ``chip<N>.share``: ``1`` while container sharing mode is on (written by the fake npu-smi);
* ``mutex`` (one for the directory), flocked ``LOCK_EX`` around every check and open.

Both the fake ``acl`` package and the standalone fake ``npu-smi`` script load this file by
its path (it has to work where only tests/fakes was copied); standard library only.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

#: The variable naming the shared directory; unset or not a directory: no ownership at all.
ENV = "FAKE_NPU_OWNERS_DIR"
#: Descriptors this process keeps open (and locked) until it ends, per chip.
HELD: dict[int, int] = {}
_MODE = 0o666  # the containers' users differ (root, the hub's uid 10001, Triton's)
_LOCK = re.compile(r"^chip(\d+)\.pidns-(\d+)\.lock$")


def owners_dir() -> Path | None:
    """The shared directory, or None when ownership is not emulated."""
    name = os.environ.get(ENV)
    if not name or not Path(name).is_dir():
        return None
    return Path(name)


def pid_namespace() -> str:
    """This process's container: the inode of its PID namespace (``pid:[4026531836]``)."""
    try:
        link = str(Path("/proc/self/ns/pid").readlink())
    except OSError:
        return "0"
    found = re.search(r"\d+", link)
    return found.group(0) if found else "0"


def _open(path: Path) -> int:
    """A read-only descriptor (enough for flock), creating the file writable for everyone."""
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, _MODE)
    with suppress(OSError):  # created by another user: already 0666
        os.fchmod(fd, _MODE)
    return fd


@contextmanager
def _mutex(folder: Path) -> Iterator[None]:
    fd = _open(folder / "mutex")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def shared(chip: int, folder: Path | None = None) -> bool:
    """Whether container sharing mode is on for the chip (``chip<N>.share`` holds ``1``)."""
    folder = folder or owners_dir()
    if folder is None:
        return False
    try:
        return (folder / f"chip{chip}.share").read_text().strip() == "1"
    except OSError:
        return False


def set_shared(chip: int, on: bool, folder: Path | None = None) -> None:
    """Records container sharing mode for the chip (what ``npu-smi set -t device-share`` sets)."""
    folder = folder or owners_dir()
    if folder is None:
        return
    path = folder / f"chip{chip}.share"
    path.write_text("1\n" if on else "0\n")
    with suppress(OSError):
        path.chmod(_MODE)


def _other_holders(folder: Path, chip: int) -> list[str]:
    """The other PID namespaces with a live process holding the chip (call under the mutex).
    Lock files nobody holds any more are removed on the way."""
    ours = pid_namespace()
    holders = []
    for path in folder.glob(f"chip{chip}.pidns-*.lock"):
        match = _LOCK.match(path.name)
        if match is None or int(match.group(1)) != chip or match.group(2) == ours:
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holders.append(match.group(2))  # a process of that container still has it open
        else:
            with suppress(OSError):
                path.unlink()  # nobody holds it; all opens happen under the mutex
        finally:
            os.close(fd)
    return holders


def held_elsewhere(chips: Iterable[int]) -> list[int]:
    """The chips among ``chips`` another container holds (sharing mode off); [] when
    ownership is not emulated. Takes nothing."""
    folder = owners_dir()
    if folder is None:
        return []
    with _mutex(folder):
        return [c for c in chips if not shared(c, folder) and _other_holders(folder, c)]


def open_chips(chips: Iterable[int]) -> list[int]:
    """Opens the chips for this process, as the driver does at a device's first use, and holds
    them until the process ends (``reset_device`` does not let go; ``npu-smi`` just ends).

    Returns the chips it could not open (held by another container, sharing mode off); it
    opens none of them then.
    """
    folder = owners_dir()
    if folder is None:
        return []
    wanted = [c for c in dict.fromkeys(chips) if c not in HELD]
    with _mutex(folder):
        refused = [c for c in wanted if not shared(c, folder) and _other_holders(folder, c)]
        if refused:
            return refused
        for chip in wanted:
            fd = _open(folder / f"chip{chip}.pidns-{pid_namespace()}.lock")
            fcntl.flock(fd, fcntl.LOCK_SH)
            HELD[chip] = fd
    return []

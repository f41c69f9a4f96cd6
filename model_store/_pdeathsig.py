"""Trampoline: ``python -I -S _pdeathsig.py PARENT_PID SIGNAL PROGRAM [ARGS...]``.

Asks Linux to send SIGNAL to this process when its parent thread exits
(``PR_SET_PDEATHSIG``), then replaces itself with PROGRAM; the setting survives
``exec``. Run by :func:`model_store.spawn.start`, in a fresh interpreter without site
packages, so no fork-sensitive library (gRPC) is loaded between fork and exec.
Standard library only, by design: it must start in milliseconds.
"""

import ctypes
import os
import sys

_PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    parent, sig, program, args = int(argv[1]), int(argv[2]), argv[3], argv[3:]
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        pass  # not Linux with glibc: the child simply will not die with its parent
    # The parent may have died between fork and prctl: then nobody would send the signal.
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)
        sys.exit(1)
    try:
        os.execv(program, args)  # noqa: S606 - the argument list, no shell
    except OSError as exc:
        sys.stderr.write(f"could not execute {program}: {exc}\n")
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv)

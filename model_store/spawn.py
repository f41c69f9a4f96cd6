"""The one way this project starts a child process.

Why a module of its own: a process that has used gRPC (``tritonclient.grpc`` loads models
in the web process, the workers and the tests) must not ``fork()`` and then run Python code
before ``exec()``. gRPC registers ``pthread_atfork`` handlers; in the child they restart
gRPC's event-engine poller, which may find its epoll descriptor already closed and abort
the child with ``epoll_wait error: Bad file descriptor`` (SIGABRT, exit status -6) before
the program we wanted ever runs (gRPC issue 43055, pull request 43157; measured in
``bench/spawn_after_grpc.py``). CPython takes that plain ``fork()`` path whenever
``subprocess.Popen`` is given a ``preexec_fn``; without one it uses ``vfork()``, which runs
no fork handlers at all. So nothing here ever passes ``preexec_fn``.

The one thing ``preexec_fn`` was used for, asking Linux to kill the child when its parent
dies (``PR_SET_PDEATHSIG``), is done instead by a tiny trampoline script that sets the
signal in the new process and then ``exec``s the real program (:mod:`model_store._pdeathsig`).
The trampoline is a fresh interpreter with no site packages, so it holds no gRPC state.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

_TRAMPOLINE = Path(__file__).with_name("_pdeathsig.py")

#: Keyword arguments of ``subprocess.Popen`` that would force a plain ``fork()``.
_FORK_ONLY = ("preexec_fn", "user", "group", "extra_groups", "process_group")

_File = int | IO[Any] | None


def _refuse_fork_only(kwargs: Mapping[str, Any]) -> None:
    for key in _FORK_ONLY:
        if kwargs.get(key) is not None:
            raise TypeError(f"spawn: {key!r} forces fork() without exec; see the module doc")


def resolve(program: str, env: Mapping[str, str] | None = None) -> str:
    """The absolute path of ``program`` as ``exec`` would find it on ``env``'s PATH.

    Raises:
        FileNotFoundError: Nothing executable by that name; said here, in the parent,
            because a trampoline could only report it through an exit status.
    """
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    found = shutil.which(program, path=path)
    if found is None:
        raise FileNotFoundError(2, "No such executable file", program)
    # absolute(), not resolve(): a venv's python is a symlink that must stay one.
    return str(Path(found).absolute())


def die_with_parent_argv(
    argv: Sequence[str], sig: int, env: Mapping[str, str] | None = None
) -> list[str]:
    """``argv`` wrapped in the trampoline that sets ``PR_SET_PDEATHSIG`` to ``sig`` first."""
    program = resolve(str(argv[0]), env)
    # -I: ignore PYTHON* variables and the user's site; -S: no site packages at all.
    return [
        sys.executable,
        "-I",
        "-S",
        str(_TRAMPOLINE),
        str(os.getpid()),
        str(int(sig)),
        program,
        *map(str, argv[1:]),
    ]


def start(
    argv: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdin: _File = subprocess.DEVNULL,
    stdout: _File = None,
    stderr: _File = None,
    new_session: bool = True,
    die_with_parent: signal.Signals | None = None,
    **popen_kwargs: Any,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` without running Python code between fork and exec.

    Args:
        argv: The program and its arguments (no shell).
        env: The child's whole environment (default: ours).
        cwd: Its working directory.
        stdin, stdout, stderr: As for ``subprocess.Popen``; stdin defaults to /dev/null.
        new_session: Own session and process group, so that a stop can signal everything
            the child starts (``os.killpg(proc.pid, ...)``).
        die_with_parent: A signal Linux sends the child when the thread that started it
            exits. Start long-lived children from a long-lived thread.
        popen_kwargs: Other ``subprocess.Popen`` arguments (never ``preexec_fn``).

    Raises:
        FileNotFoundError, PermissionError: The program cannot be executed.
    """
    _refuse_fork_only(popen_kwargs)
    args = [os.fspath(a) for a in argv]
    if die_with_parent is not None:
        args = die_with_parent_argv(args, die_with_parent, env)
    return subprocess.Popen(
        args,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=new_session,
        **popen_kwargs,
    )


def run(
    argv: Sequence[str | os.PathLike[str]], *, timeout: float, **kwargs: Any
) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run`` on the same safe path: a timeout always, no shell, no preexec_fn."""
    _refuse_fork_only(kwargs)
    if kwargs.get("shell"):
        raise TypeError("spawn.run: no shell; pass the argument list")
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run([os.fspath(a) for a in argv], timeout=timeout, **kwargs)


def describe_exit(returncode: int) -> str:
    """An exit status in words: ``"status 3"`` or ``"signal SIGABRT (-6)"``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"{name} ({returncode})"
    return f"status {returncode}"

"""The one spawn path (model_store.spawn) and the one-line reasons for a failed start."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from model_store import spawn
from model_store.runtime.embedded import exit_headline
from tests.fixtures.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]

#: Calls that start a process without going through model_store.spawn.
FORBIDDEN_CALLS = (
    {
        ("subprocess", name)
        for name in (
            "Popen",
            "run",
            "call",
            "check_call",
            "check_output",
            "getoutput",
            "getstatusoutput",
        )
    }
    | {
        ("os", name)
        for name in ("system", "popen", "fork", "forkpty", "execv", "execve", "execvp", "spawnv")
    }
    | {("os", "posix_spawn"), ("os", "posix_spawnp")}
)

#: Files allowed to start processes by other means, and why.
ALLOWED = {
    "model_store/spawn.py": "the one place that calls subprocess",
    "model_store/_pdeathsig.py": "the trampoline: exec is its whole job",
    "bench/spawn_after_grpc.py": "measures the old preexec_fn path beside the new one",
    "tests/unit/test_spawn.py": "shows that spawn refuses preexec_fn",
    "model_store/serving/facts_probe/model.py": "runs npu-smi inside Triton's stub, alone",
    "model_store/ascend/selftest/session.py": "the self-test execs itself again in the worker's "
    "environment (no child process)",
}


def _python_files() -> list[Path]:
    roots = ["model_store", "webapp", "workers", "tests", "bench", "manage.py"]
    files: list[Path] = []
    for name in roots:
        path = ROOT / name
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return files


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and (func.value.id, func.attr) in FORBIDDEN_CALLS
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {func.value.id}.{func.attr}()")
        found += [
            f"{path.relative_to(ROOT)}:{node.lineno} preexec_fn="
            for kw in node.keywords
            if kw.arg == "preexec_fn"
        ]
    return found


def test_every_process_is_started_through_the_spawn_module() -> None:
    offences = [
        offence
        for path in _python_files()
        if str(path.relative_to(ROOT)) not in ALLOWED
        for offence in _offences(path)
    ]
    assert not offences, "start processes with model_store.spawn:\n" + "\n".join(offences)


def test_a_preexec_fn_is_refused() -> None:
    with pytest.raises(TypeError, match="preexec_fn"):
        spawn.start(["/bin/true"], preexec_fn=lambda: None)
    with pytest.raises(TypeError, match="preexec_fn"):
        spawn.run(["/bin/true"], timeout=5, preexec_fn=lambda: None)


def test_a_missing_program_is_reported_by_the_parent_even_through_the_trampoline() -> None:
    with pytest.raises(FileNotFoundError):
        spawn.start(["no-such-program-here"], die_with_parent=signal.SIGKILL)
    with pytest.raises(FileNotFoundError):
        spawn.start(["/nonexistent/program"])


def test_the_trampoline_execs_the_program_itself(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with out.open("wb") as fh:
        proc = spawn.start(
            [sys.executable, "-c", "import os; print(os.getpid(), os.getsid(0))"],
            stdout=fh,
            die_with_parent=signal.SIGTERM,
        )
        assert proc.wait(30) == 0
    pid, sid = map(int, out.read_text().split())
    assert pid == proc.pid  # exec replaced the trampoline: signals reach the program
    assert sid == proc.pid  # and it leads its own session


def test_a_child_dies_with_its_parent(tmp_path: Path) -> None:
    # A middle process starts a long sleep that must die with it; then the middle is killed.
    pid_file = tmp_path / "pid"
    middle = spawn.start(
        [
            sys.executable,
            "-c",
            "import signal, sys, time; from model_store import spawn;"
            "p = spawn.start(['sleep', '60'], die_with_parent=signal.SIGKILL);"
            f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:

        def child_started() -> bool:
            assert middle.poll() is None, "the middle process died"
            return pid_file.exists() and bool(pid_file.read_text())

        wait_until(
            child_started, 30, interval=0.02,
            message="the middle process never started its child",
        )  # fmt: skip
        child = int(pid_file.read_text())
        os.kill(child, 0)  # alive while its parent is
    finally:
        middle.kill()
        middle.wait(10)
    wait_until(
        lambda: not _alive(child), 10, interval=0.02, message="the child outlived its parent"
    )


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie waits for init to reap it


def test_run_needs_a_timeout_and_no_shell() -> None:
    with pytest.raises(TypeError):
        spawn.run(["true"], timeout=5, shell=True)  # noqa: S604 - shows that it is refused
    done = spawn.run(["/bin/echo", "hi"], timeout=5, capture_output=True, text=True)
    assert done.stdout == "hi\n"
    with pytest.raises(subprocess.TimeoutExpired):
        spawn.run(["sleep", "5"], timeout=0.2)


@pytest.mark.parametrize(
    ("returncode", "log", "expected"),
    [
        (
            -6,
            "E1203 05:26:01.175144   16696 ev_epoll1_linux.cc:373] (event_engine) Epoll1Poller:0x55"
            " encountered epoll_wait error: Bad file descriptor\n",
            "tritonserver ended (SIGABRT (-6)) before it was ready: it aborted between fork"
            " and exec",
        ),
        (
            1,
            "I1203 server.cc:1] starting\nE1203 05:26:01.1 1 grpc_server.cc:2] Failed to listen:"
            " Address already in use\n",
            "one of its ports is already in use by another program",
        ),
        (
            1,
            "I1203 05:26:01.1 1 model_lifecycle.cc:1] loading\n"
            "E1203 05:26:01.2 1 server.cc:3] failed to initialize backend directory\n",
            "before it was ready: failed to initialize backend directory",
        ),
        (-9, "", "tritonserver ended (SIGKILL (-9)) before it was ready and wrote nothing"),
    ],
)
def test_a_failed_start_says_why_in_one_line(returncode: int, log: str, expected: str) -> None:
    headline = exit_headline(returncode, log)
    assert expected in headline
    assert "\n" not in headline

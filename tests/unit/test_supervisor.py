"""The launcher's supervisor with real processes: restart with backoff, give up on a crash loop,
a status file the web reads, logs rotated by size."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.waiting import wait_until
from webapp.stack.process import ManagedProcess
from webapp.stack.supervisor import GiveUp, Part, RestartPolicy, Supervisor, rotate_log

FAST = RestartPolicy(max_restarts=3, window_s=30, backoff_start_s=0.05, backoff_max_s=0.2)


def _process_part(
    tmp_path: Path, name: str, code: str, restarted: list[float]
) -> tuple[Part, ManagedProcess]:
    child = ManagedProcess(
        name, [sys.executable, "-c", code], log_path=tmp_path / f"{name}.log", env=dict(os.environ),
        cwd=tmp_path, ready=lambda: True,
    )  # fmt: skip

    def start() -> None:
        child.stop()
        child.start()
        child.wait_ready(10)

    start()
    part = Part(
        name, start=start, stop=child.stop, exit_status=child.exit_code, log_tail=child.log_tail,
        on_restarted=lambda down_s, how: restarted.append(down_s),
    )  # fmt: skip
    return part, child


def _run_until(supervisor: Supervisor, done, timeout: float = 20) -> None:  # type: ignore[no-untyped-def]
    """Let the supervisor tick (as its loop does) until ``done()``."""

    def ticked_until_done() -> bool:
        if done():
            return True
        supervisor.tick()
        return False

    wait_until(
        ticked_until_done, timeout, interval=0.02,
        message="the supervisor did not get there in time",
    )  # fmt: skip


def test_a_killed_part_is_restarted_and_the_status_file_says_so(tmp_path: Path) -> None:
    restarted: list[float] = []
    part, child = _process_part(tmp_path, "sleeper", "import time; time.sleep(60)", restarted)
    status = tmp_path / "run" / "stack.json"
    supervisor = Supervisor([part], FAST, status, tell=lambda text: None)
    assert part.exit_status() is None and child.proc is not None
    os.kill(child.proc.pid, 9)
    _run_until(supervisor, lambda: part.restarts == 1)
    data = json.loads(status.read_text())
    assert data["parts"]["sleeper"]["state"] == "up"
    assert data["parts"]["sleeper"]["last_exit"] == "SIGKILL (-9)"
    assert len(restarted) == 1 and 0 < restarted[0] < 5
    part.stop()


def test_a_part_that_crashes_on_every_start_is_given_up_with_its_log(tmp_path: Path) -> None:
    code = "import sys; print('cannot open the model store', flush=True); sys.exit(3)"
    part, _child = _process_part(tmp_path, "broken", code, [])
    supervisor = Supervisor([part], FAST, tmp_path / "stack.json", tell=lambda text: None)
    with pytest.raises(GiveUp) as info:
        _run_until(supervisor, lambda: False)
    message = str(info.value)
    assert message.startswith("broken exited (status 3) 4 times within 30 s")
    assert "cannot open the model store" in message
    assert json.loads((tmp_path / "stack.json").read_text())["parts"]["broken"]["state"] == (
        "given_up"
    )


def test_backoff_doubles_up_to_its_ceiling() -> None:
    policy = RestartPolicy(backoff_start_s=1, backoff_max_s=30)
    assert [policy.backoff(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_a_log_over_its_size_is_copied_aside_and_truncated(tmp_path: Path) -> None:
    log = tmp_path / "web.log"
    with log.open("ab") as writer:  # a part's inherited descriptor: O_APPEND
        writer.write(b"x" * 2048)
        writer.flush()
        assert rotate_log(log, max_bytes=1024, backups=2)
        writer.write(b"after\n")
        writer.flush()
    assert log.read_bytes() == b"after\n"  # the writer continues at the new end
    assert (tmp_path / "web.log.1").stat().st_size == 2048
    assert not rotate_log(log, max_bytes=1024, backups=2)


def test_health_and_every_page_name_a_part_that_is_down(
    settings, tmp_path: Path, operator, time_machine
) -> None:
    from tests.fixtures.users import signed_in

    time_machine.move_to(time.time(), tick=False)  # "down for 12 s", however slow the machine
    settings.VAR_DIR = tmp_path
    (tmp_path / "run").mkdir()
    since = time.time() - 12
    (tmp_path / "run" / "stack.json").write_text(json.dumps({
        "pid": os.getpid(), "updated": time.time(),
        "parts": {"web": {"state": "up", "since": since, "restarts": 0, "last_exit": ""},
                  "triton": {"state": "down", "since": since, "restarts": 1,
                             "last_exit": "SIGKILL (-9)"}},
    }))  # fmt: skip
    client = signed_in(operator)
    health = client.get("/api/v1/health").json()
    assert health["checks"]["parts"]["ok"] is False
    assert (
        "triton has been down for 12 s after it exited (SIGKILL (-9))"
        in (health["checks"]["parts"]["detail"])
    )
    page = client.get("/models/").content.decode()
    assert "triton has been down for 12 s" in page and "data-stack-down" in page


def test_the_banner_says_a_part_is_down_in_the_pages_language(
    settings, tmp_path: Path, operator, time_machine
) -> None:
    from tests.fixtures.users import signed_in

    time_machine.move_to(time.time(), tick=False)
    settings.VAR_DIR = tmp_path
    (tmp_path / "run").mkdir()
    since = time.time() - 12
    (tmp_path / "run" / "stack.json").write_text(json.dumps({
        "pid": os.getpid(), "updated": time.time(),
        "parts": {"worker": {"state": "given_up", "since": since, "restarts": 5,
                             "last_exit": ""}},
    }))  # fmt: skip
    client = signed_in(operator)
    page = client.get("/models/", HTTP_ACCEPT_LANGUAGE="zh-Hans").content.decode()
    assert "worker 已停止 12 秒；启动器已放弃重启它。" in page  # noqa: RUF001
    english = client.get("/models/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "worker has been down for 12 s; the launcher gave up on it." in english

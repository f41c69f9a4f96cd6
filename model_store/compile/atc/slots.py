"""At most N ATC runs at once on one host (``ATC_MAX_PARALLEL_BUILDS``, default 1).

Each ATC run forks ``TE_PARALLEL_COMPILER`` operator-compile processes (8 by default, up to 32)
and holds its graph in memory; four concurrent builds on a worker with four Celery processes
would start 32 compilers (hicann/ge ``environment_setup.md`` recommends at most CPU cores x
80 % / NPUs in all; ``environment.parallel_compilers`` counts the cores this container may use,
``model_store.cpu_quota``, not the host's). The default of one slot does not depend on the
core count: a single ATC run already spreads over the cores through its compilers. A build
takes one of N slots, each a file lock (``fcntl.flock``) in a folder every worker process of
the host shares, and waits for a free one while logging that it waits. A lock dies with its
process, so a killed worker never keeps a slot.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

DEFAULT_SLOTS = 1
POLL_S = 0.5


def slot_count(env: Mapping[str, str]) -> int:
    try:
        return max(1, int(str(env.get("ATC_MAX_PARALLEL_BUILDS") or DEFAULT_SLOTS)))
    except ValueError:
        return DEFAULT_SLOTS


def slots_dir(env: Mapping[str, str]) -> Path:
    """Where the slot files live: ``ATC_SLOTS_DIR`` of the build's environment or of this
    process, else one folder under the temporary directory shared by every process of this
    host (or container)."""
    chosen = env.get("ATC_SLOTS_DIR") or os.environ.get("ATC_SLOTS_DIR")
    return Path(chosen or Path(tempfile.gettempdir(), "triton-model-hub-atc"))


@contextlib.contextmanager
def build_slot(
    env: Mapping[str, str],
    *,
    log: Callable[[str], None] = lambda _: None,
    cancelled: Callable[[], bool] = lambda: False,
) -> Iterator[int]:
    """Hold one of the host's ATC slots for the block; yields its number.

    Raises:
        InterruptedError: ``cancelled()`` turned True while waiting.
    """
    folder = slots_dir(env)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    count = slot_count(env)
    said_wait = False
    while True:
        for number in range(count):
            handle = os.open(folder / f"slot-{number}", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(handle)
                continue
            try:
                yield number
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
                os.close(handle)
            return
        if not said_wait:
            log(f"Waiting for a free ATC slot ({count} build(s) at once on this host).")
            said_wait = True
        if cancelled():
            raise InterruptedError("cancelled while waiting for an ATC slot")
        time.sleep(POLL_S)

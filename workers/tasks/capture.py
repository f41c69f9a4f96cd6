"""Capture's worker side: the spool taken in, and captures past their retention removed.

The ingest is background work on the machine that also serves: it decodes every captured
request and writes it to disk, which on a small host takes CPU from Triton while clients wait.
So it runs in a thread of its own at a lower CPU priority (Linux keeps a nice value per
thread); the thread ends with the work, so the worker process keeps its own priority for the
next task, and no privilege is needed to go back up.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import connections

from webapp.registry.capture.actions import expire as expire_captures
from webapp.registry.capture.recorder import ingest as ingest_spool
from workers.celery import app

#: How much lower than the worker the ingest runs (nice is 0 to 19 above the worker's own).
BACKGROUND_NICE = 10

T = TypeVar("T")


def at_background_priority(work: Callable[[], T]) -> T:
    """``work()`` in a thread of its own at ``BACKGROUND_NICE`` lower CPU priority."""
    outcome: dict[str, object] = {}

    def run() -> None:
        tid = threading.get_native_id()
        with contextlib.suppress(OSError, AttributeError):  # not Linux, or not allowed: as is
            os.setpriority(
                os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICE
            )
        try:
            outcome["value"] = work()
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc
        finally:
            connections.close_all()  # this thread's own database connections

    thread = threading.Thread(target=run, name="background-work", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


@app.task(name="workers.tasks.capture.expire", time_limit=600, soft_time_limit=540)
def expire() -> dict[str, int]:
    return {"removed": expire_captures()}


@app.task(name="workers.tasks.capture.ingest", time_limit=120, soft_time_limit=100)
def ingest() -> dict[str, int]:
    """Take in what the web processes spooled (webapp/registry/capture/recorder.py)."""
    return at_background_priority(lambda: ingest_spool(max_seconds=60.0))

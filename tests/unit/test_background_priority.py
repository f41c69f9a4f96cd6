"""The capture ingest's lower CPU priority: the work's own thread is niced, the worker's is
not, and what the work raises reaches the task."""

from __future__ import annotations

import os
import threading

import pytest

from workers.tasks.capture import BACKGROUND_NICE, at_background_priority

pytestmark = pytest.mark.skipif(not hasattr(os, "setpriority"), reason="Linux only")


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_the_work_runs_niced_and_the_caller_keeps_its_priority() -> None:
    before = _nice()
    seen = at_background_priority(_nice)
    assert seen == min(19, before + BACKGROUND_NICE)
    assert _nice() == before


def test_an_error_in_the_work_reaches_the_caller() -> None:
    def broken() -> None:
        raise ValueError("spool unreadable")

    with pytest.raises(ValueError, match="spool unreadable"):
        at_background_priority(broken)

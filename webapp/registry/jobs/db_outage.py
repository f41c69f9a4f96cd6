"""Riding out a database restart in the middle of a job.

A restart of PostgreSQL ends every session. Web requests recover by themselves (each request
checks its connection first: ``CONN_HEALTH_CHECKS``), but a worker's task keeps the one
connection it opened, and every query on it fails after the restart (``OperationalError`` or
``InterfaceError``) until it is closed. The job would then stay "running" for ever: the code
that records its failure needs the database too (tests/faults/test_database_restart.py).

So job code drops the broken connection, waits for the database to answer again, and then
carries on (:func:`retrying`) or records why it stopped (:func:`wait_for_database`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)

T = TypeVar("T")

#: What a lost or refused connection raises (psycopg's errors, as Django wraps them).
CONNECTION_ERRORS = (OperationalError, InterfaceError)
#: How long job code waits for the database to come back before it gives up.
WAIT_S = 120.0


def is_connection_error(exc: BaseException) -> bool:
    return isinstance(exc, CONNECTION_ERRORS)


def drop_connection() -> None:
    """Close this thread's connection (broken or not); the next query opens a new one."""
    with contextlib.suppress(*CONNECTION_ERRORS):
        connection.close()


def wait_for_database(timeout_s: float = WAIT_S) -> bool:
    """Drop the broken connection and wait until the database answers; False if it did not."""
    deadline = time.monotonic() + timeout_s
    delay = 0.2
    while True:
        drop_connection()
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            return True
        except CONNECTION_ERRORS:
            if time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


def retrying(write: Callable[[], T], timeout_s: float = WAIT_S) -> T:
    """Run ``write`` (short, idempotent database work); after a lost connection, wait for the
    database and run it once more. Raises the error when the database does not come back."""
    try:
        return write()
    except CONNECTION_ERRORS as exc:
        log.warning("database connection lost (%s); waiting up to %.0f s for it", exc, timeout_s)
        if not wait_for_database(timeout_s):
            raise
    return write()

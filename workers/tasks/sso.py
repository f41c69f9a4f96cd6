"""Sign-in housekeeping: the LDAP re-check (webapp/sso/recheck.py)."""

from __future__ import annotations

from typing import Any

from webapp.sso.recheck import recheck_directory as recheck
from workers.celery import app


@app.task(name="workers.tasks.sso.recheck_directory", time_limit=600, soft_time_limit=540)
def recheck_directory() -> dict[str, Any]:
    """Vouch for the LDAP users the directory still finds; nothing without LDAP_SERVER_URI."""
    return recheck()

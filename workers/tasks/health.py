from __future__ import annotations

import os
import socket

from workers.celery import app


@app.task(name="workers.tasks.health.ping")
def ping(payload: str) -> dict[str, object]:
    """Echo, with who answered: proves a broker round trip to a real worker."""
    return {"echo": payload, "host": socket.gethostname(), "pid": os.getpid()}

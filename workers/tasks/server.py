from __future__ import annotations

from webapp import live
from webapp.ops.triton import get_runtime
from workers.celery import app


@app.task(name="workers.tasks.server.push_server_state", ignore_result=True)
def push_server_state() -> None:
    """Tell open server pages Triton's current state (they re-render their status panel)."""
    runtime = get_runtime(timeout=2.0)
    live.publish("server", {"live": runtime.is_live(), "ready": runtime.is_ready()})

from __future__ import annotations

from workers.celery import app


@app.task(name="workers.tasks.server.push_server_state", ignore_result=True)
def push_server_state() -> None:
    """Tell open server pages Triton's current state (they re-render their status panel)."""
    # Imported here, not at module level: beat imports every task module only to schedule
    # them, and tritonclient (with grpc and numpy) would add ~50 MiB to that process.
    from webapp import live
    from webapp.ops import heartbeat
    from webapp.ops.triton import get_runtime

    heartbeat.beat()  # this worker is alive: /api/v1/health reads it instead of pinging
    runtime = get_runtime(timeout=2.0)
    live.publish("server", {"live": runtime.is_live(), "ready": runtime.is_ready()})


# The host checks run npu-smi, atc, ldd (5 s each at most) and ATC's Python (30 s at most).
@app.task(name="workers.tasks.server.probe_host", ignore_result=True, soft_time_limit=120)
def probe_host() -> None:
    """Probe this worker's host (NPUs, CANN, ATC, the host-bound diagnostics checks) and store
    the report the Server and Diagnostics pages show."""
    from webapp.nodes import host_reports

    host_reports.probe_and_record()

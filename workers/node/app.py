"""The node's Celery app (``celery -A workers.node.app worker -Q node.<name> -P solo``).

Its broker is the hub's Redis (``REDIS_URL``); results go to the same Redis so that whoever
sent a task can wait for its answer. The node consumes only its own queue and runs no beat:
its heartbeat is a thread started when the worker is ready. The solo pool runs one task at
a time, which is also what the node's repository wants: one writer, one change at a time.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

from workers.node.hub_client import HubClient
from workers.node.reporting import Heartbeat
from workers.node.settings import NodeSettings, read_settings

settings: NodeSettings = read_settings()
hub = HubClient(settings.hub_url, settings.token)

# fixups=[]: Celery's Django fix-up would set Django up when DJANGO_SETTINGS_MODULE is set; a
# node has no Django settings and no database.
app = Celery("triton_model_hub_node", include=["workers.node.tasks"], fixups=[])
app.conf.update(
    broker_url=settings.broker_url,
    result_backend=settings.broker_url,
    result_expires=24 * 3600,
    task_default_queue=settings.queue,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=True,
    broker_connection_retry_on_startup=True,
)

_heartbeat: list[Heartbeat] = []


@worker_ready.connect
def _start_heartbeat(sender: Any = None, **kwargs: Any) -> None:
    """The first report goes out as soon as the worker consumes its queue."""
    heartbeat = Heartbeat(settings, hub)
    _heartbeat.append(heartbeat)
    heartbeat.start()


@worker_shutdown.connect
def _stop_heartbeat(sender: Any = None, **kwargs: Any) -> None:
    for heartbeat in _heartbeat:
        heartbeat.stop()

"""Waiting for a node's answer to a task the hub sent to its queue (a build, a switch).

The hub worker that sent the task waits on the result backend a few seconds at a time and,
between two waits, asks whether the job was cancelled or the node went down: a node that
stopped reporting will not answer, and a job must not wait for it until its time limit.
"""

from __future__ import annotations

import time
from typing import Any

from celery.exceptions import TimeoutError as CeleryTimeout

from model_store.text import Message, Said, from_json, say
from webapp.nodes import summaries as nodes
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job

#: How often the waiting worker asks about cancel and the node's state, in seconds.
POLL_S = 2.0
#: A line about the wait in the job's log this often, in seconds.
STILL_WAITING_S = 60.0


def answer_reason(value: Any, limit: int = 1000) -> Said:
    """The ``reason`` of a node's answer: a message as the node sent it (checked as any data
    from outside, :func:`~model_store.text.from_json`), or its plain words cut to ``limit``."""
    said = from_json(value)
    return said if isinstance(said, Message) else said[:limit]


class NodeTaskFailed(Exception):
    """The node crashed on the task, went down, the job was cancelled or the wait timed out."""

    def __init__(self, message: Said, code: str, *, cancelled: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.cancelled = cancelled


def wait_for_answer(
    job: Job, node: str, result: Any, *, limit_s: float, what: str
) -> dict[str, Any]:
    """The node's answer (a dict) to the task behind ``result``.

    Raises:
        NodeTaskFailed: See the class; the task is revoked when the hub stops waiting.
    """
    started = last_said = time.monotonic()
    while True:
        try:
            answer = result.get(timeout=POLL_S, disable_sync_subtasks=False, propagate=False)
        except CeleryTimeout:
            answer = None
        if isinstance(answer, dict):
            return answer
        if answer is not None or result.failed():
            raise NodeTaskFailed(
                _crashed(what, node=node, error=str(result.result)[:500]),
                f"node_{what}_failed",
            )  # fmt: skip
        if Job.objects.filter(pk=job.pk, cancel_requested=True).exists():
            result.revoke()
            raise NodeTaskFailed(say("Cancelled on request."), "cancelled", cancelled=True)
        if nodes.summary_of(node)["state"] == "down":
            result.revoke()
            raise NodeTaskFailed(
                _stopped_reporting(what, node=node, seconds=f"{nodes.down_after_s():.0f}"),
                "node_down",
            )  # fmt: skip
        waited = time.monotonic() - started
        if waited > limit_s:
            result.revoke()
            raise NodeTaskFailed(
                _too_slow(what, node=node, seconds=f"{limit_s:.0f}"),
                "timeout",
            )  # fmt: skip
        if time.monotonic() - last_said >= STILL_WAITING_S:
            last_said = time.monotonic()
            jobs.log(job, f"Still waiting for node {node} ({what}, {waited:.0f} s).")


# One whole sentence per task (``what``), so that a translator sees each as it is said.


def _crashed(what: str, **values: Any) -> Message:
    if what == "build":
        return say("Node %(node)s crashed running the build: %(error)s", **values)
    if what == "switch":
        return say("Node %(node)s crashed running the switch: %(error)s", **values)
    if what == "trial":
        return say("Node %(node)s crashed running the trial: %(error)s", **values)
    if what == "unload":
        return say("Node %(node)s crashed running the unload: %(error)s", **values)
    if what == "load":
        return say("Node %(node)s crashed loading the version beside: %(error)s", **values)
    return say("Node %(node)s crashed running the %(what)s: %(error)s", what=what, **values)


def _stopped_reporting(what: str, **values: Any) -> Message:
    if what == "build":
        return say(
            "Node %(node)s stopped reporting during the build (down after %(seconds)s s "
            "without a report).",
            **values,
        )
    if what == "switch":
        return say(
            "Node %(node)s stopped reporting during the switch (down after %(seconds)s s "
            "without a report).",
            **values,
        )
    if what == "trial":
        return say(
            "Node %(node)s stopped reporting during the trial (down after %(seconds)s s "
            "without a report).",
            **values,
        )
    if what == "unload":
        return say(
            "Node %(node)s stopped reporting during the unload (down after %(seconds)s s "
            "without a report).",
            **values,
        )
    if what == "load":
        return say(
            "Node %(node)s stopped reporting while it loaded the version beside (down after "
            "%(seconds)s s without a report).",
            **values,
        )
    return say(
        "Node %(node)s stopped reporting during the %(what)s (down after %(seconds)s s "
        "without a report).",
        what=what,
        **values,
    )


def _too_slow(what: str, **values: Any) -> Message:
    if what == "build":
        return say("Node %(node)s did not finish the build within %(seconds)s s.", **values)
    if what == "switch":
        return say("Node %(node)s did not finish the switch within %(seconds)s s.", **values)
    if what == "trial":
        return say("Node %(node)s did not finish the trial within %(seconds)s s.", **values)
    if what == "unload":
        return say("Node %(node)s did not finish the unload within %(seconds)s s.", **values)
    if what == "load":
        return say("Node %(node)s did not load the version beside within %(seconds)s s.", **values)
    return say(
        "Node %(node)s did not finish the %(what)s within %(seconds)s s.", what=what, **values
    )

"""Sending jobs to the workers, by task name.

Views and actions record a job in the database and, after the commit, call one of these.
Nothing here imports ``workers``: the task names are the contract between the two sides (the
worker declares each task with ``name=`` equal to these strings, and its limits and
acknowledgement settings travel with the task, not with the message).
"""

from __future__ import annotations

from celery import chain
from celery.result import AsyncResult

from webapp.celery_app import app

#: The compile job's steps, each a task ``workers.tasks.compile.<step>`` that runs one step of
#: ``webapp.registry.build.pipeline`` and stops the chain when it fails.
COMPILE_STEPS = ("validate", "compile", "verify", "package")
#: A config revision that keeps the artifact: take the original's artifact, then package.
REUSE_STEPS = ("reuse", "package")
#: Every step a compile job's chain may hold (the worker declares a task for each).
ALL_COMPILE_STEPS = ("validate", "compile", "verify", "reuse", "package")


def compile_job(job_id: int, steps: tuple[str, ...] = COMPILE_STEPS) -> None:
    """Queue a compile job's steps as one chain (validate -> compile -> verify -> package, or
    reuse -> package for a revision that keeps the artifact)."""
    unknown = set(steps) - set(ALL_COMPILE_STEPS)
    if unknown:
        raise ValueError(f"no compile task for step(s) {sorted(unknown)}")
    chain(
        *(
            app.signature(f"workers.tasks.compile.{step}", args=(job_id,), immutable=True)
            for step in steps
        )
    ).apply_async()


def serving_job(job_id: int) -> None:
    """Queue a serving job (serve, roll back, compare, load, unload)."""
    app.send_task("workers.tasks.serve.run_job", args=(job_id,))


def canary_watch(canary_id: int, countdown: float = 0) -> None:
    """Queue one look at a canary (webapp.registry.serving.canary); it queues the next."""
    app.send_task("workers.tasks.serve.canary_watch", args=(canary_id,), countdown=countdown)


def sweep_job(job_id: int) -> None:
    """Queue a performance sweep."""
    app.send_task("workers.tasks.perf.sweep", args=(job_id,))


def tune_job(job_id: int) -> None:
    """Queue a search for a better serving config (webapp.registry.performance.tuning)."""
    app.send_task("workers.tasks.perf.tune", args=(job_id,))


def adopt_job(job_id: int) -> None:
    """Queue the copy of one adopted version (webapp.registry.catalogue.adopt_work)."""
    app.send_task("workers.tasks.adopt.run_job", args=(job_id,))


def node_task(node: str, task: str, kwargs: dict[str, object]) -> AsyncResult:
    """Send ``task`` (``node.build``, ...) to node ``node``'s queue; its result, to wait on.

    Only plain values travel: the node shares no database or file system with the hub
    (docs/nodes.md).
    """
    return app.send_task(task, kwargs=kwargs, queue=f"node.{node}")

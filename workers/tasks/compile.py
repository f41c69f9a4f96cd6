"""The compile job as a chain of tasks: validate -> compile -> verify -> package.

Each task takes a job id, runs one step (webapp/registry/build/pipeline.py) and stops the chain when
the step failed. Failures are deterministic (a bad model stays bad), so nothing is retried, but
for one: the database went away (a restart) mid-step. Then the step runs again from its start
once the database answers, and the chain goes on; the job is failed, with that reason, only if
the database stays away for good (tests/faults/test_database_restart.py).
"""

from __future__ import annotations

from celery import Task
from celery.exceptions import Ignore, SoftTimeLimitExceeded

from webapp.dispatch import ALL_COMPILE_STEPS
from workers.celery import app

#: A step that lost the database is tried again this often, this many seconds apart.
DATABASE_RETRIES = 24
DATABASE_RETRY_S = 5


def _run(task: Task, step: str, job_id: int) -> None:
    from webapp.registry.build import pipeline
    from webapp.registry.jobs.db_outage import CONNECTION_ERRORS, wait_for_database

    try:
        ok = pipeline.run_step(step, job_id)
    except SoftTimeLimitExceeded:
        pipeline.record_timeout(job_id, step)
        ok = False
    except CONNECTION_ERRORS as exc:
        if task.request.retries < DATABASE_RETRIES:
            raise task.retry(countdown=DATABASE_RETRY_S, exc=exc) from exc
        if wait_for_database(5):
            pipeline.record_database_lost(job_id, step, exc)
        ok = False
    if not ok:
        raise Ignore()  # the failure is recorded; do not run the rest of the chain


STEP_LIMITS = {"validate": 600, "compile": 3600, "verify": 900, "reuse": 600, "package": 600}
if tuple(STEP_LIMITS) != ALL_COMPILE_STEPS:  # the chains webapp.dispatch sends, by name
    raise RuntimeError(f"compile tasks {tuple(STEP_LIMITS)} differ from {ALL_COMPILE_STEPS}")


def _task(step: str):
    limit = STEP_LIMITS[step]

    @app.task(
        bind=True,
        name=f"workers.tasks.compile.{step}",
        soft_time_limit=limit,
        time_limit=limit + 60,
        acks_late=True,
        ignore_result=True,
        max_retries=DATABASE_RETRIES,
    )
    def run(self: Task, job_id: int) -> None:
        _run(self, step, job_id)

    return run


validate = _task("validate")
compile_model = _task("compile")
verify = _task("verify")
reuse = _task("reuse")
package = _task("package")

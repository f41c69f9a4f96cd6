"""The compile job as a chain of tasks: validate -> compile -> verify -> package.

Each task takes a job id, runs one step (webapp/registry/pipeline.py) and stops the chain when
the step failed. Failures are deterministic (a bad model stays bad), so nothing is retried.
"""

from __future__ import annotations

from celery.exceptions import Ignore, SoftTimeLimitExceeded

from webapp.dispatch import COMPILE_STEPS
from workers.celery import app


def _run(step: str, job_id: int) -> None:
    from webapp.registry import pipeline

    try:
        ok = pipeline.run_step(step, job_id)
    except SoftTimeLimitExceeded:
        pipeline.record_timeout(job_id, step)
        ok = False
    if not ok:
        raise Ignore()  # the failure is recorded; do not run the rest of the chain


STEP_LIMITS = {"validate": 600, "compile": 3600, "verify": 900, "package": 600}
if tuple(STEP_LIMITS) != COMPILE_STEPS:  # the chain webapp.dispatch sends, by name
    raise RuntimeError(f"compile tasks {tuple(STEP_LIMITS)} differ from {COMPILE_STEPS}")


def _task(step: str):
    limit = STEP_LIMITS[step]

    @app.task(
        name=f"workers.tasks.compile.{step}",
        soft_time_limit=limit,
        time_limit=limit + 60,
        acks_late=True,
        ignore_result=True,
    )
    def run(job_id: int) -> None:
        _run(step, job_id)

    return run


validate = _task("validate")
compile_model = _task("compile")
verify = _task("verify")
package = _task("package")

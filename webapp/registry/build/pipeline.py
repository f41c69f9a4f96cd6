"""The compile job's steps: validate -> compile -> verify -> package.

Each step is run by its own Celery task (workers/tasks/compile.py) and may run on another
worker host than the one before: what a step hands to the next lives in the job's work
directory on the shared store (``state.json``) and in the database, never in memory.

This module runs one step by name and records how a step ended when it did not succeed (a
failure, its time limit, a lost database, a worker that died mid-step). The steps live in
pipeline_build.py (validate, compile), pipeline_verify.py (verify) and pipeline_package.py
(reuse, package, serve when packaged); what they share, in pipeline_common.py.
"""

from __future__ import annotations

import errno
import logging
import shutil
import socket
from typing import Any

from django.conf import settings
from django.utils.translation import gettext_noop

from model_store.errors import ModelStoreError
from model_store.store import ModelStore
from model_store.text import Message, Said, said, say
from model_store.uploads import human_bytes
from webapp.registry.build.common import StepFailed, remove_unfinished_package
from webapp.registry.build.compile_steps import run_compile, run_validate
from webapp.registry.build.package_step import run_package, run_reuse
from webapp.registry.build.verify_step import run_verify
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.db_outage import is_connection_error, retrying
from webapp.registry.jobs.models import Job

log = logging.getLogger(__name__)


def _disk_full(store: ModelStore, step: str) -> Message:
    free = shutil.disk_usage(store.root).free
    return say(
        "The store's disk filled up during the %(step)s step (%(free)s free now, %(floor)s "
        "should stay free). Nothing was kept: free space on the store's disk (or ask an "
        "administrator), then upload the file again.",
        step=step, free=human_bytes(free), floor=human_bytes(settings.STORE_MIN_FREE_BYTES),
    )  # fmt: skip


STEPS = {
    "validate": run_validate,
    "compile": run_compile,
    "verify": run_verify,
    "reuse": run_reuse,
    "package": run_package,
}


def run_step(step: str, job_id: int) -> bool:
    """Run one step; record any failure. Returns False when the chain must stop."""
    job = Job.objects.select_related("model", "version").get(pk=job_id)
    if job.is_finished:
        return False
    try:
        STEPS[step](job)
        return True
    except StepFailed as exc:
        _record_failure(job, exc.message, exc.code, cancelled=exc.cancelled)
    except ModelStoreError as exc:
        code = getattr(exc, "code", "failed")
        _record_failure(job, said(exc), code, cancelled=code == "cancelled")
    except (
        Exception
    ) as exc:  # a bug or an environment problem: say so, keep the traceback in the log
        if is_connection_error(exc):
            # The database went away (a restart): nothing can be recorded now. The task runs
            # this step again once it is back (workers/tasks/compile.py); the step starts over.
            log.warning("compile step %s of job %s lost the database: %s", step, job.uuid, exc)
            raise
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            _record_failure(job, _disk_full(get_store(), step), "insufficient_storage")
            return False
        log.exception("compile step %s of job %s crashed", step, job.uuid)
        _record_failure(
            job,
            say(
                "Unexpected error in %(step)s: %(error)s. The worker log has details.",
                step=step, error=str(exc),
            ),
            "internal_error",
        )  # fmt: skip
    return False


def record_timeout(job_id: int, step: str) -> None:
    job = Job.objects.select_related("model").get(pk=job_id)
    _record_failure(
        job, say("The %(step)s step ran past its time limit and was stopped.", step=step), "timeout"
    )


def record_database_lost(job_id: int, step: str, exc: BaseException) -> None:
    """The database stayed away through every retry of a step: fail the job if it can be."""
    job = retrying(lambda: Job.objects.select_related("model", "version").get(pk=job_id))
    _record_failure(
        job,
        say(
            "The %(step)s step lost the database connection and it did not come back in time "
            "(%(error)s). Nothing was kept; upload the file again to retry.",
            step=step, error=str(exc),
        ),
        "database_unavailable",
    )  # fmt: skip


def _record_failure(job: Job, message: Said, code: str, *, cancelled: bool = False) -> None:
    # Clean up before announcing the end, so whoever sees "failed" also sees no leftovers.
    store = get_store()
    store.remove_work_dir(job.uuid.hex)
    if job.version is not None:
        remove_unfinished_package(store, job, job.version)
    jobs.log(job, message, "error")
    jobs.fail(job, message, code, cancelled=cancelled)


def fail_interrupted_compiles() -> list[Message]:
    """Compile jobs whose step is "running" in a process of this host that is gone (a killed
    or restarted worker): failed with the reason; their scratch files and any half-built
    package are removed. Called by reconcile (each worker start sends one)."""
    import psutil

    host = socket.gethostname()
    repairs = []
    # Adopt jobs copy files into a version the same way (one version, whole or absent).
    retry = {
        Job.Kind.COMPILE: gettext_noop(
            "The worker stopped in the middle of the %(step)s step (it was killed or "
            "restarted); nothing was kept. Upload the file again to retry."
        ),
        Job.Kind.ADOPT: gettext_noop(
            "The worker stopped in the middle of the %(step)s step (it was killed or "
            "restarted); nothing was kept. Adopt again to retry."
        ),
        # Its trials are recorded one by one; the loaded one is removed below (tuning.py).
        Job.Kind.TUNE: gettext_noop(
            "The worker stopped in the middle of the %(step)s step (it was killed or "
            "restarted); the trials measured so far are kept. Start the search again to retry."
        ),
    }
    running = Job.objects.filter(kind__in=list(retry), state=Job.State.RUNNING)
    for job in running.select_related("model", "version"):
        runner = (job.params or {}).get("runner") or {}
        step_running = any(s.get("state") == "running" for s in job.steps)
        if runner.get("host") != host or not step_running or _alive(runner, psutil):
            continue
        # The template is one of the marked sentences above (a variable, so say() is told
        # by Message directly; gettext_noop put each in the catalogue).
        message = Message(retry[Job.Kind(job.kind)], {"step": job.step})
        _record_failure(job, message, "interrupted")
        if job.kind == Job.Kind.ADOPT and job.version is not None:
            # A failed adopted version is adopted again next time (webapp.registry.catalogue.adopt).
            Version.objects.filter(pk=job.version.pk).update(
                status=Version.Status.FAILED, error=message
            )
        values = {"model": job.model.name, "job": str(job.uuid)}
        if job.kind == Job.Kind.ADOPT:
            said = say("%(model)s: marked the interrupted adopt job %(job)s failed.", **values)
        elif job.kind == Job.Kind.TUNE:
            said = say("%(model)s: marked the interrupted tune job %(job)s failed.", **values)
        else:
            said = say("%(model)s: marked the interrupted compile job %(job)s failed.", **values)
        repairs.append(said)
    return repairs


def _alive(runner: dict[str, Any], psutil: Any) -> bool:
    try:
        process = psutil.Process(int(runner["pid"]))
        started = process.create_time()
        zombie = process.status() == psutil.STATUS_ZOMBIE
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False
    # The same pid with another start time is another process (pids are reused).
    return not zombie and abs(started - float(runner.get("since") or 0)) < 0.5

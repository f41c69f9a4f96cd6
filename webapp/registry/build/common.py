"""What the compile job's steps share (webapp/registry/build/pipeline.py runs them by name): the
failure they raise, the checks a step makes before it writes (a cancel requested, the store's
free space), the version's source and verification sample as a step reads them, and the
removal of a half-built package.

Apart from the steps, so that each group of steps and the runner import it without importing
one another.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
from django.conf import settings

from model_store.file_io import link_or_copy
from model_store.store import ModelStore
from model_store.targets import get_target
from model_store.text import Said, say
from model_store.uploads import human_bytes, unpack_bundle
from webapp.registry.build import state_file as job_state
from webapp.registry.catalogue.models import Version
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.db_outage import retrying
from webapp.registry.jobs.models import Job


class StepFailed(Exception):
    """A deterministic failure: recorded on the job, never retried."""

    def __init__(self, message: Said, code: str, *, cancelled: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.cancelled = cancelled


def check_free_space(store: ModelStore, need: int, what: Said) -> None:
    """Refuse a step before it writes when the store's disk would fall under its floor
    (``STORE_MIN_FREE_BYTES``, the one uploads keep too), with the numbers."""
    floor = settings.STORE_MIN_FREE_BYTES
    free = shutil.disk_usage(store.root).free
    if free - need < floor:
        raise StepFailed(
            say(
                "The store's disk has %(free)s free; %(what)s needs about %(need)s and "
                "%(floor)s must stay free. Nothing was kept: free space on the store's disk "
                "(or ask an administrator), then upload the file again.",
                free=human_bytes(free), what=what, need=human_bytes(need),
                floor=human_bytes(floor),
            ),
            "insufficient_storage",
        )  # fmt: skip


def check_cancel(job: Job) -> None:
    if Job.objects.filter(pk=job.pk, cancel_requested=True).exists():
        raise StepFailed(say("Cancelled on request."), "cancelled", cancelled=True)


def sample_arrays(version: Version) -> dict[str, np.ndarray]:
    """The uploader's sample as arrays of each input's own dtype (from the signature)."""
    dtypes = {t["name"]: t.get("numpy") for t in version.signature.get("inputs", [])}
    sample = version.verification_sample or {}
    try:
        return {name: np.asarray(value, dtype=dtypes.get(name)) for name, value in sample.items()}
    except (TypeError, ValueError) as exc:
        raise StepFailed(
            say("The verification sample is not numeric: %(error)s", error=str(exc)),
            "invalid_sample",
        ) from exc


def source_onnx(store: ModelStore, job: Job, version: Version) -> Path:
    """The version's source as an ``.onnx`` path in the job's work directory (a bundle is
    unpacked there with its external data files)."""
    work = job_state.work_dir(store, job)
    store.fresh_work_dir(job.uuid.hex, "source")
    source_dir = store.source_dir(job.model.name, version.number)
    if (source_dir / "bundle.zip").exists():
        jobs.log(job, "Unpacking the bundle (one .onnx with its external data files)…")
        return unpack_bundle(
            source_dir / "bundle.zip", work / "source", max_total_bytes=settings.UPLOAD_MAX_BYTES
        )
    onnx_path = work / "source" / "model.onnx"
    link_or_copy(source_dir / "model.onnx", onnx_path)
    return onnx_path


def remove_unfinished_package(store: ModelStore, job: Job, version: Version) -> None:
    """What an interrupted package step left (the version never became READY): its package
    and its repository directory, so that no half-built version stays and the step can start
    over. A READY version's files are never touched."""
    retrying(lambda: version.refresh_from_db(fields=["status"]))
    if version.status == Version.Status.READY:
        return
    name, number = job.model.name, version.number
    shutil.rmtree(store.package_dir(name, number), ignore_errors=True)
    side_by_side = get_target(job.model.target).versions_side_by_side
    if side_by_side and store.version_dir(name, number).is_dir():
        store.remove_version(name, number)


def version_of(job: Job) -> Version:
    assert job.version is not None
    return job.version

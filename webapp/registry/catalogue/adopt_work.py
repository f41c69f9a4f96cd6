"""The worker's side of adopting: copy one version in, verify it where the hub can, package it.

One job per version (``webapp.registry.catalogue.adopt``): copy -> verify -> package. The
team's files are copied (never moved, never linked: their later edits must not change what
the hub holds) into the job's work directory, each checked against the SHA-256 the scan
recorded, so a file that changed since the dry run fails the version instead of slipping in.
The package is then published whole (``ModelStore.package_version``), and any failure removes
every trace, so a version is there complete or not at all.

Verification: ONNX versions (``onnxruntime``, ``npu_ge``) are run with ONNX Runtime on this
worker on random inputs (:func:`model_store.verify.verify`, the file against itself: it loads,
runs and gives finite outputs); an ``external`` version cannot be run here, so it keeps its
"adopted" verification and needs an admin's recorded override before it may serve.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import shutil
from pathlib import Path
from typing import Any

from model_store.errors import ModelStoreError
from model_store.file_io import atomic_write_text, link_or_copy
from model_store.onnx_info import inspect_onnx
from model_store.store import ModelStore
from model_store.targets import get_target
from model_store.text import Message, Said, from_json, say
from model_store.verify import verify
from webapp.registry.build.compile_steps import summary_of
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.db_outage import retrying
from webapp.registry.jobs.models import Job

log = logging.getLogger(__name__)
CHUNK = 1024 * 1024


class AdoptFailed(Exception):
    """A version could not be adopted; the message says why and what to do."""

    def __init__(self, message: Said, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def run_adopt_job(job_id: int) -> None:
    """Runs one adopt job (claimed first, so a redelivered message does nothing)."""
    if not Job.objects.filter(pk=job_id, state=Job.State.QUEUED).update(state=Job.State.RUNNING):
        return
    # Claimed: a database restart now must be waited out, or the job would stay running.
    job = retrying(
        lambda: Job.objects.select_related("model", "version", "created_by").get(pk=job_id)
    )
    store = get_store()
    try:
        _adopt(job, store)
    except (AdoptFailed, ModelStoreError, OSError) as exc:
        message = getattr(exc, "message", None) or str(exc)
        message = message if isinstance(message, Message) else str(message)
        code = getattr(exc, "code", "adopt_failed")
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            message = say("The store's disk filled up; nothing was kept.")
            code = "insufficient_storage"
        _undo(job, store)
        _failed(job, message, str(code))
    except Exception as exc:
        log.exception("adopt job %s crashed", job.uuid)
        _undo(job, store)
        _failed(
            job,
            say("Unexpected error: %(error)s. The worker log has details.", error=str(exc)),
            "internal_error",
        )
    finally:
        store.remove_work_dir(job.uuid.hex)


def _adopt(job: Job, store: ModelStore) -> None:
    version = _version(job)
    target = get_target(job.model.target)
    jobs.start_step(job, "copy", Version.Status.VALIDATING)
    work = store.fresh_work_dir(job.uuid.hex, "files")
    files = _copy_checked(job, Path(job.params["origin"]), work)
    jobs.finish_step(job, "copy", say("%(count)s file(s) copied and checked", count=len(files)))

    jobs.start_step(job, "verify", Version.Status.VERIFYING)
    main = _main_file(files, target.name)
    if main is not None and main.suffix == ".onnx":
        _verify_onnx(job, version, main)
    else:
        jobs.log(job, "Not verified: the hub cannot run this backend outside Triton. An admin "
                 "checks it and records an override before it may serve.", "warning")  # fmt: skip
        jobs.finish_step(job, "verify", say("not run: adopted as external"), "warning")

    jobs.start_step(job, "package", Version.Status.PACKAGING)
    name, number = job.model.name, version.number
    store.package_version(
        name,
        number,
        files={path.name: path for path in files},
        config_text=version.config_pbtxt,
        install=target.versions_side_by_side,
    )
    _keep_source(store, job, main)
    version.artifact_name = main.name if main is not None else ""
    version.artifact_sha256 = _sha256(main) if main is not None else ""
    version.artifact_size = main.stat().st_size if main is not None else None
    version.status = Version.Status.READY
    version.error = ""
    version.save()
    jobs.finish_step(
        job,
        "package",
        say("packaged as %(name)s/%(number)s with its config.pbtxt", name=name, number=number),
    )
    jobs.record_event(
        model=job.model,
        version=version,
        job=job,
        kind="version.adopted",
        actor=job.created_by,
        message=say(
            "Version %(number)s adopted from %(origin)s (verification %(status)s).",
            number=number,
            origin=job.params["origin"],
            status=jobs.verification_word((version.verification or {}).get("status")),
        ),
        data={"origin": job.params["origin"], "digest": version.source_sha256},
    )
    jobs.succeed(job, "adopted")


def _copy_checked(job: Job, origin: Path, work: Path) -> list[Path]:
    """Copies every recorded file of ``origin`` into ``work``, checking size and SHA-256."""
    copied = []
    for entry in job.params["files"]:
        source = origin / entry["path"]
        target = work / entry["path"]
        digest = _copy_hashing(source, target)
        if digest != entry["sha256"]:
            raise AdoptFailed(
                say(
                    "%(file)s changed since the scan (its SHA-256 differs); nothing was kept. "
                    "Run the dry run again and adopt what it shows.",
                    file=str(source),
                ),
                "changed_since_scan",
            )
        copied.append(target)
        jobs.log(job, f"Copied {entry['path']} ({entry['size']} bytes), SHA-256 {digest[:12]}…")
    return copied


def _copy_hashing(source: Path, target: Path) -> str:
    digest = hashlib.sha256()
    try:
        with source.open("rb") as src, target.open("xb") as dst:
            while block := src.read(CHUNK):
                digest.update(block)
                dst.write(block)
    except FileNotFoundError as exc:
        raise AdoptFailed(
            say("%(file)s is gone since the scan; nothing was kept.", file=str(source)),
            "changed_since_scan",
        ) from exc
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _main_file(files: list[Path], target: str) -> Path | None:
    """The model file of an ONNX version (``model.onnx``, or the one ``.onnx`` for npu_ge)."""
    if target == "external":
        return None
    named = [p for p in files if p.name == "model.onnx"]
    onnx = named or [p for p in files if p.suffix == ".onnx"]
    return onnx[0] if onnx else None


def _verify_onnx(job: Job, version: Version, model_file: Path) -> None:
    info = inspect_onnx(model_file)
    version.onnx_summary = summary_of(info)
    try:
        plan = get_target(job.model.target).verify_plan({}, info)
        batch, shapes = plan.batch, plan.input_shapes
    except ModelStoreError:
        batch, shapes = 1, None
    jobs.log(job, "Running the adopted model with ONNX Runtime on random inputs…")
    report = verify(model_file, model_file, "onnx", precision="fp32", batch=batch,
                    input_shapes=shapes).to_dict()  # fmt: skip
    report["adopted"] = True
    report["note"] = (
        "Adopted as found: the file loaded and ran with ONNX Runtime on this worker's CPU "
        "(compared with itself, so this checks that it runs, not what it was trained to do)."
    )
    version.verification = report
    version.save(update_fields=["onnx_summary", "verification", "updated"])
    status = report.get("status")
    if status == "passed":
        jobs.finish_step(job, "verify", say("runs with ONNX Runtime"))
    else:
        jobs.log(job, f"Verification {status}: {from_json(report.get('reason'))!s}", "warning")
        jobs.finish_step(
            job, "verify", say("%(status)s; an admin override is needed", status=status), "warning"
        )


def _keep_source(store: ModelStore, job: Job, main: Path | None) -> None:
    """Beside the package: where it came from, and the ONNX as the version's source."""
    version = _version(job)
    folder = store.source_dir(job.model.name, version.number)
    manifest: dict[str, Any] = {
        "origin": job.params["origin"],
        "digest": version.source_sha256,
        "files": job.params["files"],
    }
    atomic_write_text(folder / "adopted.json", _json(manifest))
    if main is not None:
        packaged = store.package_dir(job.model.name, version.number) / str(version.number)
        link_or_copy(packaged / main.name, folder / "model.onnx")
        atomic_write_text(folder / "model.onnx.sha256", f"{_sha256(main)}  model.onnx\n")


def _json(data: dict[str, Any]) -> str:
    import json

    return json.dumps(data, indent=2) + "\n"


def _undo(job: Job, store: ModelStore) -> None:
    """Removes whatever this job published (package, source, repository version)."""
    version = job.version
    if version is None:
        return
    version.refresh_from_db(fields=["status"])
    if version.status == Version.Status.READY:
        return
    name, number = job.model.name, version.number
    shutil.rmtree(store.source_dir(name, number), ignore_errors=True)
    if store.version_dir(name, number).is_dir():
        store.remove_version(name, number)


def _failed(job: Job, message: Said, code: str) -> None:
    if job.version_id:
        Version.objects.filter(pk=job.version_id).update(
            status=Version.Status.FAILED, error=message
        )
    jobs.log(job, message, "error")
    jobs.fail(job, message, code)


def _version(job: Job) -> Version:
    assert job.version is not None
    return job.version

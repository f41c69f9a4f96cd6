"""The compile job's last steps: package the artifact with its generated config.pbtxt into the
store (or, for a config revision, reuse the original's packaged artifact, checked byte for
byte, instead of building one), then serve the version if the upload asked for that.
"""

from __future__ import annotations

from pathlib import Path

from model_store.config import render_pbtxt
from model_store.config_lint import lint
from model_store.file_io import sha256_file
from model_store.onnx_info import inspect_onnx
from model_store.targets import get_target
from model_store.text import joined, say
from webapp.registry.build import state_file as job_state
from webapp.registry.build.common import (
    StepFailed,
    check_cancel,
    check_free_space,
    remove_unfinished_package,
    source_onnx,
    version_of,
)
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.db_outage import retrying
from webapp.registry.jobs.models import Job


def run_reuse(job: Job) -> None:
    """A config revision that keeps the artifact (model_store.targets.revise): hand the
    original's packaged file, checked against its recorded SHA-256, and its verification to
    the package step. Nothing is rebuilt: the bytes are the same, so what was measured holds."""
    version = version_of(job)
    store = get_store()
    jobs.start_step(job, "reuse", Version.Status.PACKAGING)
    check_cancel(job)
    original = version.revision_of
    if original is None or original.status != Version.Status.READY or not original.artifact_name:
        raise StepFailed(
            say(
                "The version this revises is gone or no longer packaged, so there is no "
                "artifact to reuse. Revise a packaged version instead."
            ),
            "original_gone",
        )
    name, number = job.model.name, original.number
    artifact = store.package_dir(name, number) / str(number) / original.artifact_name
    if not artifact.is_file():
        raise StepFailed(
            say(
                "Version %(number)s's packaged %(artifact)s is missing from the store; nothing "
                "was reused. Upload the model again (or restore the store).",
                number=number, artifact=original.artifact_name,
            ),
            "package_missing",
        )  # fmt: skip
    digest = sha256_file(artifact)
    if digest != original.artifact_sha256:
        raise StepFailed(
            say(
                "Version %(number)s's %(artifact)s on disk is not the file that was verified "
                "(SHA-256 %(found)s… instead of %(expected)s…); it is not reused. Check the "
                "store's disk, then upload the model again.",
                number=number, artifact=original.artifact_name, found=digest[:12],
                expected=original.artifact_sha256[:12],
            ),
            "artifact_changed",
        )  # fmt: skip
    onnx_path = source_onnx(store, job, version)
    job_state.update(
        store, job, artifact=str(artifact), artifact_name=original.artifact_name,
        onnx_path=str(onnx_path),
    )  # fmt: skip
    verification = dict(original.verification or {"status": "not_run"})
    verification["reused_from"] = number
    note = say(
        "The artifact is version %(number)s's, byte for byte (SHA-256 checked); its "
        "verification holds. Only config.pbtxt changed.",
        number=number,
    )
    verification["note"] = note.to_json()
    version.verification = verification
    version.cann_version = original.cann_version
    version.cann_ops_version = original.cann_ops_version
    retrying(
        lambda: version.save(
            update_fields=[
                "verification",
                "cann_version",
                "cann_ops_version",
                "findings",
                "updated",
            ]
        )
    )
    jobs.log(
        job,
        f"Reusing version {number}'s {original.artifact_name} (SHA-256 {digest[:12]}… checked) "
        f"and its verification ({verification.get('status')}); no compile needed.",
    )
    jobs.finish_step(
        job,
        "reuse",
        say(
            "%(artifact)s of v%(number)s, SHA-256 checked",
            artifact=original.artifact_name, number=number,
        ),
    )  # fmt: skip


def run_package(job: Job) -> None:
    version = version_of(job)
    store = get_store()
    target = get_target(job.model.target)
    jobs.start_step(job, "package", Version.Status.PACKAGING)
    check_cancel(job)
    state = job_state.read(store, job)
    artifact = Path(state["artifact"])
    name, number = job.model.name, version.number
    info = (
        inspect_onnx(artifact)
        if artifact.suffix == ".onnx"
        else inspect_onnx(Path(state["onnx_path"]))
    )
    remove_unfinished_package(store, job, version)
    config = target.make_config(name, info, version.options, number)
    problems = lint(config)
    if problems:
        raise StepFailed(
            say(
                "The generated config.pbtxt is not valid: %(problems)s",
                problems=joined(problems, "; "),
            ),
            "invalid_config",
        )
    text = render_pbtxt(config)
    files = {state["artifact_name"]: artifact}
    files |= {f: artifact.parent / f for f in _external_files(artifact)}
    check_free_space(store, sum(f.stat().st_size for f in files.values()), "packaging the artifact")
    store.package_version(
        name, number, files=files, config_text=text, install=target.versions_side_by_side
    )
    version.config_pbtxt = text
    version.artifact_name = state["artifact_name"]
    version.artifact_sha256 = sha256_file(artifact)
    version.artifact_size = artifact.stat().st_size
    version.status = Version.Status.READY
    version.error = ""
    retrying(version.save)
    jobs.log(job, f"Packaged as {name}/{number}/{version.artifact_name} with its config.pbtxt.")
    jobs.finish_step(job, "package", say("config.pbtxt generated and linted"))
    verification_status = (version.verification or {}).get("status", "not run")
    retrying(
        lambda: jobs.record_event(
            model=job.model,
            version=version,
            job=job,
            kind="version.packaged",
            actor=job.created_by,
            message=say(
                "Version %(number)s packaged (verification %(status)s).",
                number=number, status=jobs.verification_word(verification_status),
            ),
            data={"artifact_sha256": version.artifact_sha256},
        )
    )  # fmt: skip
    store.remove_work_dir(job.uuid.hex)
    jobs.succeed(job, "packaged")
    if (job.params or {}).get("serve_when_packaged"):
        _serve_now(job, version)


def _serve_now(job: Job, version: Version) -> None:
    """Queue the switch a compile job was asked to end with; say why when it cannot."""
    from webapp.errors import HubError
    from webapp.registry.serving.actions.switch import request_switch

    if job.created_by is None:
        return
    try:
        switch = request_switch(
            model=job.model,
            number=version.number,
            user=job.created_by,
            reason=say("serve as soon as packaged (requested with the upload)"),
        )
    except HubError as exc:
        jobs.log(job, f"Not served automatically: {exc.message!s}", "warning")
        return
    jobs.log(job, f"Serving v{version.number}: switch job {switch.uuid}.")


def _external_files(artifact: Path) -> list[str]:
    if artifact.suffix != ".onnx":
        return []
    return list(inspect_onnx(artifact).external_data_files)

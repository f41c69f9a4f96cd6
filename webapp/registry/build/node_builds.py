"""The compile step when it runs on a node: send it, hand the node its source, take the artifact.

:func:`webapp.nodes.build_routing.build_route` chose a node (docs/nodes.md#host-bound-builds). Then:

1. the validated source (the ONNX file and any external data) is written as a files tar in
   the job's work directory, with its SHA-256;
2. ``node.build`` goes to the node's queue with ids, names, the options and that SHA-256
   (never a path: the node shares no file system with the hub);
3. the node fetches the source with its token (:func:`source_tar`), checks the hash, runs
   ATC and verifies the artifact on its NPU, and uploads the artifact as a files tar
   (:func:`receive_artifact`), which is checked and unpacked here;
4. the node's answer (ATC's command and log, its CANN version, the verification report)
   comes back through the result backend; the artifact it names must be among the files it
   uploaded, with the hash it announced.

The hub worker waits for the answer, asking every few seconds whether the job was cancelled
or the node went down (then the step fails with that reason). A node can lie about the
numbers it reports as any Triton host can; it cannot write outside the job's directory, and
the artifact is packaged from the bytes it uploaded.
"""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils.translation import gettext

from model_store.file_io import StreamTooLarge, save_stream, sha256_file
from model_store.names import validate_file_name
from model_store.package_tar.files import extract_files, write_files
from model_store.package_tar.layout import PackageTarError
from model_store.text import say
from webapp import dispatch
from webapp.errors import HubError
from webapp.nodes.build_routing import Route
from webapp.nodes.replies import NodeTaskFailed, answer_reason, wait_for_answer
from webapp.registry.build import state_file as job_state
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job

log = logging.getLogger(__name__)

#: At most this many of the node's log lines are copied to the job (ATC's tail matters).
MAX_LOG_LINES = 300
#: The compile task's own limit is an hour; the wait ends a little before it.
WAIT_LIMIT_S = 3500
SOURCE_TAR = "node-source.tar"
ARTIFACT_TAR = "node-artifact.tar"
ARTIFACT_DIR = "node-build"
_HEX64 = re.compile(r"[0-9a-f]{64}")


class NodeBuildFailed(NodeTaskFailed):
    """The node answered with a failure, or stopped answering; recorded on the job."""


def build_on_node(
    job: Job, version: Version, route: Route, onnx_path: Path, samples: list[dict[str, Any]]
) -> dict[str, Any]:
    """Runs the compile (and the verification) on ``route.node``; the checked answer.

    Returns:
        ``{"artifact": Path, "artifact_name", "commands", "notes", "cann", "verification"}``.

    Raises:
        NodeBuildFailed: The node refused or failed (its reason), went down, the job was
            cancelled, or its answer does not check out.
    """
    node = route.node
    assert node is not None
    store = get_store()
    work = store.work_dir(job.uuid.hex)
    job.params = {**(job.params or {}), "build_node": node}
    Job.objects.filter(pk=job.pk).update(params=job.params)
    jobs.log(job, f"Building on node {node}: {route.why}.")
    source_root = onnx_path.parent
    (work / SOURCE_TAR).unlink(missing_ok=True)
    files = {str(p.relative_to(source_root)): p for p in source_root.rglob("*") if p.is_file()}
    source = write_files(files, work / SOURCE_TAR)
    result = dispatch.node_task(
        node,
        "node.build",
        {
            "job": job.uuid.hex,
            "model": job.model.name,
            "version": version.number,
            "target": job.model.target,
            "options": version.options,
            "source_sha256": source.sha256,
            "source_name": str(onnx_path.relative_to(source_root)),
            "samples": samples,
        },
    )
    try:
        answer = wait_for_answer(job, node, result, limit_s=WAIT_LIMIT_S, what="build")
    except NodeTaskFailed as exc:
        raise NodeBuildFailed(exc.message, exc.code, cancelled=exc.cancelled) from None
    if answer.get("ok") is not True:
        _copy_log(job, node, answer)
        reason = answer_reason(answer.get("reason"), 2000)
        raise NodeBuildFailed(
            say("Node %(node)s: %(reason)s", node=node, reason=reason)
            if reason
            else say("Node %(node)s: the build failed", node=node),
            str(answer.get("code") or "node_build_failed")[:64],
        )
    return _checked_answer(job, node, work, answer)


def _copy_log(job: Job, node: str, answer: dict[str, Any]) -> None:
    lines = answer.get("log")
    for line in (lines if isinstance(lines, list) else [])[-MAX_LOG_LINES:]:
        jobs.log(job, f"[{node}] {str(line)[:4000]}")


def _checked_answer(job: Job, node: str, work: Path, answer: dict[str, Any]) -> dict[str, Any]:
    _copy_log(job, node, answer)
    received = _received(job)
    announced = str(answer.get("artifact_sha256") or "")
    if received is None or received["sha256"] != announced:
        raise NodeBuildFailed(
            say(
                "Node %(node)s says it built the artifact, but the hub did not receive that "
                "upload (announced %(sha256)s).",
                node=node,
                sha256=announced[:64],
            )
            if announced
            else say(
                "Node %(node)s says it built the artifact, but the hub did not receive that "
                "upload (announced nothing).",
                node=node,
            ),
            "node_artifact_missing",
        )
    name = validate_file_name(answer.get("artifact_name"))
    if name not in received["files"]:
        raise NodeBuildFailed(
            say(
                "Node %(node)s named the artifact %(name)s, which is not among the files it "
                "uploaded.",
                node=node,
                name=repr(name),
            ),
            "node_artifact_missing",
        )
    verification = answer.get("verification")
    return {
        "artifact": work / ARTIFACT_DIR / name,
        "artifact_name": name,
        "commands": [str(c)[:4000] for c in _list(answer.get("commands"))][:20],
        "notes": [str(n)[:2000] for n in _list(answer.get("notes"))][:50],
        "cann": answer.get("cann") if isinstance(answer.get("cann"), dict) else {},
        "verification": _checked_verification(verification, node),
    }


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _checked_verification(report: object, node: str) -> dict[str, Any]:
    """The node's verification report, as the version page shows one, said to be from it."""
    if not isinstance(report, dict) or report.get("status") not in ("passed", "failed", "not_run"):
        reason = say("node %(node)s sent no verification report", node=node)
        return {"status": "not_run", "reason": reason.to_json()}
    return {**report, "node": node}


# --------------------------------------------------------------------------- the node's calls


def running_build(name: str, job_uuid: str) -> tuple[Job, Path]:
    """The compile job ``job_uuid`` that node ``name`` is building now, and its work dir.

    Raises:
        HubError: 404 when there is no such job building on that node (finished, another
            node's, or never): the node learns nothing more.
    """
    job = None
    if re.fullmatch(r"[0-9a-f]{32}", job_uuid):
        job = (
            Job.objects.filter(uuid=job_uuid, kind=Job.Kind.COMPILE, step="compile")
            .exclude(state__in=[Job.State.SUCCEEDED, Job.State.FAILED, Job.State.CANCELLED])
            .first()
        )
    if job is None or (job.params or {}).get("build_node") != name:
        raise HubError(
            gettext("Node %(node)s has no build %(job)s running.")
            % {"node": repr(name), "job": repr(job_uuid[:32])},
            "not_found",
            404,
        )
    return job, get_store().work_dir(job.uuid.hex)


def source_tar(name: str, job_uuid: str) -> tuple[Path, str]:
    """The source tar of a running build, and its SHA-256 (the one sent with the task)."""
    _, work = running_build(name, job_uuid)
    path = work / SOURCE_TAR
    if not path.is_file():
        raise HubError(gettext("The build's source is not ready."), "not_found", 404)
    return path, sha256_file(path)


def receive_artifact(name: str, job_uuid: str, request: HttpRequest) -> dict[str, Any]:
    """Streams the node's artifact tar into the job's work dir, checks and unpacks it."""
    job, work = running_build(name, job_uuid)
    announced = (request.headers.get("X-Content-SHA256") or "").strip().lower()
    if not _HEX64.fullmatch(announced):
        raise HubError(gettext("Send the tar's SHA-256 in X-Content-SHA256."), "invalid_field")
    limit = 2 * settings.UPLOAD_MAX_BYTES
    tar = work / ARTIFACT_TAR
    tar.unlink(missing_ok=True)
    shutil.rmtree(work / ARTIFACT_DIR, ignore_errors=True)
    _save_body(request, tar, limit)
    try:
        files = extract_files(tar, work / ARTIFACT_DIR, announced, max_bytes=limit)
    except PackageTarError as exc:
        raise HubError(
            gettext("The artifact tar was refused: %(problem)s") % {"problem": exc},
            "invalid_artifact",
            400,
        ) from None
    finally:
        tar.unlink(missing_ok=True)
    job_state.update(get_store(), job, node_artifact={"sha256": announced, "files": files})
    jobs.log(job, f"Received the artifact from node {name} ({', '.join(files)[:500]}).")
    return {"received": True, "sha256": announced, "files": files}


def _save_body(request: HttpRequest, dest: Path, limit: int) -> None:
    try:
        save_stream(request.read, dest, limit)
    except StreamTooLarge:
        raise HubError(
            gettext("The artifact is over %(limit)s bytes (twice UPLOAD_MAX_BYTES).")
            % {"limit": limit},
            "too_large",
            413,
        ) from None


def _received(job: Job) -> dict[str, Any] | None:
    found = job_state.read(get_store(), job).get("node_artifact")
    return found if isinstance(found, dict) else None

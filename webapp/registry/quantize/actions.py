"""Quantise a packaged version to INT8: the request (what may be quantised, on which inputs),
answered at once, and the new version it makes, built and verified by the compile job.

The new version is a revision of the FP32 one: it shares its source, and its job runs the
usual validate -> compile -> verify -> package chain, with the compile step quantising
(``webapp/registry/quantize/build.py``) and the verify step comparing with the FP32 source
on the held-out inputs only, under the INT8 tolerances. A version that fails is not
publishable, as for any build.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
from django.contrib.auth.models import User
from django.utils.translation import gettext

from model_store.errors import ModelStoreError
from model_store.quantize import MIN_INPUTS, Plan, QuantizeRefused, check_quantizable, split
from model_store.targets import get_target
from model_store.text import say
from webapp import dispatch
from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store, get_uploads
from webapp.registry.jobs.models import Job
from webapp.registry.performance.actions.revisions import make_revision
from webapp.registry.quantize import calibration
from webapp.registry.quantize.ascend import ascend_quantizer
from webapp.text import localize

DEFAULT_MAX_ITEMS = 256
MAX_ITEMS = 2048
_BODY_KEYS = {
    "method", "calibration", "max_items", "calibrate_method", "activations", "per_channel",
    "exclude_nodes",
}  # fmt: skip


@dataclass(frozen=True)
class QuantizeRequest:
    """A parsed ``{"quantize": {...}}`` body."""

    source: str
    upload_id: str
    max_items: int
    plan: Plan
    #: The calibration upload's SHA-256 as the client computed it (empty: not checked).
    upload_sha256: str = ""


def _bad(message: str, code: str = "invalid_field") -> HubError:
    return HubError(message, code, 400)


def parse(body: object) -> QuantizeRequest:
    """The ``quantize`` object of a revise request.

    Raises:
        HubError: 400 naming the field that is wrong.
    """
    if not isinstance(body, dict):
        raise _bad(gettext('"quantize" must be an object, e.g. {"method": "static", '
                           '"calibration": "captures"}.'))  # fmt: skip
    unknown = sorted(set(body) - _BODY_KEYS)
    if unknown:
        raise _bad(
            gettext("Unknown quantize field(s): %(fields)s.") % {"fields": ", ".join(unknown)}
        )
    if body.get("method", "static") != "static":
        raise _bad(gettext('Only "static" quantisation is offered (ONNX Runtime, QDQ).'))
    source, upload_id, sha256 = _calibration_source(body.get("calibration", "captures"))
    max_items = body.get("max_items", DEFAULT_MAX_ITEMS)
    if isinstance(max_items, bool) or not isinstance(max_items, int):
        raise _bad(gettext("max_items must be a whole number."))
    if not MIN_INPUTS <= max_items <= MAX_ITEMS:
        raise _bad(
            gettext("max_items must be from %(low)s to %(high)s.")
            % {"low": MIN_INPUTS, "high": MAX_ITEMS}
        )
    return QuantizeRequest(source, upload_id, max_items, _plan(body), sha256)


def _calibration_source(value: object) -> tuple[str, str, str]:
    if value in ("captures", "examples"):
        return str(value), "", ""
    if isinstance(value, dict) and "upload_id" in value and set(value) <= {"upload_id", "sha256"}:
        upload_id, sha256 = value["upload_id"], value.get("sha256", "")
        if (
            isinstance(upload_id, str)
            and 0 < len(upload_id) <= 64
            and isinstance(sha256, str)
            and len(sha256) <= 64
        ):
            return "upload", upload_id, sha256.strip().lower()
    raise _bad(
        gettext('calibration must be "captures", "examples" or {"upload_id": "<id of a '
                'finished .npz upload>"}.')
    )  # fmt: skip


def _plan(body: dict[str, Any]) -> Plan:
    method = body.get("calibrate_method", "minmax")
    if method not in ("minmax", "percentile", "entropy"):
        raise _bad(gettext("calibrate_method must be minmax, percentile or entropy."))
    activations = body.get("activations", "int8")
    if activations not in ("int8", "uint8"):
        raise _bad(gettext("activations must be int8 or uint8."))
    per_channel = body.get("per_channel", True)
    if not isinstance(per_channel, bool):
        raise _bad(gettext("per_channel must be true or false."))
    exclude = body.get("exclude_nodes", [])
    if not (
        isinstance(exclude, list)
        and len(exclude) <= 500
        and all(isinstance(n, str) and 0 < len(n) <= 256 for n in exclude)
    ):
        raise _bad(gettext("exclude_nodes must be a list of node names."))
    return Plan(
        calibration=method, activations=activations, per_channel=per_channel,
        exclude_nodes=tuple(exclude),
    )  # fmt: skip


def availability(version: Version) -> tuple[bool, str]:
    """Whether this version's target can be quantised by the hub here, and if not, why."""
    target = get_target(version.model.target)
    if target.name == "onnxruntime":
        return True, ""
    if target.needs_cann:
        return False, ascend_quantizer().why
    return False, gettext("The hub did not build this model, so it cannot quantise it.")


def check_version(version: Version) -> onnx.ModelProto:
    """Raises a 409 :class:`HubError` when ``version`` cannot be quantised; returns its source
    graph (weights left on disk)."""
    source = check_state(version)
    graph = onnx.load(str(source), load_external_data=False)
    try:
        check_quantizable(graph)
    except QuantizeRefused as exc:
        raise HubError(localize(exc.message), exc.code, 409) from None
    return graph


def check_state(version: Version) -> Path:
    """:func:`check_version` without reading the graph (what a page may ask on every load);
    returns the source's path."""
    available, why = availability(version)
    if not available:
        raise HubError(why, "quantizer_unavailable", 409)
    if version.status != Version.Status.READY:
        raise HubError(
            gettext("Version %(number)s is %(status)s; only a packaged version can be quantised.")
            % {"number": version.number, "status": version.get_status_display().lower()},
            "not_ready",
            409,
        )
    if version.quantization is not None:
        raise HubError(
            gettext(
                "Version %(number)s is INT8 already (quantised from version %(source)s); "
                "quantise an FP32 version instead."
            )
            % {"number": version.number, "source": version.quantization.get("of_version")},
            "already_quantized",
            409,
        )
    if (version.options or {}).get("fp16"):
        raise HubError(
            gettext(
                "Version %(number)s is built in FP16; INT8 is made from an FP32 build. "
                "Quantise the FP32 version it was revised from."
            )
            % {"number": version.number},
            "not_fp32",
            409,
        )
    source = get_store().source_dir(version.model.name, version.number) / "model.onnx"
    if not source.is_file():
        raise HubError(
            gettext(
                "Version %(number)s came as a bundle; quantising it is not supported yet. "
                "Upload its ONNX file as a new version and quantise that."
            )
            % {"number": version.number},
            "not_quantizable",
            409,
        )
    return source


def _check_nodes(graph: onnx.ModelProto, plan: Plan) -> None:
    names = {node.name for node in graph.graph.node}
    unknown = [n for n in plan.exclude_nodes if n not in names]
    if unknown:
        raise _bad(
            gettext("exclude_nodes names node(s) the model does not have: %(nodes)s.")
            % {"nodes": ", ".join(unknown[:5])}
        )


def choose_inputs(
    version: Version, wanted: QuantizeRequest, user: User
) -> tuple[calibration.Chosen, Path | None]:
    """The inputs to use and, for an upload, its finished file (not yet moved).

    Raises:
        HubError: Too few inputs (409 from the model's own, 400 from an upload), or an
            upload that is not the caller's, unfinished, or does not fit the signature.
    """
    if wanted.source == "captures":
        chosen, path = calibration.captures(version, wanted.max_items), None
    elif wanted.source == "examples":
        chosen, path = calibration.examples(version, wanted.max_items), None
    else:
        uploads = get_uploads()
        try:
            if uploads.status(wanted.upload_id).owner != str(user.pk):
                raise HubError(gettext("There is no such upload."), "upload_not_found", 404)
            finished = uploads.finish(wanted.upload_id)
        except ModelStoreError as exc:
            raise HubError(localize(exc.message), getattr(exc, "code", "invalid_upload")) from None
        if wanted.upload_sha256 and wanted.upload_sha256 != finished.sha256:
            uploads.cancel(wanted.upload_id)
            raise HubError(
                gettext("The file changed in transit: your sha256 does not match what arrived. "
                        "Upload again."),
                "upload_corrupt",
            )  # fmt: skip
        if finished.size > calibration.MAX_UPLOAD_BYTES:
            raise _bad(gettext("The calibration file is over 2 GiB."), "invalid_calibration")
        keys, rows = calibration.upload_keys(version, finished.path, wanted.max_items)
        ids = list(range(max(0, rows - wanted.max_items), rows))
        chosen = calibration.Chosen("upload", ids, upload_keys=keys)
        path = finished.path
    try:
        split(len(chosen.ids))
    except QuantizeRefused as exc:
        where = {
            "captures": gettext("captured requests that fit this version (turn capture on "
                                "and let it answer more)"),
            "examples": gettext("saved examples that fit this version"),
            "upload": gettext("rows in the uploaded file"),
        }[wanted.source]  # fmt: skip
        raise HubError(
            f"{localize(exc.message)} {gettext('Counted: %(what)s.') % {'what': where}}",
            exc.code,
            400 if wanted.source == "upload" else 409,
        ) from None
    return chosen, path


def request_quantization(
    version: Version, body: object, user: User
) -> tuple[Version, Job, dict[str, Any]]:
    """The model's next version: ``version`` quantised to INT8 as ``body`` asks, job queued.

    Returns:
        The new version, its job, and its ``quantization`` record.
    """
    require_role(user, Role.OPERATOR)
    wanted = parse(body)
    graph = check_version(version)
    _check_nodes(graph, wanted.plan)
    chosen, upload_path = choose_inputs(version, wanted, user)
    calibrate, held_out = split(len(chosen.ids))
    record: dict[str, Any] = {
        "method": "static",
        "format": "QDQ",
        "tool": "onnxruntime",
        "of_version": version.number,
        "calibration": {
            "source": wanted.source,
            "items": len(chosen.ids),
            "calibrate": len(calibrate),
            "held_out": len(held_out),
        },
        "plan": {
            "calibrate_method": wanted.plan.calibration,
            "activations": wanted.plan.activations,
            "per_channel": wanted.plan.per_channel,
            "exclude_nodes": list(wanted.plan.exclude_nodes),
        },
        "result": None,
    }
    store = get_store()
    moved: list[Path] = []

    def prepare(job: Job) -> None:
        nonlocal chosen
        if upload_path is None:
            return
        # The upload becomes the job's: it stays until the build has read it.
        dest = store.fresh_work_dir(job.uuid.hex, "calibration") / "calibration.npz"
        shutil.move(str(upload_path), dest)
        moved.append(dest)
        chosen = calibration.Chosen("upload", chosen.ids, str(dest), chosen.upload_keys)
        job.params["quantize"]["chosen"] = chosen.to_params()
        job.save(update_fields=["params"])

    try:
        revision, job = make_revision(
            version,
            user,
            options=version.options,
            findings=version.findings or [],
            steps=dispatch.COMPILE_STEPS,
            params={
                "revision_of": version.number,
                "quantize": {"chosen": chosen.to_params(), "plan": record["plan"]},
            },
            quantization=record,
            prepare=prepare,
            event=lambda number: (
                "version.quantize_requested",
                say(
                    "%(user)s asked for version %(original)s quantised to INT8 as version "
                    "%(number)s (calibrated on %(calibrate)s %(source)s, checked on "
                    "%(held)s others).",
                    user=user.get_username(),
                    original=version.number,
                    number=number,
                    calibrate=len(calibrate),
                    source=wanted.source,
                    held=len(held_out),
                ),
                {"of_version": version.number, "quantization": record},
            ),
        )
    except BaseException:
        for path in moved:  # nothing was recorded: the upload goes back where it was
            shutil.move(str(path), str(upload_path))
        raise
    if upload_path is not None:
        get_uploads().cancel(wanted.upload_id)  # moved into the job: the upload is spent
    return revision, job, record

"""``/api/v1/nodes``: the nodes, their reports, draining and removal (docs/nodes.md#built).

A node's worker posts its host report with its node token (scope ``node:<name>``); the token
middleware has already refused a node token anywhere else (``webapp.nodes.tokens``),
and this handler refuses anyone but that node. The body is checked in two steps: first
whether the hub can work with the node at all (its protocol and code version: 409
``node_incompatible``, recorded so that the Nodes page shows it), then its types (400), so
that a node from a newer release is told it is incompatible, not that its fields are wrong.
"""

from __future__ import annotations

from typing import Any

from django.http import FileResponse, HttpRequest, HttpResponse
from django.utils.translation import gettext
from ninja import Router

from model_store.package_tar.layout import MEDIA_TYPE
from webapp.api import types
from webapp.api.app import ADMIN, EXTRA_SCHEMAS, OPERATOR, errors, json_object, parse_body
from webapp.errors import HubError
from webapp.nodes import actions as node_actions
from webapp.nodes import summaries as nodes
from webapp.nodes import tokens as node_scope
from webapp.registry.build import node_builds
from webapp.registry.serving.rollout import note_triton_models

router = Router(tags=["nodes"])


@router.get(
    "/nodes", response=types.NodeList, url_name="api-nodes", summary="Every node and its state"
)
def node_list(request: HttpRequest) -> Any:
    return {"nodes": nodes.summaries()}


@router.get(
    "/nodes/{name}",
    response={200: types.NodeOut, **errors(400, 404)},
    url_name="api-node",
    summary="One node",
)
def node_detail(request: HttpRequest, name: str) -> Any:
    return nodes.summary_of(name)


@router.delete(
    "/nodes/{name}",
    response={204: None, **errors(400, 404, 409)},
    auth=ADMIN,
    summary="Forget a node that is down or draining and revoke its tokens; 409 node_up",
)
def node_remove(request: HttpRequest, name: str) -> Any:
    node_actions.remove(name=name, user=request.user)
    return HttpResponse(status=204)


@router.post(
    "/nodes/{name}/drain",
    response={200: types.NodeOut, **errors(400, 404)},
    auth=OPERATOR,
    url_name="api-node-drain",
    summary="Drain a node (nothing new is placed on it) or stop draining it",
)
def node_drain(request: HttpRequest, name: str, data: types.DrainIn) -> Any:
    return node_actions.drain(name=name, user=request.user, draining=data.draining)


EXTRA_SCHEMAS["NodeReportIn"] = types.NodeReportIn
REPORT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NodeReportIn"}}},
    }
}


@router.post(
    "/nodes/{name}/reports",
    response={200: types.ReportAccepted, **errors(400, 409, 413)},
    url_name="api-node-reports",
    summary="A node's host report, with its node token only; 409 node_incompatible",
    openapi_extra=REPORT_BODY,
)
def node_report(request: HttpRequest, name: str) -> Any:
    name = _the_node_itself(request, name)
    if len(request.body) > nodes.MAX_REPORT_BYTES:
        message = gettext("A report may be at most %(kib)s KiB.")
        raise HubError(message % {"kib": nodes.MAX_REPORT_BYTES // 1024}, "too_large", 413)
    body = json_object(request.body)
    reason = nodes.refusal(body)
    if reason is not None:
        raise nodes.refuse(name, reason)
    report = parse_body(request, types.NodeReportIn)
    if report.node.name != name:
        message = gettext("The report is from %(sender)s, posted for %(name)s.")
        shown = {"sender": repr(report.node.name[:64]), "name": repr(name)}
        raise HubError(message % shown, "invalid_field")
    stored = {k: v for k, v in body.items() if k != "node"}
    accepted = nodes.accept_report(
        name,
        stored,
        triton=report.node.triton.model_dump(),
        version=report.node.hub_version,
        labels=dict(report.node.labels),
    )
    # What its Triton serves against what the hub placed there: drift is placed again.
    note_triton_models(name, stored.get("triton_models"))
    return accepted


def _the_node_itself(request: HttpRequest, name: str) -> str:
    """``name``, checked; only that node's own token may go on (403 ``node_token_required``)."""
    name = nodes.check_name(name)
    token = getattr(request, "api_token", None)
    if token is None or node_scope.node_of(token.scope) != name:
        message = gettext(
            "Only node %(name)s does this, with its node token (python manage.py nodetoken "
            "%(bare_name)s)."
        )
        raise HubError(
            message % {"name": repr(name), "bare_name": name},
            "node_token_required",
            403,
        )
    return name


# A build that needs the node's toolkit or NPUs (webapp/registry/build/node_builds.py): the node
# fetches the validated source and sends the artifact back, for a build it is running only.


SOURCE_TAR_DOC = {
    "x-responses": {
        "200": {
            "description": "The validated source (the .onnx and any external data) as a tar",
            "headers": {"X-Content-SHA256": {"schema": {"type": "string"}}},
            "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
        }
    }
}


@router.get(
    "/nodes/{name}/builds/{job}/source.tar",
    openapi_extra=SOURCE_TAR_DOC,
    response={200: None, **errors(403, 404)},
    url_name="api-node-build-source",
    summary="The source of a build this node is running, as a files tar (X-Content-SHA256); "
    "its node token only",
)
def node_build_source(request: HttpRequest, name: str, job: str) -> Any:
    path, sha256 = node_builds.source_tar(_the_node_itself(request, name), job)
    response = FileResponse(path.open("rb"), content_type=MEDIA_TYPE)
    response["Content-Length"] = str(path.stat().st_size)
    response["X-Content-SHA256"] = sha256
    return response


@router.put(
    "/nodes/{name}/builds/{job}/artifact.tar",
    response={200: types.ArtifactReceived, **errors(400, 403, 404, 413)},
    url_name="api-node-build-artifact",
    summary="The artifact of a build this node ran, as a files tar with its SHA-256 in "
    "X-Content-SHA256; checked and unpacked; its node token only",
)
def node_build_artifact(request: HttpRequest, name: str, job: str) -> Any:
    return node_builds.receive_artifact(_the_node_itself(request, name), job, request)

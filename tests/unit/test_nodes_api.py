"""Nodes, part 1 (hub side): node tokens, reports, refusals, states and removal.

A node's worker posts ``model_store.host_report``'s report plus ``node`` with its node token
(``manage.py nodetoken NAME``); everything else that token tries is a 403 ``node_token_scope``.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.test import RequestFactory

from model_store.host_report import PROTOCOL
from tests.fixtures.nodes import Node_, report
from webapp.hub_version import hub_version, incompatibility, major_minor
from webapp.nodes import tokens as node_scope
from webapp.nodes.models import HostReport, Node
from webapp.registry.jobs.models import Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def node_b() -> Node_:
    return Node_("b")


def nodes_by_name(viewer_api) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    answer = viewer_api("get", "/api/v1/nodes")
    assert answer.status_code == 200, answer.content
    return {n["name"]: n for n in answer.json()["nodes"]}


# --------------------------------------------------------------------------- joining


def test_nodetoken_registers_the_node_and_its_report_makes_it_up(node_b, viewer_api, settings):
    settings.HOST_PROBE_SECONDS = 30
    assert node_b.key.startswith("tmh_")
    assert Node.objects.filter(name="b").exists()
    assert nodes_by_name(viewer_api)["b"]["state"] == "down"  # registered, not reported yet

    answer = node_b.report()
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"accepted": True, "protocol": PROTOCOL, "report_every_s": 30}

    b = nodes_by_name(viewer_api)["b"]
    assert b["state"] == "up" and b["soc"] == "Ascend310P3" and b["cann_version"] == "8.5.0"
    assert b["triton"] == {
        "http": "10.0.0.2:8000",
        "grpc": "10.0.0.2:8001",
        "metrics": "10.0.0.2:8002",
    }
    assert b["devices"][0]["name"] == "310P3"
    assert b["labels"] == {"rack": "r7", "soc": "Ascend310P3", "cann": "8.5.0"}
    assert b["last_report_at"] and b["last_report_age_s"] < 5 and b["refused_reason"] is None
    assert "node" not in HostReport.objects.get(node="b").data  # the report alone is stored
    assert viewer_api("get", "/api/v1/nodes/b").json()["host"] == "atlas-1"


def test_a_revoked_node_token_is_refused(node_b):
    assert node_b.report().status_code == 200
    out = io.StringIO()
    call_command("nodetoken", "b", "--revoke", stdout=out)
    assert "Revoked 1 token" in out.getvalue()
    answer = node_b.report()
    assert answer.status_code == 401 and answer.json()["code"] == "not_authenticated"
    revoked = Event.objects.get(kind="node.tokens_revoked")
    assert revoked.actor is None and revoked.data == {"node": "b", "revoked": 1}
    assert str(revoked.message) == "the command line revoked the tokens of node b (1 live)."


def test_revoking_on_the_nodes_page_is_for_admins_and_recorded(node_b, operator_client, admin_user):
    from tests.fixtures.users import signed_in

    assert operator_client.post("/nodes/b/revoke/").status_code in (302, 403)
    assert not Event.objects.filter(kind="node.tokens_revoked").exists()
    assert signed_in(admin_user).post("/nodes/b/revoke/").status_code == 302
    revoked = Event.objects.get(kind="node.tokens_revoked")
    assert revoked.actor == admin_user and revoked.data["node"] == "b"


def test_nodetoken_refuses_a_name_that_is_not_a_node_name():
    from django.core.management.base import CommandError

    for bad in ("../etc", "a b", ".x", "é", "x" * 65):
        with pytest.raises(CommandError, match="not a node name"):
            call_command("nodetoken", bad, stdout=io.StringIO())
    assert not Node.objects.exists()


# --------------------------------------------------------------------------- the token's scope


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/nodes"),
        ("get", "/api/v1/nodes/b"),
        ("post", "/api/v1/nodes/b/drain"),
        ("delete", "/api/v1/nodes/b"),
        ("get", "/api/v1/models"),
        ("get", "/api/v1/server"),
        ("get", "/api/v1/tokens"),
        ("post", "/api/v1/tokens"),
        ("get", "/api/v1/models/m/versions/1"),
        ("get", "/server/"),
        ("get", "/nodes/"),
        ("get", "/models/"),
        ("post", "/nodes/b/drain/"),
    ],
)
def test_a_node_token_may_do_nothing_else(node_b, method, path):
    answer = node_b.call(method, path, {} if method == "post" else None)
    assert answer.status_code == 403, (path, answer.content)
    assert answer.json()["code"] == "node_token_scope"


def test_a_node_token_fetches_packaged_versions(node_b):
    # No such model: the request got past the scope check to the handler's 404.
    answer = node_b.call("get", "/api/v1/models/m/versions/1/package.tar")
    assert answer.status_code == 404, answer.content
    head = RequestFactory().head("/api/v1/models/m/versions/1/package.tar")
    assert node_scope.refusal("b", head) is None
    # Other methods on the allowed paths reach nothing: those paths serve no others.
    assert node_b.call("post", "/api/v1/models/m/versions/1/package.tar").status_code == 405
    assert node_b.call("get", "/api/v1/nodes/b/reports").status_code == 405


def test_the_allowed_paths_serve_only_the_allowed_methods():
    from django.urls import reverse

    from webapp.api.app import api

    served: dict[str, set[str]] = {}
    for bound in api._get_bound_routers():
        for path_view in bound.path_operations.values():
            first = path_view.operations[0]
            for operation in path_view.operations:
                served.setdefault(first.url_name or "", set()).update(operation.methods)
    for url_name, methods in node_scope.ALLOWED.items():
        assert served[url_name] == set(methods), url_name
    assert reverse("api-node-reports", kwargs={"name": "b"}) == "/api/v1/nodes/b/reports"


def test_a_node_cannot_report_for_another(node_b):
    Node_("a")
    answer = node_b.report(report("a"), to="a")
    assert answer.status_code == 403 and answer.json()["code"] == "node_token_scope"
    assert not HostReport.objects.filter(node="a").exists()


def test_only_the_node_itself_reports(api, admin_api, node_b):
    for client in (api, admin_api):
        answer = client("post", "/api/v1/nodes/b/reports", report("b"))
        assert answer.status_code == 403 and answer.json()["code"] == "node_token_required"
    assert not HostReport.objects.filter(node="b").exists()


# --------------------------------------------------------------------------- refusals


def test_a_node_of_another_protocol_is_refused_and_shown_so(node_b, viewer_api):
    answer = node_b.report(report("b", protocol=PROTOCOL + 1, devices="a newer shape"))
    assert answer.status_code == 409, answer.content
    assert answer.json()["code"] == "node_incompatible"
    assert f"protocol {PROTOCOL + 1}" in answer.json()["error"]
    b = nodes_by_name(viewer_api)["b"]
    assert b["state"] == "down" and "protocol" in b["refused_reason"]

    assert node_b.report().status_code == 200  # the node was updated
    b = nodes_by_name(viewer_api)["b"]
    assert b["state"] == "up" and b["refused_reason"] is None


@pytest.mark.parametrize("version", ["9.9.0", "0.0.1", "latest"])
def test_a_node_whose_code_the_hub_cannot_work_with_is_refused(node_b, version):
    body = report("b")
    body["node"]["hub_version"] = version
    answer = node_b.report(body)
    assert answer.status_code == 409 and answer.json()["code"] == "node_incompatible"
    assert Node.objects.get(name="b").refused_reason
    assert not HostReport.objects.filter(node="b").exists()


def test_the_version_rule_is_same_major_minor():
    assert major_minor("0.1.7") == (0, 1) and major_minor("12.3") == (12, 3)
    assert major_minor("v1") is None and major_minor("") is None
    assert incompatibility("0.1.9", hub="0.1.0") is None
    assert "major.minor" in (incompatibility("0.2.0", hub="0.1.0") or "")
    assert "not a version" in (incompatibility("dev", hub="0.1.0") or "")


def _without(key: str) -> dict[str, Any]:
    body = report("b")
    del body[key]
    return body


def _node_with(**changes: Any) -> dict[str, Any]:
    body = report("b")
    body["node"] = body["node"] | changes
    return body


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"not json", "invalid_json"),
        (b"[1, 2]", "invalid_json"),
        # Infinity is not JSON: refused by the parser, before the report's own checks.
        (json.dumps(report("b", made_at=float("inf"))).encode(), "invalid_json"),
        (_without("node"), "missing_field"),
        (_without("devices"), "missing_field"),
        (report("b", protocol="1"), "invalid_field"),
        (report("b", protocol=True), "invalid_field"),
        (report("b", made_at=1e300), "invalid_field"),
        (report("b", made_at=-1), "invalid_field"),
        (report("b", devices=[]), "invalid_field"),
        (report("b", targets={"acl": "yes"}), "invalid_field"),
        (report("b", host="h" * 300), "invalid_field"),
        (_node_with(name="a"), "invalid_field"),
        (_node_with(hub_version=1), "invalid_field"),
        (_node_with(triton={"http": "x"}), "missing_field"),
        (_node_with(labels={"../x": "y"}), "invalid_field"),
        (_node_with(labels={"k": 1}), "invalid_field"),
        (_node_with(labels={f"k{i}": "v" for i in range(40)}), "invalid_field"),
    ],
)
def test_a_malformed_report_is_a_400_naming_the_problem(node_b, body, code):
    answer = node_b.report(body)
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"] == code
    assert not HostReport.objects.filter(node="b").exists()


def test_a_report_is_bounded(node_b):
    body = report("b", diagnostics=[{"id": "x", "found": "y" * 300_000}])
    answer = node_b.report(body)
    assert answer.status_code == 413 and answer.json()["code"] == "too_large"


@pytest.mark.parametrize("name", ["..", "a%20b", "%2e%2e", "x" * 65, "-a", "a%00"])
def test_hostile_node_names_are_refused(viewer_api, admin_api, name):
    for client, method in ((viewer_api, "get"), (admin_api, "delete")):
        answer = client(method, f"/api/v1/nodes/{name}")
        assert answer.status_code in (400, 404), answer.content
        assert answer.json()["code"] in ("invalid_name", "not_found")


# --------------------------------------------------------------------------- states


def test_a_silent_node_goes_down_after_three_intervals(node_b, viewer_api, settings, time_machine):
    settings.HOST_PROBE_SECONDS = 10
    time_machine.move_to("2026-12-01 12:00:00+00:00", tick=False)
    assert node_b.report().status_code == 200
    time_machine.shift(timedelta(seconds=30))
    assert nodes_by_name(viewer_api)["b"]["state"] == "up"
    time_machine.shift(timedelta(seconds=1))
    b = nodes_by_name(viewer_api)["b"]
    assert b["state"] == "down" and b["last_report_age_s"] == 31.0
    assert node_b.report().status_code == 200  # it comes back
    assert nodes_by_name(viewer_api)["b"]["state"] == "up"


def test_an_operator_drains_a_node(node_b, api, viewer_api):
    node_b.report()
    assert viewer_api("post", "/api/v1/nodes/b/drain", {"draining": True}).status_code == 403
    answer = api("post", "/api/v1/nodes/b/drain", {"draining": True})
    assert answer.status_code == 200 and answer.json()["state"] == "draining"
    assert api("post", "/api/v1/nodes/b/drain", {"draining": "yes"}).status_code == 400
    assert api("post", "/api/v1/nodes/nope/drain", {"draining": True}).status_code == 404
    answer = api("post", "/api/v1/nodes/b/drain", {"draining": False})
    assert answer.json()["state"] == "up"
    api("post", "/api/v1/nodes/b/drain", {"draining": False})  # no change: nothing recorded
    trail = list(Event.objects.order_by("created").values_list("kind", "data", "actor__username"))
    assert trail == [
        ("node.drained", {"node": "b"}, "otto"),
        ("node.undrained", {"node": "b"}, "otto"),
    ]
    drained = Event.objects.get(kind="node.drained")
    assert str(drained.message) == "otto drained node b: nothing new is placed on it."


def test_an_admin_removes_a_node_only_when_down_or_draining(node_b, api, admin_api):
    node_b.report()
    assert api("delete", "/api/v1/nodes/b").status_code == 403
    answer = admin_api("delete", "/api/v1/nodes/b")
    assert answer.status_code == 409 and answer.json()["code"] == "node_up"
    api("post", "/api/v1/nodes/b/drain", {"draining": True})
    assert admin_api("delete", "/api/v1/nodes/b").status_code == 204
    assert not Node.objects.filter(name="b").exists()
    assert not HostReport.objects.filter(node="b").exists()
    assert node_scope.live_tokens("b") == []
    assert node_b.report().status_code == 401  # its token went with it
    assert admin_api("delete", "/api/v1/nodes/b").status_code == 404
    removed = Event.objects.get(kind="node.removed")
    assert removed.data == {"node": "b"} and removed.actor is not None
    assert not Event.objects.filter(kind="node.removed").exclude(pk=removed.pk).exists()


def test_the_local_worker_is_the_local_node(viewer_api, settings, monkeypatch, tmp_path):
    from tests.fixtures.hosts import worker_probes_host

    monkeypatch.setenv("PATH", str(tmp_path))  # nothing to probe: quick
    worker_probes_host()
    local = nodes_by_name(viewer_api)["local"]
    assert local["state"] == "up" and local["devices"] == [] and local["soc"] is None
    assert local["triton"]["http"] == settings.TRITON_URL
    assert local["triton"]["metrics"] == settings.TRITON_METRICS_URL
    assert local["hub_version"] == hub_version()


def test_the_list_costs_the_same_for_one_node_or_many(viewer_api, django_assert_max_num_queries):
    from webapp.nodes import host_reports

    for i in range(6):
        host_reports.record(report(f"n{i}"), node=f"n{i}")
    with django_assert_max_num_queries(6):  # token, last_used, nodes, reports
        assert len(viewer_api("get", "/api/v1/nodes").json()["nodes"]) == 6

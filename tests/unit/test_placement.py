"""Placement (docs/nodes.md#placement-and-rollouts): the API that sets it, how it resolves to
nodes, the per-node state the model's detail shows, drift from a node's report, and the
reconcile that places a model on a node of its placement that does not serve it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.nodes import Node_, report
from webapp.errors import HubError
from webapp.nodes.models import Node
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Job
from webapp.registry.serving import placement, rollout
from webapp.registry.serving.models import NodeServing
from webapp.registry.serving.reconcile import _place_on_nodes_that_miss_it

pytestmark = pytest.mark.django_db


def _node(name: str, state: str = "up", **labels: str) -> dict[str, Any]:
    return {"name": name, "state": state, "labels": labels}


@pytest.mark.parametrize(
    "body",
    [
        None, [], {}, {"nodes": []}, {"nodes": "b"}, {"nodes": ["../b"]}, {"nodes": [1]},
        {"labels": []}, {"labels": {"bad key": "x"}}, {"labels": {"soc": 3}},
        {"nodes": ["b"], "labels": {}}, {"all": True},
    ],
)  # fmt: skip
def test_a_malformed_placement_is_refused_with_the_reason(body: object) -> None:
    with pytest.raises(HubError) as refused:
        placement.checked(body)
    assert refused.value.code == "invalid_placement" and refused.value.status == 400


def test_placements_are_normalised() -> None:
    assert placement.checked({"nodes": ["c", "local", "b", "c"]}) == {"nodes": ["local", "b", "c"]}
    assert placement.checked({"labels": {"zone": "a", "soc": "x"}}) == {
        "labels": {"soc": "x", "zone": "a"}
    }


def test_resolving_orders_local_first_and_leaves_draining_nodes_out() -> None:
    fleet = [
        _node("a", soc="Ascend310P3"), _node("b", state="draining", soc="Ascend310P3"),
        _node("c", state="down", soc="Ascend310P3"), _node("local"), _node("d", soc="Ascend910B"),
    ]  # fmt: skip
    assert placement.resolve({"labels": {"soc": "Ascend310P3"}}, fleet) == ["a", "c"]
    assert placement.resolve({"labels": {}}, fleet) == ["local", "a", "c", "d"]
    assert placement.resolve({"nodes": ["d", "local", "gone"]}, fleet) == ["local", "d"]
    assert placement.resolve(placement.DEFAULT, []) == ["local"]


@pytest.fixture
def served(operator) -> Model:  # type: ignore[no-untyped-def]
    model = Model.objects.create(name="mlp", created_by=operator, serving_version=1)
    Version.objects.create(
        model=model, number=1, source_filename="m.onnx", source_size=1,
        status=Version.Status.READY,
    )  # fmt: skip
    return model


def test_an_operator_sets_the_placement_and_a_place_job_is_queued(api, served) -> None:
    Node_("b").report()
    answer = api("put", "/api/v1/models/mlp/placement", {"nodes": ["local", "b"]})
    assert answer.status_code == 202, answer.content
    job = Job.objects.get(uuid=answer.json()["job"])
    assert job.kind == Job.Kind.PLACE and job.params["placement"] == {"nodes": ["local", "b"]}
    detail = api("get", "/api/v1/models/mlp").json()
    assert detail["placement"] == {"nodes": ["local", "b"]}
    by_node = {n["node"]: n for n in detail["nodes"]}
    assert by_node["local"]["version"] == 1 and by_node["local"]["state"] == "serving"
    assert by_node["b"]["state"] == "empty" and by_node["b"]["node_state"] == "up"


def test_a_viewer_may_not_place_and_bad_bodies_are_400(viewer_api, api, served) -> None:
    assert viewer_api("put", "/api/v1/models/mlp/placement", {"labels": {}}).status_code == 403
    answer = api("put", "/api/v1/models/mlp/placement", {"nodes": ["no such/node"]})
    assert answer.status_code == 400 and answer.json()["code"] in (
        "invalid_placement", "invalid_field",
    )  # fmt: skip


def test_a_node_whose_triton_lost_the_model_is_marked_and_placed_again(served) -> None:
    node = Node_("b")
    NodeServing.objects.create(model=served, node="b", version=1, state="serving")
    Model.objects.filter(pk=served.pk).update(placement={"labels": {}})
    assert node.report(report("b") | {"triton_models": {"mlp": [1]}}).status_code == 200
    assert NodeServing.objects.get(node="b").state == "serving"
    assert node.report(report("b") | {"triton_models": {}}).status_code == 200
    row = NodeServing.objects.get(node="b")
    assert row.state == "failed" and "does not serve v1" in row.error
    assert _place_on_nodes_that_miss_it() == ["mlp"]
    job = Job.objects.get(kind=Job.Kind.PLACE)
    assert job.params["missing"] == ["b"] and job.params["reason"] == "reconcile"


def test_a_node_that_joins_a_label_placement_late_is_given_the_model(served) -> None:
    Model.objects.filter(pk=served.pk).update(placement={"labels": {"rack": "r7"}})
    assert _place_on_nodes_that_miss_it() == []  # no node but local yet
    Node_("b").report()  # its labels include rack=r7
    assert _place_on_nodes_that_miss_it() == ["mlp"]
    Node.objects.filter(name="b").update(draining=True)
    Job.objects.all().delete()
    Model.objects.filter(pk=served.pk).update(lock_holder="", lock_expires=None)
    assert _place_on_nodes_that_miss_it() == []  # draining takes nothing new


def test_where_now_names_each_nodes_version(served) -> None:
    NodeServing.objects.create(model=served, node="b", version=2, state="serving")
    assert rollout.where_now(served, 3, ["local", "b", "c"]) == "local v3, b v2, c (nothing)"


def test_the_cann_gate_looks_at_every_node_of_the_placement(operator) -> None:  # type: ignore[no-untyped-def]
    from webapp.registry.serving.cann_check import cann_skew

    model = Model.objects.create(name="om", target="acl", created_by=operator, serving_version=1)
    version = Version.objects.create(
        model=model, number=1, source_filename="m.onnx", source_size=1, artifact_name="model.om",
        cann_version="8.5.0", status=Version.Status.READY,
    )  # fmt: skip
    older = report("b")
    older["cann"] = {"available": True, "version": "8.0.RC3", "layout": "cann"}
    Node_("b").report(older)
    Model.objects.filter(pk=model.pk).update(placement={"nodes": ["b"]})
    found = cann_skew(Version.objects.select_related("model").get(pk=version.pk))
    assert found is not None and found.state == "too_new"

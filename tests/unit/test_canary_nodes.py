"""A canary of a model placed on several nodes (docs/canary.md#across-nodes): the candidate is
loaded beside the serving version on every node of the placement, or on none; every router
finds it on each node that has it; a candidate left beside after its canary is cleared.

The nodes' answers are played here; tests/integration/test_rollouts.py runs the same with a
second node and its own Triton.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.nodes import Node_
from tests.fixtures.users import signed_in
from tests.unit.test_canary_life import PLAN
from tests.unit.test_canary_life import model as model  # the fixture
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.models import Job
from webapp.registry.serving import rollout, switch
from webapp.registry.serving.models import NodeServing
from webapp.registry.serving.reconcile import _place_on_nodes_that_miss_it

pytestmark = pytest.mark.django_db
PLACED = {"nodes": ["local", "b"]}


def _placed_on_b(model: Model, **row: Any) -> NodeServing:
    Node_("b").report()
    Model.objects.filter(pk=model.pk).update(placement=PLACED)
    fields = {"version": 1, "state": "serving"} | row
    return NodeServing.objects.create(model=model, node="b", **fields)


def test_a_node_that_does_not_serve_the_serving_version_holds_the_canary_back(api, model) -> None:
    row = _placed_on_b(model, version=None, state="failed")
    response = api("post", f"/api/v1/models/{model.name}/canary", PLAN)
    assert response.status_code == 409, response.content
    assert response.json()["code"] == "nodes_not_serving" and " b " in response.json()["error"]
    model.refresh_from_db()
    assert model.lock_holder == "" and model.canary == {}

    NodeServing.objects.filter(pk=row.pk).update(version=1, state="serving")
    response = api("post", f"/api/v1/models/{model.name}/canary", PLAN)
    assert response.status_code == 202, response.content
    job = Job.objects.get(kind=Job.Kind.LOAD)
    assert job.params["compare"] == 2


def test_the_candidate_answers_wherever_it_is_loaded_beside(model) -> None:
    _placed_on_b(model, compare_version=2)
    Model.objects.filter(pk=model.pk).update(compare_version=2)
    model.refresh_from_db()
    b = ("b", "10.0.0.2:8000", "10.0.0.2:8001")
    assert rollout.inference_candidates(model, 2) == [None, b]
    assert rollout.inference_candidates(model, 1) == [None, b]
    assert rollout.inference_candidates(model, 3) == []
    NodeServing.objects.filter(node="b").update(compare_version=None)
    assert rollout.inference_candidates(model, 2) == [None]


def _one_load_job(model: Model, extra: int | None) -> Job:
    return Job.objects.create(
        model=model, kind=Job.Kind.LOAD, params={"from": 1, "to": 1, "compare": extra},
        state=Job.State.RUNNING,
    )  # fmt: skip


def test_a_candidate_that_fails_on_one_node_is_unloaded_from_those_before(
    model, monkeypatch
) -> None:
    """``local`` loads v2 beside, b refuses: local is put back to v1 alone, the job fails
    naming b, and the model records nothing beside."""
    _placed_on_b(model)
    model.refresh_from_db()
    asked: list[tuple[str, int | None]] = []

    def on_local(job: Job, model: Model, extra: int | None) -> tuple[bool, str]:
        asked.append(("local", extra))
        return True, ""

    def on_node(job: Job, model: Model, node: str, version: Any) -> rollout.NodeStep:
        extra = version.number if version is not None else None
        asked.append((node, extra))
        return rollout.NodeStep(node, False, 1, extra, 0.1, reason="Triton refused v2")

    monkeypatch.setattr(switch, "_beside_on_local", on_local)
    monkeypatch.setattr(rollout, "load_beside_on_node", on_node)
    job = _one_load_job(model, 2)
    switch._run_compare(job)

    assert asked == [("local", 2), ("b", 2), ("local", None)]
    job.refresh_from_db()
    model.refresh_from_db()
    assert job.state == Job.State.FAILED and "node b: Triton refused v2" in job.error
    assert model.compare_version is None
    lines = [line.text for line in job.log_lines.all()]
    assert any("Node b: v2 beside v1 FAILED" in line for line in lines), lines


def test_a_candidate_loaded_everywhere_is_recorded(model, monkeypatch) -> None:
    _placed_on_b(model)
    model.refresh_from_db()
    monkeypatch.setattr(switch, "_beside_on_local", lambda job, model, extra: (True, ""))

    def on_node(job: Job, model: Model, node: str, version: Any) -> rollout.NodeStep:
        NodeServing.objects.filter(node=node).update(compare_version=version.number)
        return rollout.NodeStep(node, True, 1, version.number, 0.1)

    monkeypatch.setattr(rollout, "load_beside_on_node", on_node)
    job = _one_load_job(model, 2)
    switch._run_compare(job)
    job.refresh_from_db()
    model.refresh_from_db()
    assert job.state == Job.State.SUCCEEDED, job.error
    assert model.compare_version == 2
    assert rollout.per_node(model)["nodes"][1] | {"updated": None} == {
        "node": "b", "version": 1, "beside": 2, "state": "serving", "error": None,
        "duration_s": None, "updated": None, "node_state": "up",
    }  # fmt: skip


def test_a_candidate_left_beside_after_its_canary_is_cleared_by_reconcile(model) -> None:
    _placed_on_b(model, compare_version=2)  # the model records nothing beside
    assert _place_on_nodes_that_miss_it() == [model.name]
    assert Job.objects.get(kind=Job.Kind.PLACE).params["missing"] == ["b"]


def test_the_nodes_card_shows_what_is_loaded_beside(model, operator) -> None:
    _placed_on_b(model, compare_version=2)
    Model.objects.filter(pk=model.pk).update(compare_version=2)
    page = signed_in(operator).get(f"/models/{model.name}/").content.decode()
    row = page[page.index('id="model-node-b"') :]
    assert "v1 <small" in row[:600] and "+ v2 beside" in row[:600]

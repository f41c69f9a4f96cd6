"""A rollout hands calls over across nodes (docs/nodes.md#placement-and-rollouts): every other
node loads the new version beside the old, the route moves, then each node is pinned to the
new version; a stop before the route moved changes nothing.

The nodes' answers and local's switch are played here, in the order the job asks for them;
tests/integration/test_rollouts.py runs the same with a second node and its own Triton.
"""

from __future__ import annotations

from typing import Any

import pytest

from model_store.serving.switching import SwitchResult
from tests.fixtures.nodes import Node_
from tests.unit.test_canary_life import model as model  # the fixture
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Event, Job
from webapp.registry.serving import rollout, switch
from webapp.registry.serving.models import NodeServing

pytestmark = pytest.mark.django_db


class Played:
    """Local's switch and the nodes, answering as told and noting what they were asked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, refuse: dict[str, str]) -> None:
        self.asked: list[tuple[str, str, int | None]] = []
        self.refuse = refuse
        monkeypatch.setattr(switch, "HAND_OVER_GRACE_S", 0.0)
        monkeypatch.setattr(rollout, "load_beside_on_node", self.beside)
        monkeypatch.setattr(rollout, "place_on_node", self.place)
        monkeypatch.setattr(switch, "switch_version", self.local)
        plain_route = switch._route_calls_to

        def route(model: Model, to: int, from_: int | None) -> None:
            self.asked.append(("route", "", to))
            plain_route(model, to, from_)

        monkeypatch.setattr(switch, "_route_calls_to", route)

    def beside(self, job: Job, model: Model, node: str, version: Version | None) -> Any:
        number = version.number if version is not None else None
        self.asked.append(("beside", node, number))
        row = NodeServing.objects.get(model=model, node=node)
        reason = self.refuse.get(f"beside {node}") if number is not None else None
        if reason is None:
            NodeServing.objects.filter(pk=row.pk).update(compare_version=number)
        return rollout.NodeStep(node, reason is None, row.version, number, 0.1, reason or "")

    def place(self, job: Job, model: Model, node: str, version: Version) -> Any:
        self.asked.append(("place", node, version.number))
        row = NodeServing.objects.get(model=model, node=node)
        reason = self.refuse.get(f"place {node}")
        if reason is None:
            NodeServing.objects.filter(pk=row.pk).update(
                version=version.number, compare_version=None
            )
        else:
            NodeServing.objects.filter(pk=row.pk).update(state="failed", error=reason)
        return rollout.NodeStep(node, reason is None, row.version, version.number, 0.1,
                                reason or "")  # fmt: skip

    def local(self, store: Any, runtime: Any, **kw: Any) -> SwitchResult:
        self.asked.append(("switch", "local", kw["to_version"]))
        if "local" in self.refuse:
            return SwitchResult(False, 2, 1, 0.1, None, self.refuse["local"], restored=True)
        kw["hand_over"]()
        return SwitchResult(True, 2, 1, 0.1, 0.1)


def _placed(model: Model, nodes: list[str]) -> None:
    for node in nodes:
        if node != "local":
            Node_(node).report()
            NodeServing.objects.create(model=model, node=node, version=1, state="serving")
    Model.objects.filter(pk=model.pk).update(placement={"nodes": nodes})
    model.refresh_from_db()


def _roll_out(model: Model, nodes: list[str], **params: Any) -> Job:
    job = Job.objects.create(
        model=model, kind=Job.Kind.SERVE, version=model.versions.get(number=2),
        params={"from": 1, "to": 2, **params}, state=Job.State.RUNNING,
    )  # fmt: skip
    switch._run_rollout(job, nodes)
    job.refresh_from_db()
    model.refresh_from_db()
    return job


def _rows(model: Model) -> dict[str, tuple[int | None, int | None, str]]:
    return {
        r.node: (r.version, r.compare_version, r.state)
        for r in NodeServing.objects.filter(model=model)
    }


def test_nodes_alone_hold_both_versions_while_the_route_moves(model, monkeypatch) -> None:
    played = Played(monkeypatch, {})
    _placed(model, ["b", "c"])
    job = _roll_out(model, ["b", "c"])
    assert played.asked == [
        ("beside", "b", 2), ("beside", "c", 2), ("route", "", 2), ("place", "b", 2),
        ("place", "c", 2),
    ]  # fmt: skip
    assert job.state == Job.State.SUCCEEDED, job.error
    assert model.serving_version == 2 and model.previous_version == 1
    assert _rows(model) == {"b": (2, None, "serving"), "c": (2, None, "serving")}
    event = Event.objects.filter(model=model, kind=Job.Kind.SERVE).latest("pk")
    assert [s["node"] for s in event.data["staged"]] == ["b", "c"]
    assert [s["node"] for s in event.data["nodes"]] == ["b", "c"]


def test_with_local_its_switch_moves_the_route_after_the_others_hold_both(
    model, monkeypatch
) -> None:
    played = Played(monkeypatch, {})
    _placed(model, ["local", "b"])
    job = _roll_out(model, ["local", "b"])
    assert played.asked == [
        ("beside", "b", 2), ("switch", "local", 2), ("route", "", 2), ("place", "b", 2),
    ]  # fmt: skip
    assert job.state == Job.State.SUCCEEDED, job.error
    assert model.serving_version == 2


def test_a_node_that_cannot_load_it_beside_stops_the_rollout_with_nothing_changed(
    model, monkeypatch
) -> None:
    played = Played(monkeypatch, {"beside c": "out of device memory"})
    _placed(model, ["local", "b", "c"])
    job = _roll_out(model, ["local", "b", "c"])
    assert played.asked == [("beside", "b", 2), ("beside", "c", 2), ("beside", "b", None)]
    assert job.state == Job.State.FAILED and job.error_code == "rollout_stopped"
    assert "stopped at node c: out of device memory" in job.error, job.error
    assert "local v1, b v1, c v1" in job.error, job.error
    assert model.serving_version == 1
    assert _rows(model) == {"b": (1, None, "serving"), "c": (1, None, "serving")}


def test_a_local_switch_that_fails_unloads_what_the_others_staged(model, monkeypatch) -> None:
    played = Played(monkeypatch, {"local": "v2 did not become ready"})
    _placed(model, ["local", "b"])
    job = _roll_out(model, ["local", "b"])
    assert played.asked == [("beside", "b", 2), ("switch", "local", 2), ("beside", "b", None)]
    assert job.state == Job.State.FAILED and "stopped at node local" in job.error
    assert model.serving_version == 1
    assert _rows(model) == {"b": (1, None, "serving")}


def test_after_the_route_moved_a_failed_pin_leaves_the_rest_answering_the_new_version(
    model, monkeypatch
) -> None:
    played = Played(monkeypatch, {"place b": "Triton stopped"})
    _placed(model, ["b", "c"])
    job = _roll_out(model, ["b", "c"])
    assert played.asked[-2:] == [("route", "", 2), ("place", "b", 2)]
    assert job.state == Job.State.FAILED and "stopped at node b: Triton stopped" in job.error
    assert model.serving_version == 2  # the route moved: calls go to v2, which c holds beside
    assert _rows(model)["c"] == (1, 2, "serving")
    assert rollout.inference_candidates(model, 2) == [("c", "10.0.0.2:8000", "10.0.0.2:8001")]


def test_nodes_already_holding_it_are_not_staged_again(model, monkeypatch) -> None:
    """A canary's promotion: the candidate is beside on every node already."""
    played = Played(monkeypatch, {})
    _placed(model, ["b"])
    NodeServing.objects.filter(model=model).update(compare_version=2)
    job = _roll_out(model, ["b"])
    assert played.asked == [("place", "b", 2)]
    assert job.state == Job.State.SUCCEEDED, job.error


def test_node_by_node_keeps_the_old_way_for_scripts_that_want_it(model, monkeypatch) -> None:
    """No staging: local switches, then each node in turn; the nodes before a failure keep the
    new version (what a rollout did before staging)."""
    played = Played(monkeypatch, {"place c": "Triton stopped"})
    _placed(model, ["local", "b", "c"])
    job = _roll_out(model, ["local", "b", "c"], rollout="node_by_node")
    assert played.asked == [
        ("switch", "local", 2), ("route", "", 2), ("place", "b", 2), ("place", "c", 2),
    ]  # fmt: skip
    assert job.state == Job.State.FAILED and "local v2, b v2, c v1" in job.error, job.error


@pytest.mark.parametrize(
    ("body", "status", "recorded"),
    [
        ({}, 202, None),
        ({"rollout": "staged"}, 202, None),
        ({"rollout": "node_by_node"}, 202, "node_by_node"),
        ({"rollout": "all_at_once"}, 400, None),
    ],
)
def test_serve_and_rollback_take_the_rollout_mode(
    api, model, body: dict[str, Any], status: int, recorded: str | None
) -> None:
    answer = api("post", f"/api/v1/models/{model.name}/serve", {"version": 2, **body})
    assert answer.status_code == status, answer.content
    if status != 202:
        assert "rollout" in answer.json()["error"], answer.json()
        return
    assert Job.objects.get(uuid=answer.json()["job"]).params.get("rollout") == recorded
    Job.objects.all().update(state=Job.State.SUCCEEDED)
    Model.objects.filter(pk=model.pk).update(
        serving_version=2, previous_version=1, lock_holder="", lock_expires=None
    )
    answer = api("post", f"/api/v1/models/{model.name}/rollback", body)
    assert answer.status_code == status, answer.content
    assert Job.objects.get(uuid=answer.json()["job"]).params.get("rollout") == recorded


@pytest.mark.parametrize(("beside", "during"), [(2, "serving"), (None, "placing")])
def test_a_staged_node_keeps_answering_while_it_is_pinned(
    model, monkeypatch, beside: int | None, during: str
) -> None:
    """Routers leave a placing node alone; a staged one holds the new version READY, so it
    stays in their lists while its pin unloads the old one."""
    from types import SimpleNamespace

    from webapp.registry.catalogue import package_tars

    _placed(model, ["b"])
    NodeServing.objects.filter(model=model).update(compare_version=beside)
    Model.objects.filter(pk=model.pk).update(serving_version=2)
    model.refresh_from_db()
    seen: list[tuple[str, list[Any]]] = []
    monkeypatch.setattr(package_tars, "tar_of", lambda version, why: SimpleNamespace(sha256="0"))
    monkeypatch.setattr(rollout.dispatch, "node_task", lambda node, name, message: None)

    def answer(job: Job, node: str, result: Any, **kw: Any) -> dict[str, Any]:
        state = NodeServing.objects.get(model=model, node="b").state
        seen.append((state, rollout.inference_candidates(model, 2)))
        return {"ok": True}

    monkeypatch.setattr(rollout, "wait_for_answer", answer)
    job = Job.objects.create(model=model, kind=Job.Kind.SERVE, state=Job.State.RUNNING)
    step = rollout.place_on_node(job, model, "b", model.versions.get(number=2))
    assert step.ok
    b = ("b", "10.0.0.2:8000", "10.0.0.2:8001")
    assert seen == [(during, [b] if beside else [])]
    assert _rows(model) == {"b": (2, None, "serving")}


def test_a_target_that_holds_one_version_at_a_time_switches_in_one_step(model, monkeypatch) -> None:
    """npu_ge swaps the model's whole directory: nothing can be loaded beside."""
    played = Played(monkeypatch, {})
    Model.objects.filter(pk=model.pk).update(target="npu_ge")
    _placed(model, ["local", "b"])
    job = _roll_out(model, ["local", "b"])
    assert played.asked == [("switch", "local", 2), ("route", "", 2), ("place", "b", 2)]
    assert job.state == Job.State.SUCCEEDED, job.error

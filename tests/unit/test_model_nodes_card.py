"""The model page's Nodes card, its placement form, and rollout steps in the history."""

from __future__ import annotations

import pytest

from tests.fixtures.nodes import Node_
from tests.fixtures.users import signed_in
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Event, Job
from webapp.registry.serving.models import NodeServing

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(operator, settings, monkeypatch, tmp_path) -> Model:
    """``mlp`` serving v1 on the stack's own node ``local`` (which has reported)."""
    from tests.fixtures.hosts import worker_probes_host

    settings.TRITON_URL = "127.0.0.1:9"  # no Triton: the page says so, quickly
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    monkeypatch.setenv("PATH", str(tmp_path))  # no npu-smi: local reports no NPU
    worker_probes_host()
    model = Model.objects.create(name="mlp", target="onnxruntime", created_by=operator)
    Version.objects.create(
        model=model, number=1, status="ready", source_filename="m.onnx",
        source_sha256="1" * 64, source_size=10, verification={"status": "passed"},
    )  # fmt: skip
    Model.objects.filter(pk=model.pk).update(serving_version=1)
    model.refresh_from_db()
    return model


@pytest.fixture
def node_b(model) -> Node_:
    b = Node_("b")
    assert b.report().status_code == 200
    return b


def _card(page: str) -> str:
    assert '<article id="nodes">' in page
    return page.split('<article id="nodes">', 1)[1].split("</article>", 1)[0]


def test_a_single_machine_sees_no_nodes_card(model, viewer_client) -> None:
    page = viewer_client.get("/models/mlp/").content.decode()
    assert '<article id="nodes">' not in page


def test_with_two_nodes_the_card_shows_each_node(model, node_b, viewer_client) -> None:
    card = _card(viewer_client.get("/models/mlp/").content.decode())
    assert "Placed on <strong>nodes local</strong>" in card
    assert 'id="model-node-local" data-state="serving"' in card
    assert 'href="/nodes/#node-local"' in card
    # b is known but the default placement does not name it: no row.
    assert 'id="model-node-b"' not in card
    assert "Change the placement" not in card  # a viewer cannot change it


def test_a_failed_node_shows_its_error(model, node_b, viewer_client) -> None:
    Model.objects.filter(pk=model.pk).update(placement={"nodes": ["local", "b"]})
    NodeServing.objects.create(
        model=model, node="b", version=None, state=NodeServing.State.FAILED,
        error="the package checksum did not match", duration_s=1.5,
    )  # fmt: skip
    card = _card(viewer_client.get("/models/mlp/").content.decode())
    assert "Placed on <strong>nodes local, b</strong>" in card
    row = card.split('id="model-node-b"', 1)[1].split("</tr>", 1)[0]
    assert 'data-state="failed"' in row and 'href="/nodes/#node-b"' in row
    assert "badge-ok" in row  # the node itself is up
    assert '<small class="error">the package checksum did not match</small>' in row
    assert "1.50 s" in row


def test_a_node_that_left_the_placement_is_marked(model, node_b, viewer_client) -> None:
    Model.objects.filter(pk=model.pk).update(placement={"labels": {"soc": "Ascend310P3"}})
    NodeServing.objects.create(model=model, node="c", version=1, state="serving")
    card = _card(viewer_client.get("/models/mlp/").content.decode())
    assert "nodes labelled soc=Ascend310P3" in card
    assert 'id="model-node-b" data-state="empty"' in card
    row = card.split('id="model-node-c"', 1)[1].split("</tr>", 1)[0]
    assert "not in the placement" in row and "UNKNOWN" in row


def test_an_operator_changes_the_placement(model, node_b, operator) -> None:
    client = signed_in(operator)
    card = _card(client.get("/models/mlp/").content.decode())
    assert 'name="nodes" value="local" checked' in card and 'value="b">' in card
    response = client.post("/models/mlp/placement/", {"mode": "nodes", "nodes": ["b", "local"]})
    assert response.status_code == 302 and response["Location"] == "/models/mlp/#nodes"
    job = Job.objects.get(model=model, kind=Job.Kind.PLACE)
    assert job.params["placement"] == {"nodes": ["local", "b"]}
    model.refresh_from_db()
    assert model.placement == {"nodes": ["local", "b"]}
    page = client.get("/models/mlp/").content.decode()
    assert f"Placing mlp on nodes local, b: job {job.uuid.hex[:8]}" in page


def test_an_operator_places_by_labels(model, node_b, operator) -> None:
    client = signed_in(operator)
    client.post("/models/mlp/placement/", {"mode": "labels", "labels": " soc=Ascend310P3, rack=r7"})
    model.refresh_from_db()
    assert model.placement == {"labels": {"rack": "r7", "soc": "Ascend310P3"}}
    card = _card(client.get("/models/mlp/").content.decode())
    assert 'value="rack=r7, soc=Ascend310P3"' in card


def test_a_viewer_cannot_change_the_placement(model, node_b, viewer_client) -> None:
    response = viewer_client.post("/models/mlp/placement/", {"mode": "nodes", "nodes": ["b"]})
    assert response.status_code == 403
    assert not Job.objects.filter(kind=Job.Kind.PLACE).exists()
    model.refresh_from_db()
    assert model.placement == {}


@pytest.mark.parametrize(
    ("form", "said"),
    [
        ({"mode": "labels", "labels": "soc"}, "&#x27;soc&#x27; is not key=value."),
        ({"mode": "labels", "labels": "a=1, a=2"}, "The label &#x27;a&#x27; is given twice."),
        ({"mode": "labels", "labels": "bad key=1"}, "the key is a name"),
        ({"mode": "nodes"}, "Tick at least one node"),
        ({"mode": "nodes", "nodes": ["../x"]}, "is not a node name"),
    ],
)
def test_a_bad_placement_comes_back_as_a_message(model, node_b, operator, form, said) -> None:
    client = signed_in(operator)
    response = client.post("/models/mlp/placement/", form, follow=True)
    assert response.status_code == 200
    assert response.redirect_chain == [("/models/mlp/#nodes", 302)]
    assert said in response.content.decode()
    assert not Job.objects.filter(kind=Job.Kind.PLACE).exists()


def test_the_history_shows_each_nodes_step(model, viewer_client) -> None:
    steps = [
        {"node": "local", "ok": True, "from_version": 1, "to_version": 2, "duration_s": 0.5,
         "reason": "", "fetched": False},
        {"node": "b", "ok": True, "from_version": 1, "to_version": 2, "duration_s": 1.8412,
         "reason": "", "fetched": True},
        {"node": "c", "ok": False, "from_version": None, "to_version": 2, "duration_s": 3.0,
         "reason": "Triton did not load it", "fetched": True},
    ]  # fmt: skip
    Event.objects.create(model=model, kind="job.failed", message="Rollout stopped.",
                         data={"nodes": steps})  # fmt: skip
    # Reconcile's placement request names nodes only: nothing to show per step.
    Event.objects.create(model=model, kind="place.requested", message="Reconcile.",
                         data={"nodes": ["b"], "reason": "reconcile"})  # fmt: skip
    page = viewer_client.get("/models/mlp/").content.decode()
    assert '<small class="muted" data-node-step="b">b: v1 -&gt; v2 in 1.84 s</small>' in page
    failed = '<small class="error" data-node-step="c">c: nothing -&gt; v2 in 3.00 s: Triton did'
    assert failed in page
    assert page.count("data-node-step=") == 3

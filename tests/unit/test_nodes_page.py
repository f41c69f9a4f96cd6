"""The Nodes page (also at /server/): every node's state, and each node's details."""

from __future__ import annotations

import pytest

from tests.fixtures.users import signed_in
from tests.unit.test_nodes_api import Node_, report
from webapp.nodes import tokens as node_scope
from webapp.nodes.models import Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_nodes(settings, monkeypatch, tmp_path) -> Node_:
    """``local`` (the stack's worker, no NPU here) and ``b`` (an Atlas host with one NPU)."""
    from tests.fixtures.hosts import worker_probes_host

    settings.TRITON_URL = "127.0.0.1:9"  # no Triton: the page says so, quickly
    monkeypatch.setenv("PATH", str(tmp_path))
    worker_probes_host()
    b = Node_("b")
    assert b.report().status_code == 200
    return b


@pytest.mark.parametrize("path", ["/server/", "/nodes/"])
def test_the_page_lists_every_node_and_shows_each(viewer_client, two_nodes, path):
    page = viewer_client.get(path).content.decode()
    assert "<h1>Nodes</h1>" in page
    assert 'id="node-local" data-state="up"' in page and 'id="node-b" data-state="up"' in page
    assert "Ascend310P3" in page and "8.5.0" in page and "<code>10.0.0.2:8000</code>" in page
    detail = page.split('id="node-detail-b"', 1)[1]
    assert "310P3" in detail and 'id="host-cann-b"' in detail
    assert 'id="node-b-check-npu_smi" data-state="ok"' in detail  # its host checks
    assert "rack=r7" in detail
    assert "Drain</button>" not in page  # a viewer cannot drain
    partial = viewer_client.get(path, HTTP_HX_REQUEST="true").content.decode()
    assert "<h1>" not in partial and 'id="node-b"' in partial


def test_a_refused_node_shows_why(viewer_client, two_nodes):
    body = report("b", protocol=99)
    assert two_nodes.report(body).status_code == 409
    page = viewer_client.get("/nodes/").content.decode()
    assert 'id="node-b" data-state="down"' in page and "Refused: the node speaks" in page


def test_operators_drain_and_admins_revoke_and_remove(operator, admin_user, two_nodes):
    client = signed_in(operator)
    assert "Drain</button>" in client.get("/nodes/").content.decode()
    client.post("/nodes/b/drain/", {"draining": "1"})
    assert Node.objects.get(name="b").draining
    assert client.post("/nodes/b/remove/").status_code == 403  # admins only

    admin = signed_in(admin_user)
    page = admin.get("/nodes/").content.decode()
    assert "Revoke its tokens" in page and "Remove the node" in page
    admin.post("/nodes/b/revoke/")
    assert node_scope.live_tokens("b") == []
    admin.post("/nodes/b/remove/")
    assert not Node.objects.filter(name="b").exists()


def test_a_viewer_cannot_drain(viewer_client, two_nodes):
    assert viewer_client.post("/nodes/b/drain/", {"draining": "1"}).status_code == 403
    assert not Node.objects.get(name="b").draining

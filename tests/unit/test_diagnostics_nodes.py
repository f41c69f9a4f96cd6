"""The Diagnostics page per node: the hub's checks, then each node's host checks from its newest
report (``local`` first, then by name), with its state and the report's age; ``?node=NAME``
shows one node alone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from model_store.host_report import build_host_report
from tests.fixtures.nodes import Node_, report
from webapp.nodes import host_reports
from webapp.nodes.models import HostReport, Node

pytestmark = pytest.mark.django_db

NO_NPUS = {"available": False, "npus": [], "reason": "npu-smi not found on PATH"}


@pytest.fixture
def no_triton(settings) -> None:
    settings.TRITON_URL = "127.0.0.1:9"  # discard port: the hub's checks fail fast
    settings.HOST_PROBE_SECONDS = 30


@pytest.fixture
def two_nodes(no_triton) -> Node_:
    """``local`` (the stack's worker, no CANN or NPU here) and ``b`` (an Atlas host)."""
    host_reports.record(build_host_report({"PATH": "/nonexistent"}, devices=lambda: NO_NPUS))
    b = Node_("b")
    assert b.report().status_code == 200
    return b


def section(page: str, node: str) -> str:
    """The HTML of ``node``'s section."""
    start = page.index(f'data-node="{node}"')
    return page[start : page.index("</section>", start)]


def test_each_node_has_its_section_after_the_hubs_local_first(
    viewer_client: Client, two_nodes: Node_
) -> None:
    page = viewer_client.get("/diagnostics/").content.decode()
    hub, local, b = (
        page.index(m) for m in ('id="hub-checks"', 'id="host-checks"', 'id="host-checks-b"')
    )
    assert hub < local < b
    assert 'id="host-checks" class="node-checks" data-node="local" data-state="up"' in page
    local_section = section(page, "local")
    assert 'id="check-npu_smi" data-state="not_applicable" data-ran-on="host"' in local_section
    assert "Reported by a worker on <code>" in local_section
    b_section = section(page, "b")
    assert 'data-state="up"' in b_section and ">UP</span>" in b_section
    assert 'id="node-b-check-npu_smi" data-state="ok" data-ran-on="host"' in b_section
    assert "<code>atlas-1</code>" in b_section  # who reported it, with the report's age
    assert "1 check: 1 ok" in b_section
    assert 'href="/diagnostics/?node=b"' in b_section
    # The line above counts the hub's checks and every node's.
    summary = page.split('id="diagnostics-summary">', 1)[1].split("<", 1)[0]
    assert summary.startswith("13 checks:"), summary  # 6 hub + 6 local + 1 of b


def test_one_node_alone(viewer_client: Client, two_nodes: Node_) -> None:
    page = viewer_client.get("/diagnostics/?node=b").content.decode()
    assert 'data-node="b"' in page and 'data-node="local"' not in page
    assert 'id="hub-checks"' not in page  # nor a wait for the hub's checks
    assert "Every node, and the hub's checks</a>" in page
    assert 'hx-get="/diagnostics/?node=b"' in page  # "Run again" keeps to that node
    rows = viewer_client.get("/diagnostics/?node=b", HTTP_HX_REQUEST="true").content.decode()
    assert "<h1>" not in rows and 'data-node="b"' in rows and 'data-node="local"' not in rows
    local = viewer_client.get("/diagnostics/?node=local").content.decode()
    assert 'data-node="local"' in local and 'data-node="b"' not in local


@pytest.mark.parametrize("name", ["nope", "../etc", "b c", "x" * 70])
def test_an_unknown_node_is_a_404(viewer_client: Client, two_nodes: Node_, name: str) -> None:
    assert viewer_client.get("/diagnostics/", {"node": name}).status_code == 404


def test_a_node_whose_report_has_no_diagnostics_says_so(
    viewer_client: Client, two_nodes: Node_
) -> None:
    older = report("b")
    del older["diagnostics"]
    assert two_nodes.report(older).status_code == 200
    b_section = section(viewer_client.get("/diagnostics/?node=b").content.decode(), "b")
    assert 'id="host-checks-b-missing"' in b_section
    assert "the last report of node b carries no diagnostics (a node worker older" in b_section
    assert "<code>atlas-1</code>" in b_section  # the report is there, only its checks are not


def test_a_down_node_shows_its_last_known_checks_and_their_age(
    viewer_client: Client, two_nodes: Node_
) -> None:
    HostReport.objects.filter(node="b").update(received=timezone.now() - timedelta(minutes=12))
    page = viewer_client.get("/diagnostics/").content.decode()
    b_section = section(page, "b")
    assert 'data-state="down"' in b_section and ">DOWN</span>" in b_section
    assert "Down: last known, 12 minutes old" in b_section
    assert 'id="node-b-check-npu_smi" data-state="ok"' in b_section  # still shown
    assert "last known" not in section(page, "local")
    assert "; down: b" in page.split('id="diagnostics-summary">', 1)[1].split("<", 1)[0]


def test_nodes_before_their_first_report(viewer_client: Client, no_triton) -> None:
    Node_("edge-1")  # registered by its token, never reported
    page = viewer_client.get("/diagnostics/").content.decode()
    local = section(page, "local")  # always shown: it is the stack's own worker
    assert 'data-state="down"' in local and 'id="host-checks-missing"' in local
    assert "no worker has reported from the host yet: start a worker" in local
    edge = section(page, "edge-1")
    assert "node edge-1 has not reported yet: start its node worker" in edge
    assert "<code>make node NAME=edge-1</code>" in edge
    assert "last known" not in edge  # nothing known at all


def test_a_draining_or_refused_node_says_so(viewer_client: Client, two_nodes: Node_) -> None:
    Node.objects.filter(name="b").update(draining=True)
    b_section = section(viewer_client.get("/diagnostics/?node=b").content.decode(), "b")
    assert 'data-state="draining"' in b_section and "badge-busy" in b_section
    Node.objects.filter(name="b").update(draining=False)
    assert two_nodes.report(report("b", protocol=99)).status_code == 409
    b_section = section(viewer_client.get("/diagnostics/?node=b").content.decode(), "b")
    assert (
        'data-state="down"' in b_section
        and "Its last report was refused: the node speaks" in b_section
    )

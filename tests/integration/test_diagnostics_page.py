"""The Diagnostics page and ``GET /api/v1/diagnostics`` on this machine (no CANN, no NPU).

Every check runs for real here: the host checks in a host report made with this host's
environment, PATH, /dev and npu-smi (as its worker makes it), the hub checks against Triton
either unreachable (the discard port) or the session's embedded Triton. A real worker making
the report is tests/integration/test_host_probe_worker.py.
"""

from __future__ import annotations

import html

import pytest
from django.test import Client

from model_store.diagnostics.checklist import CHECKS
from model_store.diagnostics.context import STATES, TITLES
from tests.fixtures.hosts import worker_probes_host
from tests.fixtures.openapi import inline
from tests.fixtures.triton import TritonHandle
from tests.fixtures.users import token_for

pytestmark = pytest.mark.integration

WORDS = {"OK", "WARNING", "FAILING", "NOT APPLICABLE"}


@pytest.fixture
def no_triton(settings) -> None:
    settings.TRITON_URL = "127.0.0.1:9"  # discard port: nothing listens


@pytest.fixture(autouse=True)
def host_reported(db) -> None:
    """This host's worker has reported (the host checks come from its report)."""
    worker_probes_host()


def test_page_lists_every_check_with_a_state_in_words(viewer_client: Client, no_triton) -> None:
    response = viewer_client.get("/diagnostics/")
    assert response.status_code == 200
    page = response.content.decode()
    for cid, _ in CHECKS:
        assert f'id="check-{cid}"' in page
        assert str(TITLES[cid]) in page
    assert f"{len(CHECKS)} checks:" in page
    assert "Run again" in page and "Running checks…" in page
    assert "Not run on Ascend hardware" in page
    assert "the check itself failed" not in page
    assert any(word in page for word in WORDS)


def test_unreachable_triton_is_failing_with_what_to_do(viewer_client: Client, no_triton) -> None:
    page = viewer_client.get("/diagnostics/").content.decode()
    row = page.split('id="check-triton_reachable"', 1)[1].split("</tr>", 1)[0]
    assert "FAILING" in row
    assert "http://127.0.0.1:9 is not reachable" in row
    assert "TRITON_URL" in row and "<code>make run</code>" in row


def test_run_again_returns_only_the_rows(viewer_client: Client, no_triton) -> None:
    response = viewer_client.get("/diagnostics/", HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body and 'id="check-cann_env"' in body


def test_server_page_links_to_diagnostics(viewer_client: Client, no_triton) -> None:
    assert 'href="/diagnostics/"' in viewer_client.get("/server/").content.decode()


def test_api_reports_each_check_with_a_summary(viewer, no_triton) -> None:
    response = Client().get("/api/v1/diagnostics", HTTP_AUTHORIZATION=f"Token {token_for(viewer)}")
    assert response.status_code == 200
    body = response.json()
    assert set(body) >= {"checks", "summary", "ran_at"}
    assert [c["id"] for c in body["checks"]] == [cid for cid, _ in CHECKS]
    for check in body["checks"]:
        assert set(check) == {"id", "title", "state", "found", "advice", "details", "ran_on"}
        assert check["state"] in STATES
        assert not check["found"].startswith("the check itself failed"), check
    assert set(body["summary"]) == set(STATES)
    assert sum(body["summary"].values()) == len(body["checks"])
    triton = next(c for c in body["checks"] if c["id"] == "triton_reachable")
    assert triton["state"] == "failing" and triton["advice"]


def test_api_and_page_need_a_signed_in_user(db, no_triton) -> None:
    assert Client().get("/api/v1/diagnostics").status_code == 401
    page = Client().get("/diagnostics/")
    assert page.status_code == 302 and "/login/" in page["Location"]


def test_schema_documents_diagnostics(viewer_client: Client) -> None:
    schema = viewer_client.get("/api/v1/schema").json()
    operation = schema["paths"]["/api/v1/diagnostics"]["get"]
    documented = inline(
        schema, operation["responses"]["200"]["content"]["application/json"]["schema"]
    )
    states = documented["properties"]["checks"]["items"]["properties"]["state"]["enum"]
    assert states == list(STATES)


@pytest.fixture
def hub_on_embedded_triton(settings, embedded_triton: TritonHandle) -> TritonHandle:
    """The dashboard pointed at the session's Triton, holding its key."""
    settings.TRITON_URL = embedded_triton.triton.urls["http"]
    settings.TRITON_GRPC_URL = embedded_triton.triton.urls["grpc"]
    settings.TRITON_API_KEY = embedded_triton.triton.api_key
    return embedded_triton


def test_with_the_embedded_triton_it_is_reachable_and_nothing_failed(
    viewer_client: Client, settings, hub_on_embedded_triton: TritonHandle
) -> None:
    embedded_triton = hub_on_embedded_triton
    settings.TRITON_BACKENDS_DIR = embedded_triton.backends_dir
    settings.TRITON_LOG_PATH = embedded_triton.triton.log_path
    worker_probes_host()  # the npu_ge check reads the backends from the worker's host
    body = viewer_client.get("/api/v1/diagnostics").json()
    checks = {c["id"]: c for c in body["checks"]}
    assert checks["triton_reachable"]["state"] == "ok", checks["triton_reachable"]
    assert checks["triton_access"]["state"] == "ok", checks["triton_access"]
    assert "HTTP" in checks["triton_access"]["found"] and "gRPC" in checks["triton_access"]["found"]
    assert checks["stuck_loading"]["state"] == "ok"
    assert checks["load_failures"]["state"] == "ok", checks["load_failures"]
    backend = checks["npu_ge_backend"]
    assert backend["state"] == "not_applicable"
    assert str(embedded_triton.backends_dir) in backend["found"]


@pytest.mark.parametrize(
    ("hub_key", "says"),
    [
        ("a-key-that-triton-does-not-know", "the hub's TRITON_API_KEY does not match"),
        ("", "the hub has no TRITON_API_KEY"),
    ],
)
def test_a_wrong_or_missing_hub_key_is_failing_in_plain_words(
    viewer_client: Client, settings, hub_on_embedded_triton: TritonHandle, hub_key: str, says: str
) -> None:
    settings.TRITON_API_KEY = hub_key
    page = viewer_client.get("/diagnostics/").content.decode()
    row = html.unescape(page.split('id="check-triton_access"', 1)[1].split("</tr>", 1)[0])
    assert "FAILING" in row and says in row
    assert "TRITON_API_KEY_FILE" in row
    assert hub_on_embedded_triton.triton.api_key not in page

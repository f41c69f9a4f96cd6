"""The stack's real worker is the node ``local``: it appears ``up`` with the NPUs it sees.

The worker gets a fake CANN 8.5 install and the fake ``npu-smi`` (tests/fakes/toolkit.py); a
second node reports over the API with its node token, and both are listed.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.toolkit import make_fake_toolkit
from tests.fixtures.waiting import wait_until
from tests.unit.test_nodes_api import Node_

pytestmark = pytest.mark.integration


@pytest.fixture
def worker_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_fake_toolkit(tmp_path_factory.mktemp("host") / "Ascend", layout="cann")


def test_the_local_worker_appears_as_an_up_node_with_its_npus(celery_worker, viewer_api) -> None:
    def local() -> dict[str, Any] | None:
        nodes = viewer_api("get", "/api/v1/nodes").json()["nodes"]
        found = next((n for n in nodes if n["name"] == "local"), None)
        # A busy machine may list local from the hub's side before the worker's first report.
        return found if found and found["triton"].get("http") else None

    # A starting worker probes its host at once (workers/celery.py, worker_ready).
    found = wait_until(
        local,
        timeout=90,
        message=lambda: f"the first host report; worker log:\n{celery_worker.log_text()[-3000:]}",
    )
    assert found["state"] == "up", found
    assert found["devices"] and found["devices"][0]["name"].startswith("310P")
    assert found["soc"].startswith("Ascend310P") and found["cann_version"]
    assert found["triton"]["http"] == "127.0.0.1:9"  # the worker's TRITON_URL

    b = Node_("b")
    assert b.report().status_code == 200
    states = {n["name"]: n["state"] for n in viewer_api("get", "/api/v1/nodes").json()["nodes"]}
    assert states == {"b": "up", "local": "up"}

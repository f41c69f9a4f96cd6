"""``/v2`` on the hub (webapp/gateway.py): the real ``tritonclient.http`` pointed at the hub with a
token works unchanged (health, metadata, config, JSON and binary inference); repository and
model control are refused with the reason; no token, no answer; Triton's errors keep their
status and message; each inference is counted for its model."""

from __future__ import annotations

import json
import os
import sys
import urllib.request

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from model_store import spawn
from tests.fixtures.pipeline import add_version, create_model, mlp_payload
from tests.fixtures.triton import reference_outputs
from webapp.ops.metrics_store import flush_client_calls
from webapp.ops.models import ClientTally

pytestmark = pytest.mark.integration


@pytest.fixture
def hub(api, celery_worker, triton, live_server):  # type: ignore[no-untyped-def]
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    served = api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1})
    assert served.status_code == 200, served.json()
    address = live_server.url.removeprefix("http://")
    return httpclient.InferenceServerClient(address), {"Authorization": f"Token {api.key}"}


def _infer(client, headers, x, *, binary: bool):  # type: ignore[no-untyped-def]
    given = httpclient.InferInput("x", list(x.shape), "FP32")
    given.set_data_from_numpy(x, binary_data=binary)
    wanted = [httpclient.InferRequestedOutput("y", binary_data=binary)]
    return client.infer("mlp", [given], outputs=wanted, headers=headers)


def test_tritonclient_pointed_at_the_hub_works_unchanged(hub) -> None:  # type: ignore[no-untyped-def]
    client, headers = hub
    assert client.is_server_live(headers=headers) and client.is_server_ready(headers=headers)
    assert client.get_server_metadata(headers=headers)["name"] == "triton"
    assert client.is_model_ready("mlp", headers=headers)
    metadata = client.get_model_metadata("mlp", headers=headers)
    assert [i["name"] for i in metadata["inputs"]] == ["x"]
    assert client.get_model_config("mlp", headers=headers)["name"] == "mlp"
    x = np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32)
    expected = reference_outputs(mlp_payload(1), x)
    for binary in (False, True):
        answer = _infer(client, headers, x, binary=binary)
        np.testing.assert_allclose(answer.as_numpy("y"), expected, atol=1e-5)
    # Counted for the model, as the hub's own calls are (npu_ge models have no other numbers).
    flush_client_calls()
    counted = ClientTally.objects.filter(model_name="mlp", version="1")
    assert sum(row.requests for row in counted) == 2


def test_control_is_refused_and_tokens_are_required(hub) -> None:  # type: ignore[no-untyped-def]
    client, headers = hub
    with pytest.raises(InferenceServerException) as refused:
        client.unload_model("mlp", headers=headers)
    assert "repository and model control" in str(refused.value).lower()
    with pytest.raises(InferenceServerException):
        client.get_model_repository_index(headers=headers)
    with pytest.raises(InferenceServerException) as anonymous:
        client.get_model_metadata("mlp")
    assert "token" in str(anonymous.value).lower()
    # Triton's own errors keep their message: a shape the model refuses.
    bad = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(InferenceServerException) as wrong:
        _infer(client, headers, bad, binary=True)
    assert "shape" in str(wrong.value).lower() or "expected" in str(wrong.value).lower()
    with pytest.raises(InferenceServerException) as unknown:
        client.get_model_metadata("nope", headers=headers)
    assert "nope" in str(unknown.value)


def test_the_try_it_snippets_run_against_the_hub_as_copied(hub, api, live_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    request = urllib.request.Request(
        f"{live_server.url}/api/v1/models/mlp/infer", method="POST",
        data=json.dumps({"inputs": {"x": [[0.5] * 8]}, "snippets": True}).encode(),
        headers={"Authorization": f"Token {api.key}", "Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=60) as answer:
        snippets = json.loads(answer.read())["snippets"]
    script = tmp_path / "call.py"
    script.write_text(snippets["python"])
    env = {**os.environ, "HUB_TOKEN": api.key}
    ran = spawn.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                    timeout=120, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "y float32 [1, 4]" in ran.stdout, ran.stdout
    assert f"{live_server.url}/v2/models/mlp/versions/1/infer" in snippets["curl"]

"""Canary releases end to end: real Triton, Redis, Celery worker and web server, traffic
through the hub's ``/v2`` (its fast path) from client threads the whole time.

A healthy candidate is promoted step by step (each step's share within 10 points of its
target, as the gateway counted it and as the clients saw it) and a slow one is rolled back
by the watcher on its own, with a reason that names latency; no client request fails.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.fixtures.gateway_clients import Clients
from tests.fixtures.pipeline import add_version, create_model, mlp_payload, upload, wait_for_job
from tests.fixtures.triton import reference_outputs
from tests.fixtures.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.canary]

X = np.random.default_rng(5).standard_normal((1, 8)).astype(np.float32)


def slow_mlp_bytes(seed: int, chain: int = 1500, width: int = 512) -> bytes:
    """``mlp_payload(seed)``'s answers, computed after ``chain`` MatMul+Tanh layers ``width``
    wide whose result is multiplied by zero: the same outputs, tens of milliseconds later.

    About 38 ms of one core here, against 0.02 ms for the plain MLP. At 256 wide (12 ms) a
    CI machine busy with other suites stretched the serving version's p99 to within 2x of
    it once, and the slow version was promoted."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from tests.fixtures.triton import mlp_weights

    weight, bias = mlp_weights(8, 4, seed)
    rng = np.random.default_rng(0)
    widen = rng.standard_normal((8, width)).astype(np.float32) * 0.1
    spin = rng.standard_normal((width, width)).astype(np.float32) * (1 / width**0.5)
    nodes = [helper.make_node("MatMul", ["x", "P"], ["t_start"])]
    last = "t_start"
    for i in range(chain):
        nodes.append(helper.make_node("MatMul", [last, "S"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}"]))
        last = f"t{i}"
    nodes += [
        helper.make_node("ReduceSum", [last, "axes"], ["spun"], keepdims=1),
        helper.make_node("Mul", ["spun", "zero"], ["nothing"]),
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "B"], ["pre0"]),
        helper.make_node("Add", ["pre0", "nothing"], ["pre"]),
        helper.make_node("Relu", ["pre"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "slow_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        initializer=[
            numpy_helper.from_array(weight, "W"),
            numpy_helper.from_array(bias, "B"),
            numpy_helper.from_array(widen, "P"),
            numpy_helper.from_array(spin, "S"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
            numpy_helper.from_array(np.zeros((1,), dtype=np.float32), "zero"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


@pytest.fixture
def three_versions(api, celery_worker, triton) -> None:  # type: ignore[no-untyped-def]
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    add_version(api, celery_worker, 2)
    response = upload(api, "mlp", slow_mlp_bytes(3))
    assert response.status_code == 201, response.content
    job = wait_for_job(response.json()["job"], celery_worker, timeout=300)
    assert job.state == "succeeded", job.error
    answer = api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1})
    assert answer.status_code == 200, answer.json()


def _canary(api, version: int, **gates: object) -> dict:  # type: ignore[no-untyped-def]
    body = {"version": version, "steps": [20, 60, 100], "step_seconds": 5,
            "max_error_rate": 0.01, "max_p99_ratio": 4, "min_requests": 30, **gates}  # fmt: skip
    response = api("post", "/api/v1/models/mlp/canary", body)
    assert response.status_code == 202, response.content
    return response.json()  # type: ignore[no-any-return]


def _until_ended(api, celery_worker, timeout: float = 150) -> dict:  # type: ignore[no-untyped-def]
    def ended() -> dict | None:
        shown = api("get", "/api/v1/models/mlp/canary").json()
        if shown["phase"] in ("promoted", "rolled_back", "aborted", "failed"):
            return shown  # type: ignore[no-any-return]
        if celery_worker.proc.poll() is not None:
            pytest.fail(f"the worker died:\n{celery_worker.log_text()}")
        return None

    return wait_until(  # type: ignore[no-any-return]
        ended, timeout, interval=0.5,
        message=lambda: f"the canary did not end:\n{celery_worker.log_text()[-4000:]}",
    )  # fmt: skip


def test_promoted_step_by_step_then_a_slow_one_rolled_back(
    web, three_versions, api, celery_worker, operator
) -> None:  # type: ignore[no-untyped-def]
    from webapp.accounts.models import ApiToken

    references = {v: reference_outputs(mlp_payload(v), X) for v in (1, 2, 3)}
    # Production traffic: a service's token with no per-minute limit of its own, as an admin
    # gives one (the owner's INFER_RATE_PER_MINUTE would refuse it within seconds).
    service, key = ApiToken.issue(operator, "service")
    ApiToken.objects.filter(pk=service.pk).update(rate_per_minute=0)
    with Clients(web, key, references, X) as clients:
        wait_until(lambda: len(clients.answers) > 50, 60, message="no answers through /v2")
        _canary(api, 2)
        promoted = _until_ended(api, celery_worker)
        assert promoted["state"] == "promoted", promoted
        passed = [d for d in promoted["decisions"] if d["verdict"] == "pass"]
        assert [d["weight"] for d in passed] == [20, 60]
        for decision in passed:  # the share the gateway counted, per step
            ours, theirs = decision["candidate"]["requests"], decision["serving"]["requests"]
            print(f"step {decision['weight']}%: candidate {ours}, serving {theirs} calls")
            assert abs(100 * ours / (ours + theirs) - decision["weight"]) <= 10, decision
        after_promotion = time.monotonic()
        wait_until(lambda: len([a for a in clients.answers if a[0] > after_promotion]) > 30, 60)
        assert clients.versions_after(after_promotion) == {2}

        _canary(api, 3, max_p99_ratio=2)
        rolled_back = _until_ended(api, celery_worker)
        assert rolled_back["state"] == "rolled_back", rolled_back["decisions"]
        print(rolled_back["reason"])
        assert "p99" in rolled_back["reason"] and "limit 2x" in rolled_back["reason"]
        after_rollback = time.monotonic()
        wait_until(lambda: len([a for a in clients.answers if a[0] > after_rollback]) > 30, 60)
        assert clients.versions_after(after_rollback) == {2}
    print(f"{len(clients.answers)} client calls through /v2, {len(clients.failures())} failed")
    assert clients.failures() == []
    model = api("get", "/api/v1/models/mlp").json()
    assert model["serving_version"] == 2
    history = [e["kind"] for e in api("get", "/api/v1/models/mlp/history").json()["events"]]
    assert "canary.promoted" in history and "canary.rolled_back" in history


def test_clients_that_name_a_version_are_not_split(web, three_versions, api) -> None:
    """A call to /v2/models/mlp/versions/1/infer goes to v1 whatever the canary's share."""
    _canary(api, 2, steps=[90, 100], step_seconds=600)
    wait_until(lambda: api("get", "/api/v1/models/mlp/canary").json()["weight"] == 90, 60)
    client = httpclient.InferenceServerClient(web)
    given = httpclient.InferInput("x", list(X.shape), "FP32")
    given.set_data_from_numpy(X, binary_data=True)
    headers = {"Authorization": f"Bearer {api.key}"}
    said = {client.infer("mlp", [given], model_version="1", headers=headers).get_response()[
        "model_version"] for _ in range(20)}  # fmt: skip
    assert said == {"1"}
    assert api("post", "/api/v1/models/mlp/canary/abort").status_code == 202

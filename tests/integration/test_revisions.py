"""Config revisions through the whole product: API -> job -> a real worker -> a real Triton.

A revision that changes only scheduling (instances, batching) reuses the built file and its
verification, and switches under load without a failed request; one that changes how the file
is built goes through compile and verify again."""

from __future__ import annotations

import time

import pytest

from model_store.runtime.client import TritonRuntime
from tests.fixtures.pipeline import add_version, create_model, mlp_traffic, wait_for_job
from tests.fixtures.triton import wait_for_state
from webapp.ops.triton import get_runtime
from webapp.registry.catalogue.models import Version
from webapp.registry.jobs.models import Event, Job

pytestmark = pytest.mark.integration

SCHEDULING = {
    "instance_count": 2,
    "dynamic_batching": {"preferred_batch_size": [4, 8], "max_queue_delay_microseconds": 500},
}


@pytest.mark.load  # a switch under client traffic: run once in CI, not per database
def test_a_batching_revision_reuses_the_artifact_and_switches_without_a_failed_request(
    api, celery_worker, triton
) -> None:
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1}).status_code == 200

    preview = api("post", "/api/v1/models/mlp/versions/1/revise?dry_run=true", SCHEDULING)
    assert preview.status_code == 200, preview.json()
    assert preview.json()["reuses_artifact"] and preview.json()["ok"]
    assert "+  count: 2\n" in preview.json()["diff"]
    assert Version.objects.filter(model__name="mlp").count() == 1  # a preview writes nothing

    made = api("post", "/api/v1/models/mlp/versions/1/revise", SCHEDULING)
    assert made.status_code == 201, made.json()
    body = made.json()
    assert (body["version"], body["revision_of"], body["reuses_artifact"]) == (2, 1, True)
    job = wait_for_job(body["job"], celery_worker)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert [s["name"] for s in job.steps] == ["reuse", "package"]  # no compile, no verify

    original = Version.objects.get(model__name="mlp", number=1)
    revision = Version.objects.get(model__name="mlp", number=2)
    assert revision.revision_of == original
    assert revision.artifact_sha256 == original.artifact_sha256
    assert revision.verification_passed and revision.verification["reused_from"] == 1
    assert "count: 2" in revision.config_pbtxt and "max_queue_delay_microseconds: 500" in (
        revision.config_pbtxt
    )
    # The source is shared, not copied (same filesystem: one inode).
    sources = celery_worker.store / "sources" / "mlp"
    assert (sources / "2" / "model.onnx").stat().st_ino == (
        sources / "1" / "model.onnx"
    ).stat().st_ino
    detail = api("get", "/api/v1/models/mlp/versions/2").json()
    assert detail["revision_of"] == 1

    with mlp_traffic(triton.urls["http"]) as traffic:
        traffic.wait_for(20)
        switched = api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 2})
        after = time.monotonic()
        assert switched.status_code == 200, switched.json()
        traffic.wait_for(20, after=after)
    assert traffic.failures() == []
    # Same weights as version 1, so the answers match version 1's: the config tells them apart.
    assert traffic.versions_between(after) == {1}
    # Version 1 is unloaded once calls go to version 2. (Triton keeps version 2's instance
    # from the hand-over's load, so the config it reports still lists both; the file and
    # what is loaded are what count: docs/gateway.md.)
    wait_for_state(get_runtime(), "mlp", "UNAVAILABLE", version="1")
    assert (
        "versions: 2\n" in (celery_worker.store / "repository" / "mlp" / "config.pbtxt").read_text()
    )
    served = TritonRuntime(triton.urls["http"]).model_config("mlp")
    assert served["instance_group"][0]["count"] == 2
    assert served["dynamic_batching"]["preferred_batch_size"] == [4, 8]
    revised = Event.objects.get(kind="version.revised")
    assert "instance_count 1 -> 2" in revised.message and "reuses the artifact" in revised.message


def test_a_build_option_revision_compiles_and_verifies_again(api, celery_worker) -> None:
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    made = api("post", "/api/v1/models/mlp/versions/1/revise", {"ort_optimization_level": "all"})
    assert made.status_code == 201, made.json()
    assert made.json()["rebuild"] == ["ort_optimization_level"]
    job = wait_for_job(made.json()["job"], celery_worker)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert [s["name"] for s in job.steps] == ["validate", "compile", "verify", "package"]
    revision = Version.objects.get(model__name="mlp", number=2)
    assert revision.verification_passed and "reused_from" not in revision.verification
    assert revision.options["ort_optimization_level"] == "all"


@pytest.mark.parametrize(
    ("changes", "status", "code"),
    [
        ({"instance_count": 1}, 400, "no_change"),
        ({"instance_count": -3}, 400, "invalid_options"),
        ({"warp_speed": True}, 400, "invalid_options"),
    ],
)
def test_bad_revisions_are_refused_and_write_nothing(
    api, celery_worker, changes, status, code
) -> None:
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    refused = api("post", "/api/v1/models/mlp/versions/1/revise", changes)
    assert (refused.status_code, refused.json()["code"]) == (status, code), refused.json()
    assert list(Version.objects.filter(model__name="mlp").values_list("number", flat=True)) == [1]
    assert not (celery_worker.store / "sources" / "mlp" / "2").exists()

"""Retiring a serving model through the whole product: API -> job -> a real worker -> a real
Triton. The model stops answering, its repository directory goes, its sources are kept, its
history stays; then a new model takes the name and serves from version 1 again."""

from __future__ import annotations

import pytest

from model_store.runtime.client import TritonRuntime
from tests.fixtures.pipeline import add_version, create_model, wait_for_job
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.models import Event, Job

pytestmark = pytest.mark.integration


def test_a_serving_model_is_retired_and_its_name_serves_again(api, celery_worker, triton) -> None:
    runtime = TritonRuntime(triton.urls["http"])
    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1}).status_code == 200
    assert runtime.model_ready("mlp")
    old = Model.objects.get(name="mlp")

    refused = api("delete", "/api/v1/models/mlp")
    assert refused.status_code == 409 and refused.json()["code"] == "serving"
    assert runtime.model_ready("mlp")  # nothing happened

    accepted = api("delete", "/api/v1/models/mlp?confirm_serving=true&reason=replaced")
    assert accepted.status_code == 202, accepted.content
    job = wait_for_job(accepted.json()["job"], celery_worker)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert not runtime.model_ready("mlp")
    store = celery_worker.store
    assert not (store / "repository" / "mlp").exists()
    assert not (store / "sources" / "mlp").exists()
    assert (store / "retired" / f"mlp.{old.pk}" / "1" / "model.onnx").exists()
    retired = Model.all_objects.get(pk=old.pk)
    assert retired.retired_at is not None and retired.serving_version is None
    kinds = set(Event.objects.filter(model=retired).values_list("kind", flat=True))
    assert {"serve", "retire.requested", "retire"} <= kinds

    # The name is free: a new model starts at version 1 and serves under it.
    create_model(api, "mlp")
    assert add_version(api, celery_worker, 2) == 1
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1}).status_code == 200
    assert runtime.model_ready("mlp")
    assert Model.all_objects.filter(name="mlp").count() == 2
    assert Model.all_objects.get(pk=old.pk).versions.count() == 1  # the old record is intact

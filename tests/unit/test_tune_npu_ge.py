"""Tuning is refused for npu_ge models: its trials would load into the Triton that serves, where
the GE backend never frees a session and one failed load blocks every later one
(docs/ge-backend.md#statistics-reload-and-unload)."""

from __future__ import annotations

import pytest

from webapp.errors import HubError
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.performance.actions.tuning import request_tune
from webapp.registry.performance.models import TuningRun


@pytest.mark.django_db
def test_an_npu_ge_model_is_not_tuned_in_the_triton_that_serves(operator) -> None:
    model = Model.objects.create(name="ge", target="npu_ge", created_by=operator)
    Version.objects.create(
        model=model, number=1, status="ready", source_filename="m.onnx",
        source_sha256="0" * 64, source_size=10, artifact_name="model.onnx",
    )  # fmt: skip
    model.serving_version = 1
    model.save(update_fields=["serving_version"])
    with pytest.raises(HubError) as info:
        request_tune(model=model, user=operator, objective="throughput", p99_ms=50)
    assert (info.value.code, info.value.status) == ("not_tunable", 409)
    assert "block every later npu_ge load" in info.value.message
    assert not TuningRun.objects.exists()

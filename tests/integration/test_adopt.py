"""Adopting a team's Triton repository through the whole product: page -> worker -> Triton.

The admin ticks an ensemble on the adopt page; it brings the ONNX model and the Python-backend
model it composes. A real worker copies the versions; the adopted ONNX model serves at once
(its verification ran), the external ones after a recorded override, and answer through a
real Triton with what the team's own files compute. Adopting again adds nothing.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command

from tests.fixtures.pipeline import wait_for_job
from tests.fixtures.team_repository import build_team_repository
from tests.fixtures.triton import mlp_onnx_bytes, reference_outputs
from tests.fixtures.users import signed_in
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Job

pytestmark = pytest.mark.integration


def test_adopt_then_serve_onnx_python_and_ensemble(  # type: ignore[no-untyped-def]
    admin_user, admin_api, celery_worker, triton, tmp_path: Path
) -> None:
    repo = build_team_repository(tmp_path / "team")
    page = signed_in(admin_user)
    chosen = {"path": str(repo), "chosen": ["pipeline"], "adopt": "1"}
    response = page.post("/server/adopt/", chosen)
    assert response.status_code == 302, response.content
    jobs = list(Job.objects.filter(kind="adopt"))
    assert len(jobs) == 4  # classifier v1, v2, doubler v1, pipeline v1
    for job in jobs:
        finished = wait_for_job(str(job.uuid), celery_worker)
        assert finished.state == Job.State.SUCCEEDED, finished.error

    assert Version.objects.get(model__name="classifier", number=2).verification_passed
    serve = admin_api("post", "/api/v1/models/classifier/serve?wait=true", {"version": 2})
    assert serve.status_code == 200, serve.json()

    refused = admin_api("post", "/api/v1/models/doubler/serve?wait=true", {"version": 1})
    assert refused.status_code == 409 and refused.json()["code"] == "not_publishable"
    for name in ("doubler", "pipeline"):
        override = admin_api(
            "post", f"/api/v1/models/{name}/versions/1/override",
            {"reason": "Checked by the team: it served in their Triton for a year."},
        )  # fmt: skip
        assert override.status_code == 200, override.json()
        served = admin_api("post", f"/api/v1/models/{name}/serve?wait=true", {"version": 1})
        assert served.status_code == 200, served.json()

    runtime = triton.runtime()
    x = np.random.default_rng(3).standard_normal((2, 4)).astype(np.float32)
    expected = reference_outputs(mlp_onnx_bytes(seed=2), x)
    assert np.allclose(runtime.infer("classifier", {"x": x})["y"], expected, atol=1e-5)
    y = expected.astype(np.float32)
    assert np.allclose(runtime.infer("doubler", {"x": y})["y"], 2 * y)
    assert np.allclose(runtime.infer("pipeline", {"x": x})["z"], 2 * expected, atol=1e-5)
    served_config = (celery_worker.store / "repository" / "pipeline" / "config.pbtxt").read_text()
    assert "ensemble_scheduling" in served_config and "specific" in served_config

    out = io.StringIO()
    call_command("adopt", str(repo), "--only", "pipeline", stdout=out)
    assert "Nothing to adopt" in out.getvalue()
    assert Version.objects.count() == 4 and Model.objects.count() == 3

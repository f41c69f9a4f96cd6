"""Finding 8: an acl version is verified through the Triton that will serve it.

The worker has no pyACL (the fake ``acl`` is not on its path), as in the compose set-up; the
Triton on the worker's repository has it (tests/fakes first on its PYTHONPATH, as in
tests/integration/test_acl_backend.py). The OM cannot run on the worker, so the worker loads it
into that Triton under a temporary name, compares its outputs with the ONNX reference, and
removes it again: the version is verified "via triton".
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from model_store.runtime.embedded import EmbeddedTriton
from model_store.serving import is_trial_name
from model_store.text import from_json
from tests.fakes.cann import FAKES_DIR, make_fake_toolkit
from tests.fakes.toolkit import FAKE_CANN_VERSION
from tests.fixtures.pipeline import create_model, upload, wait_for_job
from tests.fixtures.triton import mlp_onnx_bytes, started_triton
from tests.fixtures.waiting import wait_until
from webapp.registry.catalogue.models import Version
from webapp.registry.jobs.models import Job

pytestmark = pytest.mark.integration

ACL_OPTIONS = {"soc_version": "Ascend310P3", "dynamic_batch_size": [1, 2, 4]}


@pytest.fixture
def worker_env(tmp_path_factory, triton_env) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """ATC on the worker (fake toolkit, no pyACL) and the addresses of ``acl_triton``."""
    return make_fake_toolkit(tmp_path_factory.mktemp("cann")) | triton_env


@pytest.fixture
def acl_triton(celery_worker, triton_env, triton_ports, tmp_path) -> Iterator[EmbeddedTriton]:  # type: ignore[no-untyped-def]
    """The serving Triton, on the worker's repository, whose Python stubs import the fake acl."""
    python_path = [FAKES_DIR, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {"PYTHONPATH": os.pathsep.join(map(str, python_path)), "FAKE_ACL_DEVICE_COUNT": "1"}
    with started_triton(
        tmp_path / "triton", celery_worker.store / "repository", celery_worker.store / "backends",
        ports=triton_ports, api_key=triton_env["TRITON_API_KEY"], env=env,
    ) as server:  # fmt: skip
        yield server


def test_an_om_the_worker_cannot_run_is_verified_through_triton(
    api, celery_worker, acl_triton
) -> None:  # type: ignore[no-untyped-def]
    create_model(api, "om-via-triton", target="acl")
    response = upload(api, "om-via-triton", mlp_onnx_bytes(16, 10), options=ACL_OPTIONS)
    assert response.status_code == 201, response.content
    job = wait_for_job(response.json()["job"], celery_worker)
    assert job.state == Job.State.SUCCEEDED, job.error

    version = Version.objects.get(model__name="om-via-triton")
    data = version.verification
    assert data["status"] == "passed", data
    assert data["via"] == "triton"
    assert is_trial_name(data["trial_model"])
    assert "pyACL is not available on this worker" in from_json(data["worker_reason"])
    assert version.publishable
    lines = [line.text for line in job.log_lines.all()]
    assert any("READY beside the serving model" in text for text in lines), lines
    # The temporary model is gone from the repository and from Triton.
    repository = celery_worker.store / "repository"
    assert not [p for p in repository.iterdir() if is_trial_name(p.name)]
    runtime = acl_triton.runtime()
    assert not [r for r in runtime.repository_index() if is_trial_name(r["name"])]
    runtime.close()

    # Finding 7: the toolkit that built the OM is kept and shown.
    assert version.cann_version == FAKE_CANN_VERSION
    detail = api("get", f"/api/v1/models/om-via-triton/versions/{version.number}")
    assert detail.status_code == 200, detail.content
    assert detail.json()["built_with"]["cann_version"] == FAKE_CANN_VERSION
    assert detail.json()["verification_report"]["via"] == "triton"


def test_when_triton_cannot_run_it_either_it_stays_not_run_with_both_reasons(
    api, celery_worker, triton
) -> None:  # type: ignore[no-untyped-def]
    """The plain ``triton`` fixture: no fake acl in its stubs, so the acl backend fails."""
    create_model(api, "om-nowhere", target="acl")
    response = upload(api, "om-nowhere", mlp_onnx_bytes(16, 10), options=ACL_OPTIONS)
    job = wait_for_job(response.json()["job"], celery_worker)
    assert job.state == Job.State.SUCCEEDED, job.error

    version = Version.objects.get(model__name="om-nowhere")
    data = version.verification
    assert data["status"] == "not_run", data
    assert "pyACL is not available on this worker" in from_json(data["worker_reason"])
    assert data["triton_reason"] and "could not load it either" in from_json(data["reason"])
    assert not version.publishable
    repository = celery_worker.store / "repository"
    assert not [p for p in repository.iterdir() if is_trial_name(p.name)]


def test_reconcile_ignores_a_running_trial_and_removes_one_a_crash_left(
    celery_worker, triton, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from model_store.config import ModelConfig, TensorSpec
    from model_store.serving import trial_model, trial_name
    from model_store.store import ModelStore
    from webapp.ops.triton import get_runtime
    from webapp.registry.serving.models import ReconcileReport
    from webapp.registry.serving.reconcile import reconcile

    # The worker reconciles once when it starts (workers/celery.py); under load that one may
    # come late and remove the left-over trial before the reconcile under test sees it.
    wait_until(ReconcileReport.objects.exists, 120, message="the worker's start-up reconcile")
    store = ModelStore(celery_worker.store)
    left = store.repository_dir / trial_name("crashed")
    (left / "1").mkdir(parents=True)
    old = time.time() - 2 * 3600
    os.utime(left, (old, old))
    (tmp_path / "model.onnx").write_bytes(mlp_onnx_bytes())
    cfg = ModelConfig(
        name="running", backend="onnxruntime", max_batch_size=8,
        inputs=[TensorSpec("x", "TYPE_FP32", [4])], outputs=[TensorSpec("y", "TYPE_FP32", [3])],
    )  # fmt: skip
    runtime = get_runtime(timeout=30)
    with trial_model(store, runtime, cfg, [tmp_path / "model.onnx"]) as running:
        report = reconcile()
        assert (store.repository_dir / running).is_dir()
        assert runtime.model_ready(running)
    assert not left.exists()
    assert any(left.name in line for line in report.repairs), report.repairs
    assert not any("_trial-" in line for line in report.warnings), report.warnings

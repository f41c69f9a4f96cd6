"""Ascend targets through the real worker, against the faithful fake ATC (tests/fakes/atc).

Real CANN is not on these machines: these tests prove our side of the process boundary (the
command we build, how we stream and read ATC's output, cancel, "needs CANN"), not ATC itself.
"""

from __future__ import annotations

import pytest

from tests.fakes.cann import make_fake_toolkit
from tests.fixtures.pipeline import create_model, upload, wait_for_job
from tests.fixtures.triton import mlp_onnx_bytes
from tests.fixtures.waiting import wait_until
from webapp.registry.catalogue.models import Version
from webapp.registry.jobs.models import Job

pytestmark = pytest.mark.integration


@pytest.fixture
def worker_env(tmp_path_factory, request) -> dict[str, str]:
    param = getattr(request, "param", {})
    if param == "no-cann":
        return {"ATC_PATH": "", "ASCEND_TOOLKIT_HOME": "", "ASCEND_HOME_PATH": ""}
    return make_fake_toolkit(tmp_path_factory.mktemp("cann")) | param


ACL_OPTIONS = {"soc_version": "Ascend310P3", "dynamic_batch_size": [1, 2, 4]}


def test_an_acl_version_is_built_by_atc_and_the_command_is_recorded(api, celery_worker) -> None:
    create_model(api, "om-model", target="acl")
    response = upload(api, "om-model", mlp_onnx_bytes(16, 10), options=ACL_OPTIONS)
    assert response.status_code == 201, response.content
    job = wait_for_job(response.json()["job"], celery_worker)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert len(job.commands) == 1
    command = job.commands[0]
    assert "--framework=5" in command and "--soc_version=Ascend310P3" in command
    assert "--dynamic_batch_size=1,2,4" in command
    lines = [line.text for line in job.log_lines.all()]
    assert any("ATC run success" in text for text in lines), lines
    version = Version.objects.get(model__name="om-model")
    assert version.artifact_name == "model.om"
    assert 'backend: "acl"' in version.config_pbtxt
    # No pyACL on the worker: the OM was not executed, and the report says so honestly.
    assert version.verification["status"] == "not_run"
    assert not version.publishable
    assert (celery_worker.store / "repository" / "om-model" / "1" / "model.om").is_file()


def test_an_unsupported_operator_fails_with_the_atc_code_explained(api, celery_worker) -> None:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("NotOnAscend", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    payload = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)]
    ).SerializeToString()
    create_model(api, "om-bad", target="acl")
    # Validation would stop an unknown ONNX operator first; ATC's own refusal is what we test.
    response = upload(api, "om-bad", payload, options={"soc_version": "Ascend310P3"})
    job = wait_for_job(response.json()["job"], celery_worker)
    assert job.state == Job.State.FAILED
    assert "NotOnAscend" in job.error or "unknown operator" in job.error.lower()


@pytest.mark.parametrize("worker_env", [{"FAKE_ATC_SLEEP": "3"}], indirect=True)
def test_a_running_atc_is_cancelled_on_request(api, celery_worker) -> None:
    create_model(api, "om-slow", target="acl")
    response = upload(api, "om-slow", mlp_onnx_bytes(), options=ACL_OPTIONS)
    job_id = response.json()["job"]

    def atc_is_running() -> bool:
        job = Job.objects.get(uuid=job_id)
        assert not job.is_finished, job.error
        # The fake ATC prints each of its steps as it starts it.
        return job.step == "compile" and job.log_lines.filter(text__contains="[fake atc]").exists()

    wait_until(atc_is_running, 60, interval=0.1, message="ATC never started compiling")
    assert api("post", f"/api/v1/jobs/{job_id}/cancel").status_code == 200
    job = wait_for_job(job_id, celery_worker, timeout=60)
    assert job.state == Job.State.CANCELLED, (job.state, job.error)
    assert job.version.status == Version.Status.CANCELLED
    assert not (celery_worker.store / "repository" / "om-slow").exists()


@pytest.mark.parametrize("worker_env", ["no-cann"], indirect=True)
def test_without_cann_an_acl_job_fails_fast_saying_how_to_configure_it(api, celery_worker) -> None:
    create_model(api, "om-nocann", target="acl")
    response = upload(api, "om-nocann", mlp_onnx_bytes(), options=ACL_OPTIONS)
    job = wait_for_job(response.json()["job"], celery_worker)
    assert job.state == Job.State.FAILED
    assert job.error_code == "cann_missing"
    assert "ATC_PATH" in job.error and "ASCEND_TOOLKIT_HOME" in job.error

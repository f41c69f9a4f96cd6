"""Finding 7: an OM built with a newer CANN than the serving host runs is refused before serving.

The serving side's CANN comes from the newest host report (webapp/nodes/host_reports.py); the
building side's is recorded on the version by the compile step.
"""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client

from tests.fixtures.users import token_for
from webapp.errors import HubError
from webapp.nodes import host_reports
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Job
from webapp.registry.serving.actions import switch as serving_actions
from webapp.registry.serving.cann_check import cann_skew


@pytest.fixture
def om_model(operator, settings, tmp_path) -> Model:
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    return Model.objects.create(name="om", target="acl", created_by=operator)


def _version(model: Model, built_with: str, number: int = 1) -> Version:
    return Version.objects.create(
        model=model, number=number, status="ready", source_filename="m.onnx",
        source_sha256=f"{number:064d}", source_size=10, verification={"status": "passed"},
        artifact_name="model.om", cann_version=built_with, cann_ops_version=built_with,
    )  # fmt: skip


def _serving_host_runs(version: str | None) -> None:
    cann = {"available": version is not None, "version": version, "reason": ""}
    host_reports.record({"made_at": time.time(), "host": "npu-host", "cann": cann})


def test_an_om_built_with_a_newer_cann_is_refused_with_what_to_do(om_model, operator) -> None:
    _version(om_model, "8.0.0")
    _serving_host_runs("8.0.RC3")
    with pytest.raises(HubError) as info:
        serving_actions.request_switch(model=om_model, number=1, user=operator)
    assert (info.value.code, info.value.status) == ("cann_version_skew", 409)
    assert info.value.message == (
        "Version 1 cannot serve: built with CANN 8.0.0, the serving host runs 8.0.RC3; an OM "
        "must not run on an older CANN: rebuild on a host with CANN <= 8.0.RC3 or upgrade the "
        "serving host (compared with the worker's toolkit: the CANN beside the serving Triton "
        "has not been reported)."
    )


def test_the_cann_beside_the_serving_triton_is_compared_not_the_workers(om_model, operator) -> None:
    """The compose shape (docs/ascend.md#the-serving-side): the worker compiles with the host's
    CANN 8.5.0, the Triton image loads OMs with its own 8.3.RC2. Comparing the host's toolkit
    with itself said "ok"; the OM must not run there."""
    _version(om_model, "8.5.0")
    host_reports.record({
        "made_at": time.time(), "host": "npu-host",
        "cann": {"available": True, "version": "8.5.0", "reason": ""},
        "serving": {"available": True, "cann": {"available": True, "version": "8.3.RC2"}},
    })  # fmt: skip
    with pytest.raises(HubError) as info:
        serving_actions.request_switch(model=om_model, number=1, user=operator)
    assert info.value.code == "cann_version_skew"
    assert "built with CANN 8.5.0, the serving host runs 8.3.RC2" in info.value.message
    assert "worker's toolkit" not in info.value.message


def test_the_api_answers_409_with_the_code(om_model, operator) -> None:
    _version(om_model, "8.5.0")
    _serving_host_runs("8.0.0")
    response = Client().post(
        "/api/v1/models/om/serve", data=json.dumps({"version": 1}),
        content_type="application/json", HTTP_AUTHORIZATION=f"Token {token_for(operator)}",
    )  # fmt: skip
    assert response.status_code == 409
    assert response.json()["code"] == "cann_version_skew"


@pytest.mark.parametrize(("built", "serving"), [("8.0.RC3", "8.0.0"), ("8.0.0", None)])
def test_an_older_build_or_an_unknown_serving_cann_may_serve(
    om_model, operator, built: str, serving: str | None
) -> None:
    _version(om_model, built)
    _serving_host_runs(serving)
    job = serving_actions.request_switch(model=om_model, number=1, user=operator)
    assert job.kind == Job.Kind.SERVE
    skew = cann_skew(Version.objects.get(model=om_model, number=1))
    assert skew is not None and skew.state == ("ok" if serving else "unknown")


def test_a_version_page_shows_the_toolkit_and_warns_when_the_serving_cann_is_unknown(
    om_model, operator, client
) -> None:
    _version(om_model, "8.0.RC3")
    client.force_login(operator)
    page = client.get("/models/om/versions/1/").content.decode()
    assert "8.0.RC3" in page
    assert "Cannot compare CANN versions" in page


def test_not_an_om_is_not_compared(operator, settings, tmp_path) -> None:
    model = Model.objects.create(name="cpu", target="onnxruntime", created_by=operator)
    version = Version.objects.create(
        model=model, number=1, status="ready", source_filename="m.onnx",
        source_sha256="1" * 64, source_size=10, verification={"status": "passed"},
        artifact_name="model.onnx",
    )  # fmt: skip
    _serving_host_runs("6.0.RC1")
    assert cann_skew(version) is None


def test_the_version_page_says_where_the_verification_ran(om_model, operator, client) -> None:
    version = _version(om_model, "8.0.RC3")
    version.verification = {
        "status": "passed", "via": "triton", "trial_model": "_trial-om-0a1b2c3d",
        "worker_reason": "pyACL is not available on this worker", "outputs": [],
    }  # fmt: skip
    version.save()
    client.force_login(operator)
    page = client.get("/models/om/versions/1/").content.decode()
    assert "Verified through Triton (temporary model <code>_trial-om-0a1b2c3d</code>" in page


def test_a_device_id_the_serving_container_does_not_have_is_refused(om_model, operator) -> None:
    """A container numbers its NPUs from 0 (docs/ascend.md#the-serving-side): device 3 typed from
    the host's npu-smi names nothing in a Triton with one NPU mapped."""
    version = _version(om_model, "8.0.0")
    version.options = {"soc_version": "Ascend310P3", "device_id": "3"}
    version.save(update_fields=["options"])
    host_reports.record({
        "made_at": time.time(), "host": "npu-host",
        "cann": {"available": True, "version": "8.0.0", "reason": ""},
        "serving": {"available": True, "cann": {"available": True, "version": "8.0.0"},
                    "pyacl": {"device_count": 1}},
    })  # fmt: skip
    with pytest.raises(HubError) as info:
        serving_actions.request_switch(model=om_model, number=1, user=operator)
    assert (info.value.code, info.value.status) == ("device_out_of_range", 409)
    assert "the Triton that serves on node local has 1 device(s)" in info.value.message
    version.options = {"soc_version": "Ascend310P3", "device_id": "0"}
    version.save(update_fields=["options"])
    assert serving_actions.request_switch(model=om_model, number=1, user=operator)

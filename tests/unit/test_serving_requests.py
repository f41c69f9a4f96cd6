"""Serving requests as the web layer checks them: refusals, the switch lock, deletion, history.

The switch itself (worker + Triton) is tested in tests/integration/test_serving_product.py."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tests.fixtures.users import token_for
from webapp.errors import HubError
from webapp.registry.catalogue.actions import versions as version_actions
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Event, Job
from webapp.registry.serving import lock as serving_lock
from webapp.registry.serving import reconcile
from webapp.registry.serving import switch as serving
from webapp.registry.serving.actions import switch as serving_actions

SIG_V1 = {"inputs": [{"name": "x", "dtype": "TYPE_FP32", "dims": ["batch", 4]}],
          "outputs": [{"name": "y", "dtype": "TYPE_FP32", "dims": ["batch", 3]}]}  # fmt: skip


@pytest.fixture
def model(operator, settings, tmp_path) -> Model:
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    return Model.objects.create(name="mlp", target="onnxruntime", created_by=operator)


def make_version(
    model: Model, number: int, *, status="ready", verification="passed", signature=None
):
    return Version.objects.create(
        model=model, number=number, status=status, source_filename="m.onnx",
        source_sha256=f"{number:064d}", source_size=10, verification={"status": verification},
        signature=signature or SIG_V1,
    )  # fmt: skip


def test_a_version_that_failed_verification_cannot_serve(model, operator) -> None:
    make_version(model, 1, verification="failed")
    with pytest.raises(HubError, match="verification failed") as info:
        serving_actions.request_switch(model=model, number=1, user=operator)
    assert info.value.code == "not_publishable"


def test_an_unpackaged_version_cannot_serve(model, operator) -> None:
    make_version(model, 1, status="compiling")
    with pytest.raises(HubError, match="status is compiling"):
        serving_actions.request_switch(model=model, number=1, user=operator)


def test_a_second_switch_is_refused_while_the_first_holds_the_lock(model, operator) -> None:
    make_version(model, 1)
    make_version(model, 2)
    first = serving_actions.request_switch(model=model, number=1, user=operator)
    assert first.kind == Job.Kind.SERVE
    with pytest.raises(HubError, match="in progress") as info:
        serving_actions.request_switch(model=model, number=2, user=operator)
    assert info.value.status == 409 and info.value.code == "switch_in_progress"
    assert Job.objects.count() == 1


def test_an_expired_lock_can_be_taken_over(model, operator) -> None:
    make_version(model, 1)
    Model.objects.filter(pk=model.pk).update(
        lock_holder="dead-worker", lock_expires=timezone.now() - timedelta(seconds=1)
    )
    job = serving_actions.request_switch(model=model, number=1, user=operator)
    model.refresh_from_db()
    assert model.lock_holder == job.uuid.hex


def test_a_switch_waits_for_reconcile_to_finish_with_the_model(model, operator) -> None:
    # Reconcile is housekeeping: a click that meets it waits (here until its lock lapses)
    # rather than being refused.
    make_version(model, 1)
    Model.objects.filter(pk=model.pk).update(
        lock_holder="reconcile-0a1b2c3d", lock_expires=timezone.now() + timedelta(seconds=0.3)
    )
    job = serving_actions.request_switch(model=model, number=1, user=operator)
    model.refresh_from_db()
    assert model.lock_holder == job.uuid.hex


def test_a_reconcile_that_outlasts_the_wait_is_named_as_such(model, operator, monkeypatch) -> None:
    make_version(model, 1)
    monkeypatch.setattr(serving_lock, "RECONCILE_WAIT_S", 0.2)
    Model.objects.filter(pk=model.pk).update(
        lock_holder="reconcile-0a1b2c3d", lock_expires=timezone.now() + timedelta(minutes=5)
    )
    with pytest.raises(HubError) as refused:
        serving_actions.request_switch(model=model, number=1, user=operator)
    assert refused.value.code == "switch_in_progress"
    assert "periodic check is repairing mlp" in refused.value.message


def test_a_switch_held_by_a_job_is_refused_without_waiting(model, operator) -> None:
    make_version(model, 1)
    Model.objects.filter(pk=model.pk).update(
        lock_holder=uuid.uuid4().hex, lock_expires=timezone.now() + timedelta(minutes=5)
    )
    with pytest.raises(HubError) as refused:
        serving_actions.request_switch(model=model, number=1, user=operator)
    assert refused.value.code == "switch_in_progress"
    assert "Another switch of mlp is in progress" in refused.value.message


def test_release_only_frees_the_holders_own_lock(model) -> None:
    assert serving.acquire_lock(model, "a")
    assert not serving.acquire_lock(model, "b")
    serving.release_lock(model, "b")
    assert not serving.acquire_lock(model, "b")
    serving.release_lock(model, "a")
    assert serving.acquire_lock(model, "b")


def test_a_breaking_interface_change_needs_confirmation(model, operator) -> None:
    make_version(model, 1)
    renamed = {"inputs": [{"name": "image", "dtype": "TYPE_FP32", "dims": ["batch", 4]}],
               "outputs": SIG_V1["outputs"]}  # fmt: skip
    make_version(model, 2, signature=renamed)
    Model.objects.filter(pk=model.pk).update(serving_version=1)
    model.refresh_from_db()
    with pytest.raises(HubError) as info:
        serving_actions.request_switch(model=model, number=2, user=operator)
    assert info.value.code == "breaking_change" and "x" in info.value.message
    job = serving_actions.request_switch(
        model=model, number=2, user=operator, confirm_breaking=True
    )
    assert any(c["kind"] == "breaking" for c in job.params["changes"])


def test_rollback_needs_an_earlier_version(model, operator) -> None:
    with pytest.raises(HubError, match="no earlier serving version"):
        serving_actions.request_rollback(model=model, user=operator)


def test_the_serving_version_cannot_be_deleted_but_others_can(model, operator, tmp_path) -> None:
    make_version(model, 1)
    v2 = make_version(model, 2)
    Model.objects.filter(pk=model.pk).update(serving_version=1)
    with pytest.raises(HubError, match="is serving"):
        version_actions.delete_version(version=Version.objects.get(number=1), user=operator)
    source = tmp_path / "store" / "sources" / "mlp" / "2"
    source.mkdir(parents=True)
    (source / "model.onnx").write_bytes(b"x")
    version_actions.delete_version(version=v2, user=operator)
    assert not Version.objects.filter(number=2).exists()
    assert not source.exists()
    assert Event.objects.filter(kind="version.deleted", data__version=2).exists()


def test_serve_through_the_api_checks_role_and_input(model, operator, viewer) -> None:
    make_version(model, 1, verification="failed")
    client = Client()
    viewer_key, operator_key = token_for(viewer), token_for(operator)
    body = json.dumps({"version": 1})
    denied = client.post("/api/v1/models/mlp/serve", data=body, content_type="application/json",
                         HTTP_AUTHORIZATION=f"Token {viewer_key}")  # fmt: skip
    assert denied.status_code == 403
    refused = client.post("/api/v1/models/mlp/serve", data=body, content_type="application/json",
                          HTTP_AUTHORIZATION=f"Token {operator_key}")  # fmt: skip
    assert refused.status_code == 409 and refused.json()["code"] == "not_publishable"
    auth = {"HTTP_AUTHORIZATION": f"Token {operator_key}", "content_type": "application/json"}
    bad = client.post("/api/v1/models/mlp/serve", data=json.dumps({"version": "one"}), **auth)
    assert bad.status_code == 400
    missing = client.post("/api/v1/models/mlp/serve", data=json.dumps({"version": 9}), **auth)
    assert missing.status_code == 404


def test_history_and_audit_list_events(model, operator) -> None:
    Event.objects.create(
        model=model, kind="serve", actor=operator, message="otto switched mlp to v1"
    )
    client = Client()
    key = token_for(operator)
    history = client.get("/api/v1/models/mlp/history", HTTP_AUTHORIZATION=f"Token {key}").json()
    assert history["events"][0]["message"] == "otto switched mlp to v1"
    assert client.get("/api/v1/audit", HTTP_AUTHORIZATION=f"Token {key}").json()["events"]
    client.force_login(operator)
    assert "otto switched mlp to v1" in client.get("/audit/").content.decode()
    assert "otto switched mlp to v1" in client.get("/models/mlp/").content.decode()


# --------------------------------------------------------------------------- one publish gate


@pytest.mark.parametrize("verification", ["failed", "not_run"])
def test_compare_obeys_the_publish_gate(model, operator, verification) -> None:
    make_version(model, 1)
    make_version(model, 2, verification=verification)
    Model.objects.filter(pk=model.pk).update(serving_version=1)
    model.refresh_from_db()
    said = {"failed": "failed", "not_run": "did not run"}[verification]
    with pytest.raises(HubError, match=f"verification {said} and no admin") as info:
        serving_actions.request_compare(model=model, number=2, user=operator)
    assert info.value.code == "not_publishable"
    assert not Job.objects.exists()


def test_compare_through_the_api_is_refused_for_an_unverified_version(model, operator) -> None:
    make_version(model, 1)
    make_version(model, 2, verification="failed")
    Model.objects.filter(pk=model.pk).update(serving_version=1)
    client = Client()
    response = client.post(
        "/api/v1/models/mlp/compare", data=json.dumps({"version": 2}),
        content_type="application/json", HTTP_AUTHORIZATION=f"Token {token_for(operator)}",
    )  # fmt: skip
    assert response.status_code == 409
    assert response.json()["code"] == "not_publishable"


def test_a_reload_of_a_serving_version_whose_override_was_withdrawn_is_refused(
    model, operator
) -> None:
    make_version(model, 1, verification="not_run")  # served under an override, since withdrawn
    Model.objects.filter(pk=model.pk).update(serving_version=1)
    model.refresh_from_db()
    with pytest.raises(HubError) as info:
        serving_actions.request_load(model=model, user=operator)
    assert info.value.code == "not_publishable"


def test_the_worker_checks_the_gate_again_when_the_job_runs(model, operator) -> None:
    version = make_version(model, 2, verification="not_run")
    Version.objects.filter(pk=version.pk).update(
        verification_override={"by": "ada", "reason": "checked by hand"}
    )
    version.refresh_from_db()
    job = serving_actions.request_switch(model=model, number=2, user=operator)
    Version.objects.filter(pk=version.pk).update(verification_override=None)  # withdrawn
    serving.run_job(job.pk)
    job.refresh_from_db()
    assert job.state == Job.State.FAILED and job.error_code == "not_publishable"
    model.refresh_from_db()
    assert model.serving_version is None


def test_reconcile_never_brings_back_a_compared_version_the_gate_refuses(
    model, monkeypatch
) -> None:
    make_version(model, 1)
    make_version(model, 2, verification="failed")
    Model.objects.filter(pk=model.pk).update(serving_version=1, compare_version=2)
    model.refresh_from_db()
    # Triton's side as reconcile reads it: both versions in the policy and ready.
    state = {"policy_versions": [1, 2], "ready_versions": [1, 2], "stale_staging": []}
    monkeypatch.setattr(reconcile, "repository_state", lambda store, runtime, name: state)
    switches: list[int] = []

    def switch(store, runtime, *, to_version, **kwargs):  # type: ignore[no-untyped-def]
        switches.append(to_version)
        return type("Result", (), {"ok": True, "reason": ""})()

    monkeypatch.setattr(reconcile, "switch_version", switch)
    repairs: list[str] = []
    warnings: list[str] = []
    reconcile._reconcile_model(None, None, model, repairs, warnings)
    assert switches == [1]  # the serving version alone
    assert any("v2 may not answer" in w for w in warnings)
    model.refresh_from_db()
    assert model.compare_version is None


# --------------------------------------------------------------------------- 202 and ?wait=true


def test_a_switch_answers_202_with_its_job_at_once(model, operator) -> None:
    make_version(model, 1)
    client = Client()
    response = client.post(
        "/api/v1/models/mlp/serve", data=json.dumps({"version": 1}),
        content_type="application/json", HTTP_AUTHORIZATION=f"Token {token_for(operator)}",
    )  # fmt: skip
    assert response.status_code == 202
    body = response.json()
    job = Job.objects.get()
    assert body["job"] == str(job.uuid) and body["state"] == "queued"
    assert body["url"] == f"/api/v1/jobs/{job.uuid}" == response["Location"]
    assert (
        client.get(body["url"], HTTP_AUTHORIZATION=f"Token {token_for(operator)}").status_code
        == 200
    )


def test_wait_true_keeps_the_blocking_answer_and_is_bounded(model, operator, settings) -> None:
    make_version(model, 1)
    settings.SERVE_WAIT_SECONDS = 1  # no worker runs the job here: the wait runs out
    response = Client().post(
        "/api/v1/models/mlp/serve?wait=true", data=json.dumps({"version": 1}),
        content_type="application/json", HTTP_AUTHORIZATION=f"Token {token_for(operator)}",
    )  # fmt: skip
    assert response.status_code == 202
    assert response.json()["code"] == "pending" and response.json()["state"] == "queued"


# --------------------------------------------------------------------------- lost messages


def test_a_job_delivered_twice_runs_once(model, operator, monkeypatch) -> None:
    make_version(model, 1)
    job = serving_actions.request_switch(model=model, number=1, user=operator)
    runs: list[int] = []
    monkeypatch.setattr(serving, "_run_switch", lambda j: runs.append(j.pk) or jobs_succeed(j))
    serving.run_job(job.pk)
    serving.run_job(job.pk)  # the same message again (a redelivery)
    assert runs == [job.pk]


def jobs_succeed(job) -> None:  # type: ignore[no-untyped-def]
    from webapp.registry.jobs import record as jobs

    jobs.succeed(job)


def test_queued_jobs_whose_message_may_be_lost_are_sent_again(model, operator, monkeypatch) -> None:
    from datetime import timedelta

    from django.utils import timezone

    make_version(model, 1)
    job = serving_actions.request_switch(model=model, number=1, user=operator)
    sent: list[int] = []
    monkeypatch.setattr(serving_actions, "enqueue_serving_job", lambda j: sent.append(j.pk))
    assert reconcile.requeue_stalled_jobs() == []  # too fresh: its message is still on its way
    later = timezone.now() + timedelta(seconds=10)
    assert reconcile.requeue_stalled_jobs(now=later) == [str(job.uuid)]
    assert sent == [job.pk]


@pytest.mark.parametrize("end", ["succeed", "fail"])
def test_a_job_is_never_seen_finished_while_it_holds_the_lock(
    model, operator, end, monkeypatch
) -> None:
    """Whoever sees a switch job finished may switch again at once: the lock is freed before
    the job's row says it finished, not after (a client that polled in between was refused)."""
    from webapp.registry.jobs import record

    make_version(model, 1)
    make_version(model, 2)
    job = serving_actions.request_switch(model=model, number=1, user=operator)
    assert Model.objects.get(pk=model.pk).lock_holder == job.uuid.hex
    holders_when_finished: list[str] = []
    write = record._save

    def watched_write(saved: Job, *fields: str) -> None:
        write(saved, *fields)  # every write of the job's row, then what a poller would see
        if Job.objects.get(pk=saved.pk).is_finished:
            holders_when_finished.append(Model.objects.get(pk=model.pk).lock_holder)

    monkeypatch.setattr(record, "_save", watched_write)
    if end == "succeed":
        record.succeed(job)
    else:
        record.fail(job, "Triton did not answer.", "triton_unavailable")
    assert holders_when_finished and set(holders_when_finished) == {""}
    again = serving_actions.request_switch(model=model, number=2, user=operator)
    assert again.kind == Job.Kind.SERVE

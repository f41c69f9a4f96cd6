"""The product's answers to the faults of tests/faults/, each pinned without real services.

The fault suite (heavy, run once in CI) shows them end to end; these run in every database run:
a lost database connection is waited out, the API says 503 while the database is away, a failed
switch leaves its version servable, a job whose worker is gone is failed and cleaned up, and a
job that could not be sent (Redis down) is sent again. docs/faults.md has the results.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import OperationalError
from django.test import Client, RequestFactory

from tests.fixtures.users import token_for
from webapp.registry.build import pipeline
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs import db_outage
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job
from webapp.registry.jobs.steps import COMPILE_STEPS, TUNE_STEPS, initial_steps
from webapp.registry.serving import reconcile


@pytest.fixture
def model(operator, settings, tmp_path) -> Model:
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    return Model.objects.create(name="mlp", target="onnxruntime", created_by=operator)


def _version(model: Model, number: int = 1, status: str = "ready") -> Version:
    return Version.objects.create(
        model=model, number=number, status=status, source_filename="m.onnx",
        source_sha256=f"{number:064d}", source_size=10, verification={"status": "passed"},
    )  # fmt: skip


def test_a_lost_connection_is_waited_out_and_the_write_runs_again(db, monkeypatch) -> None:
    calls: list[int] = []
    waited: list[float] = []
    monkeypatch.setattr(db_outage, "wait_for_database", lambda timeout_s: waited.append(1) or True)

    def write() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("terminating connection due to administrator command")
        return "written"

    assert db_outage.retrying(write) == "written"
    assert len(calls) == 2 and waited == [1]


def test_a_database_that_stays_away_raises(db, monkeypatch) -> None:
    monkeypatch.setattr(db_outage, "wait_for_database", lambda timeout_s: False)

    def write() -> None:
        raise OperationalError("connection refused")

    with pytest.raises(OperationalError):
        db_outage.retrying(write)


@pytest.mark.parametrize("lost_at", ["reading the job", "taking the lock"])
def test_a_switch_that_loses_the_database_just_after_its_claim_still_ends(
    model, operator, monkeypatch, lost_at: str
) -> None:
    """The claim marks the job running; a restart right after it (before the job's own error
    handling starts) is waited out, so the job ends instead of staying running."""
    from webapp.registry.serving import switch as serving
    from webapp.registry.serving.actions import switch as serving_actions

    version = _version(model)
    job = serving_actions.request_switch(model=model, number=1, user=operator)
    Version.objects.filter(pk=version.pk).update(verification={"status": "failed"})
    monkeypatch.setattr(db_outage, "wait_for_database", lambda timeout_s=0: True)
    lost: list[str] = []

    def once(real: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if not lost:
                lost.append(lost_at)
                raise OperationalError("terminating connection due to administrator command")
            return real(*args, **kwargs)

        return wrapped

    if lost_at == "taking the lock":
        monkeypatch.setattr(serving, "acquire_lock", once(serving.acquire_lock))
    else:
        manager = type(Job.objects.select_related())
        monkeypatch.setattr(manager, "get", once(manager.get))
    serving.run_job(job.pk)
    job.refresh_from_db()
    assert lost == [lost_at]
    assert job.state == Job.State.FAILED and job.error_code == "not_publishable", job.error
    model.refresh_from_db()
    assert model.lock_holder in ("", None)


def test_the_api_says_503_with_retry_after_while_the_database_is_away(db) -> None:
    from webapp.api.views import server_error

    request = RequestFactory().get("/api/v1/models")
    try:
        raise OperationalError("connection refused")
    except OperationalError:
        response = server_error(request)
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert b"database_unavailable" in response.content
    try:
        raise ValueError("a bug")
    except ValueError:
        assert server_error(request).status_code == 500


def test_a_failed_switch_leaves_its_version_servable(model, operator) -> None:
    version = _version(model)
    job = Job.objects.create(kind=Job.Kind.SERVE, model=model, version=version,
                             steps=initial_steps(("serve",)), created_by=operator)  # fmt: skip
    jobs.fail(job, "v1 did not become ready: Triton stopped", "switch_failed")
    version.refresh_from_db()
    assert version.status == Version.Status.READY
    build = Job.objects.create(kind=Job.Kind.COMPILE, model=model, version=version,
                               steps=initial_steps(COMPILE_STEPS))  # fmt: skip
    jobs.fail(build, "bad model", "invalid_model")
    version.refresh_from_db()
    assert version.status == Version.Status.FAILED


def _compile_job(model: Model, version: Version, runner: dict[str, Any]) -> Job:
    job = Job.objects.create(kind=Job.Kind.COMPILE, model=model, version=version,
                             steps=initial_steps(COMPILE_STEPS))  # fmt: skip
    jobs.start_step(job, "compile", Version.Status.COMPILING)
    job.params = {**job.params, "runner": runner}
    Job.objects.filter(pk=job.pk).update(params=job.params)
    return job


def test_a_compile_whose_worker_is_gone_is_failed_and_cleaned_up(model, settings) -> None:
    from webapp.registry.catalogue.storage import get_store

    store = get_store()
    version = _version(model, status="compiling")
    alive = _compile_job(model, version, jobs.runner())  # this very process: alive
    gone = _compile_job(model, _version(model, 2, status="compiling"),
                        {**jobs.runner(), "since": time.time() - 3600})  # a reused pid  # fmt: skip
    scratch = store.work_dir(gone.uuid.hex)
    scratch.mkdir(parents=True)
    (scratch / "half.om").write_bytes(b"half")
    package = store.package_dir("mlp", 2)
    package.mkdir(parents=True)

    repairs = pipeline.fail_interrupted_compiles()

    assert len(repairs) == 1
    gone.refresh_from_db()
    alive.refresh_from_db()
    assert (gone.state, gone.error_code) == (Job.State.FAILED, "interrupted")
    assert "worker stopped in the middle of the compile step" in gone.error
    assert alive.state == Job.State.RUNNING
    assert not scratch.exists() and not package.exists()
    assert Version.objects.get(model=model, number=2).status == Version.Status.FAILED


def test_an_adopt_whose_worker_is_gone_is_failed_so_the_next_adopt_retries(model) -> None:
    from webapp.registry.catalogue.adopt import ADOPT_STEPS

    version = _version(model, status="validating")
    job = Job.objects.create(
        kind=Job.Kind.ADOPT, model=model, version=version,
        steps=[{"name": n, "label": n, "state": "pending", "message": ""} for n in ADOPT_STEPS],
    )  # fmt: skip
    jobs.start_step(job, "copy", Version.Status.VALIDATING)
    gone = {**jobs.runner(), "since": time.time() - 3600}  # a reused pid: not our process
    Job.objects.filter(pk=job.pk).update(params={**job.params, "runner": gone})

    repairs = pipeline.fail_interrupted_compiles()

    job.refresh_from_db()
    version.refresh_from_db()
    assert repairs == [f"mlp: marked the interrupted adopt job {job.uuid} failed."]
    assert (job.state, job.error_code) == (Job.State.FAILED, "interrupted")
    assert "Adopt again to retry" in job.error
    assert version.status == Version.Status.FAILED


def test_a_job_that_could_not_be_sent_is_sent_again(model, operator, monkeypatch) -> None:
    from webapp import dispatch

    sent: list[tuple[int, tuple[str, ...]]] = []

    def broker_down(job_id: int, steps: tuple[str, ...]) -> None:
        raise ConnectionRefusedError("Redis does not answer")

    monkeypatch.setattr(dispatch, "compile_job", broker_down)
    version = _version(model, status="queued")
    job = Job.objects.create(kind=Job.Kind.COMPILE, model=model, version=version,
                             steps=initial_steps(COMPILE_STEPS))  # fmt: skip
    from webapp.registry.catalogue.actions.versions import enqueue_compile

    enqueue_compile(job)  # no exception: the request that created the job still answers
    assert Job.objects.get(pk=job.pk).params.get("unsent") is True

    monkeypatch.setattr(dispatch, "compile_job", lambda *args: sent.append(args))
    assert str(job.uuid) in reconcile.requeue_stalled_jobs()
    assert sent == [(job.pk, COMPILE_STEPS)]
    assert "unsent" not in Job.objects.get(pk=job.pk).params
    assert reconcile.requeue_stalled_jobs() == []  # sent once, not at every reconcile


def test_pages_say_when_an_external_redis_does_not_answer(operator, settings) -> None:
    from webapp.ops import health

    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens on the discard port
    health.forget_cached()
    client = Client()
    response = client.get("/models/", HTTP_AUTHORIZATION=f"Token {token_for(operator)}")
    assert response.status_code == 200
    assert b"does not answer" in response.content


def test_a_tuning_run_whose_worker_is_gone_is_failed_and_its_trial_removed(model) -> None:
    from webapp.registry.catalogue.storage import get_store
    from webapp.registry.performance.models import TuningRun
    from webapp.registry.performance.tuning import remove_abandoned_trials

    version = _version(model)  # the serving version: a dead search must leave it READY
    job = Job.objects.create(kind=Job.Kind.TUNE, model=model, version=version,
                             steps=initial_steps(TUNE_STEPS))  # fmt: skip
    jobs.start_step(job, "search")
    gone = {**jobs.runner(), "since": time.time() - 3600}  # a reused pid: not our process
    Job.objects.filter(pk=job.pk).update(params={**job.params, "runner": gone})
    trial = get_store().repository_dir / "_trial-mlp-0a1b2c3d"
    (trial / "1").mkdir(parents=True)
    run = TuningRun.objects.create(model=model, version=version, job=job, budget_s=60,
                                   objective={"kind": "throughput", "p99_ms": 50},
                                   trials=[{"index": 0}], active_trial=trial.name)  # fmt: skip

    failed = pipeline.fail_interrupted_compiles()
    removed = remove_abandoned_trials()  # Triton is not running here: the unload is only logged

    job.refresh_from_db()
    assert failed == [f"mlp: marked the interrupted tune job {job.uuid} failed."]
    assert (job.state, job.error_code) == (Job.State.FAILED, "interrupted")
    assert "the trials measured so far are kept" in job.error
    assert Version.objects.get(pk=version.pk).status == Version.Status.READY
    assert removed == [f"mlp: removed the trial model {trial.name} a stopped tuning run left "
                       "loaded."]  # fmt: skip
    assert not trial.exists()
    run.refresh_from_db()
    assert run.active_trial == "" and run.trials == [{"index": 0}]

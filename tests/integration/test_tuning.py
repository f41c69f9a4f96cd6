"""Finding the best config with a real worker and a real Triton, beside real client traffic.

Trials are temporary models next to the serving one: clients of the serving model must see no
failure, every trial is recorded, nothing is left loaded or on disk afterwards, and the winner
does at least as well as the serving config, measured in the same run."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fixtures.pipeline import wait_for_job
from tests.fixtures.traffic import Traffic
from tests.fixtures.waiting import wait_until
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Job
from webapp.registry.performance.models import TuningRun

pytestmark = pytest.mark.integration

DEMO = "efficientnet-lite0"


@pytest.fixture
def worker_env(triton_env: dict[str, str]) -> dict[str, str]:
    """Each load level is measured for 1 s instead of 2 (``TUNE_STEP_SECONDS``): what is under
    test is the search and what it leaves behind, not the figures; a short budget then still
    holds several trials."""
    return triton_env | {"TUNE_STEP_SECONDS": "1"}


def _trials_left(store, triton) -> list[str]:  # type: ignore[no-untyped-def]
    on_disk = [p.name for p in (store / "repository").iterdir() if p.name.startswith("_trial")]
    index = triton.runtime().repository_index()
    loaded = [r["name"] for r in index if r["name"].startswith("_trial")]
    return on_disk + [f"{n} (in Triton's index)" for n in loaded]


def _serve_demo(api, celery_worker) -> Version:  # type: ignore[no-untyped-def]
    added = api("post", "/api/v1/demo", {})
    assert added.status_code == 201, added.json()
    job = wait_for_job(added.json()["job"], celery_worker, timeout=240)
    assert job.state == Job.State.SUCCEEDED, job.error
    wait_until(
        lambda: Model.objects.get(name=DEMO).serving_version is not None, 120, interval=0.3,
        message=lambda: f"not served:\n{celery_worker.log_text()[-3000:]}",
    )  # fmt: skip
    return Version.objects.get(model__name=DEMO, number=1)


@pytest.mark.load  # drives a model for tens of seconds: run once in CI, not per database
def test_the_demo_model_is_tuned_beside_its_clients_and_the_winner_becomes_a_revision(
    api, celery_worker, triton
) -> None:
    version = _serve_demo(api, celery_worker)
    output = version.signature["outputs"][0]["name"]
    image = np.random.default_rng(3).standard_normal((1, 3, 224, 224)).astype(np.float32)
    with Traffic(
        triton.urls["http"], DEMO, {"input": image}, output=output, threads=1, pause_s=0.05
    ) as traffic:
        started = api(
            "post",
            f"/api/v1/models/{DEMO}/tune",
            {"objective": "throughput", "p99_ms": 2000, "budget_s": 30, "max_concurrency": 2},
        )
        assert started.status_code == 202, started.json()
        job = wait_for_job(started.json()["job"], celery_worker, timeout=180)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert traffic.failures() == [] and len(traffic.outcomes) > 10

    run = TuningRun.objects.get(pk=started.json()["id"])
    detail = api("get", f"/api/v1/models/{DEMO}/tune/{run.pk}").json()
    trials = detail["trials"]
    assert trials[0]["label"] == "serving config" and trials[0]["state"] == "measured"
    assert [t["index"] for t in trials] == list(range(len(trials)))
    assert len(trials) >= 2 and detail["grid_size"] >= 2
    measured = [t for t in trials if t["state"] == "measured"]
    assert all(t["throughput_rps"] > 0 and t["p99_ms"] > 0 for t in measured)
    best = detail["best"]
    assert best is not None
    assert best["throughput_rps"] >= trials[0]["throughput_rps"]
    print(
        f"tuning the demo: serving config {trials[0]['throughput_rps']:.1f} req/s, "
        f"winner {best['label']} {best['throughput_rps']:.1f} req/s; {len(trials)} trials "
        f"of a grid of {detail['grid_size']}"
    )
    assert _trials_left(celery_worker.store, triton) == []
    assert TuningRun.objects.get(pk=run.pk).active_trial == ""

    made = api("post", f"/api/v1/models/{DEMO}/tune/{run.pk}/revise", {})
    if best["index"] == 0:
        assert made.status_code == 409 and made.json()["code"] == "serving_config_won"
        return
    assert made.status_code == 201, made.json()
    assert made.json()["reuses_artifact"] is True
    revised = wait_for_job(made.json()["job"], celery_worker)
    assert revised.state == Job.State.SUCCEEDED, revised.error
    again = api("post", f"/api/v1/models/{DEMO}/tune/{run.pk}/revise", {})
    assert again.status_code == 409 and again.json()["code"] == "already_revised"


@pytest.mark.load  # drives a model for tens of seconds: run once in CI, not per database
def test_a_cancelled_search_leaves_nothing_behind(api, celery_worker, triton) -> None:
    from tests.fixtures.pipeline import add_version, create_model

    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1}).status_code == 200
    started = api(
        "post", "/api/v1/models/mlp/tune", {"objective": "throughput", "p99_ms": 500,
                                            "budget_s": 120}
    )  # fmt: skip
    assert started.status_code == 202, started.json()
    busy = api("post", "/api/v1/models/mlp/tune", {"objective": "throughput", "p99_ms": 5})
    assert busy.status_code == 409 and busy.json()["code"] == "tune_running"
    run_id = started.json()["id"]
    wait_until(
        lambda: len(TuningRun.objects.get(pk=run_id).trials) >= 1, 60, interval=0.2,
        message=lambda: f"no trial recorded:\n{celery_worker.log_text()[-3000:]}",
    )  # fmt: skip
    assert api("post", f"/api/v1/jobs/{started.json()['job']}/cancel", {}).status_code == 200
    job = wait_for_job(started.json()["job"], celery_worker, timeout=60)
    assert job.state == Job.State.CANCELLED
    assert _trials_left(celery_worker.store, triton) == []
    assert TuningRun.objects.get(pk=run_id).trials  # what was measured is kept


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"objective": "throughput"}, 400, "invalid_objective"),
        ({"objective": "latency", "rate": 0}, 400, "invalid_objective"),
        ({"objective": "throughput", "p99_ms": 20, "budget_s": 5}, 400, "invalid_field"),
        ({"objective": "throughput", "p99_ms": 20, "max_concurrency": 999}, 400, "invalid_field"),
        ({"objective": "throughput", "p99_ms": 20}, 409, "not_served"),
    ],
)
def test_bad_tuning_requests_are_refused(api, body, status, code) -> None:  # type: ignore[no-untyped-def]
    from tests.fixtures.pipeline import create_model

    create_model(api, "mlp")
    Model.objects.filter(name="mlp").update(serving_version=None)
    refused = api("post", "/api/v1/models/mlp/tune", body)
    assert (refused.status_code, refused.json()["code"]) == (status, code), refused.json()
    assert not TuningRun.objects.exists()


@pytest.mark.load  # drives a model for tens of seconds: run once in CI, not per database
def test_the_latency_objective_measures_each_trial_at_the_rate_asked(
    api, celery_worker, triton
) -> None:
    from tests.fixtures.pipeline import add_version, create_model

    create_model(api, "mlp")
    add_version(api, celery_worker, 1)
    assert api("post", "/api/v1/models/mlp/serve?wait=true", {"version": 1}).status_code == 200
    started = api(
        "post", "/api/v1/models/mlp/tune", {"objective": "latency", "rate": 40, "budget_s": 30}
    )
    assert started.status_code == 202, started.json()
    job = wait_for_job(started.json()["job"], celery_worker, timeout=120)
    assert job.state == Job.State.SUCCEEDED, job.error
    trials = api("get", f"/api/v1/models/mlp/tune/{started.json()['id']}").json()["trials"]
    measured = [t for t in trials if t["state"] == "measured"]
    assert measured and all(t["load"] == 40 for t in measured), trials
    # Offered 40 requests/s, each trial completed about that (or it says it did not).
    for trial in measured:
        assert trial["throughput_rps"] >= 0.95 * 40 or "of the 40 requests/s" in trial["reason"]
    assert _trials_left(celery_worker.store, triton) == []

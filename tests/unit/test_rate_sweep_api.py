"""Fixed-rate (open-loop) sweeps asked for through the API and the Performance tab, without
Triton: what is accepted, what is refused and why, what the worker will run, how the runs read.
(The measurement itself: tests/unit/test_perf_open_loop.py and the integration tests.)"""

from __future__ import annotations

import pytest

from model_store.perf import SweepPlan
from tests.unit.test_try_it_api import client_for, post, served  # noqa: F401 (a fixture)
from webapp.registry.jobs.models import Event, Job
from webapp.registry.performance.models import PerfRun
from webapp.registry.performance.sweeps import _plan_kwargs

pytestmark = pytest.mark.django_db


def test_a_rate_sweep_is_queued_with_its_plan(operator, served, settings) -> None:  # noqa: F811
    settings.SWEEP_MAX_CONCURRENCY = 4
    response = post(
        client_for(operator),
        "/api/v1/models/mlp/sweeps",
        {"mode": "rate", "rates": [50, 10, 10.5, 10], "step_seconds": 2},
    )
    assert response.status_code == 202, response.json()
    body = response.json()
    # Sorted, duplicates dropped; the load bound of the closed loop bounds what is in flight.
    assert body["plan"]["mode"] == "rate" and body["plan"]["rates"] == [10.0, 10.5, 50.0]
    assert body["plan"]["max_in_flight"] == 4 and body["plan"]["levels"] == []
    run = PerfRun.objects.get(pk=body["id"])
    assert run.job.kind == Job.Kind.SWEEP
    # What the worker rebuilds is the plan asked for.
    plan = SweepPlan(**_plan_kwargs(run.plan))
    assert plan.rates == (10.0, 10.5, 50.0) and plan.step_seconds == 2 and plan.max_in_flight == 4
    event = Event.objects.get(kind="perf.sweep_requested")
    assert "10, 10.5, 50 req/s" in event.message


def test_the_default_is_still_the_closed_loop(operator, served) -> None:  # noqa: F811
    response = post(client_for(operator), "/api/v1/models/mlp/sweeps", {"max_concurrency": 2})
    assert response.status_code == 202, response.json()
    plan = response.json()["plan"]
    assert plan["mode"] == "concurrency" and plan["levels"] == [1, 2] and "rates" not in plan
    assert SweepPlan(**_plan_kwargs(plan)).levels == (1, 2)
    # A run stored before the open loop existed (no "mode", no "rates") still runs.
    old = {"levels": [1, 2], "step_seconds": 3, "warmup_seconds": 0.5, "max_total_seconds": 120}
    assert SweepPlan(**_plan_kwargs(old)).mode == "concurrency"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"mode": "rate"}, "1 to 8"),
        ({"mode": "rate", "rates": []}, "1 to 8"),
        ({"mode": "rate", "rates": [1, 2, 3, 4, 5, 6, 7, 8, 9]}, "1 to 8"),
        ({"mode": "rate", "rates": [0]}, "above 0"),
        ({"mode": "rate", "rates": [20_000]}, "at most 10000"),
        ({"mode": "rate", "rates": [10], "step_seconds": 99}, "between 1 and 30"),
        ({"mode": "rate", "rates": [1, 2, 3, 4, 5, 6], "step_seconds": 30}, "levels x"),
    ],
)
def test_rate_sweeps_are_bounded(operator, served, body, words) -> None:  # noqa: F811
    response = post(client_for(operator), "/api/v1/models/mlp/sweeps", body)
    assert response.status_code == 400 and words in response.json()["error"], response.json()
    assert not PerfRun.objects.exists()


def test_an_unknown_mode_is_refused(operator, served) -> None:  # noqa: F811
    response = post(client_for(operator), "/api/v1/models/mlp/sweeps", {"mode": "poisson"})
    assert response.status_code in (400, 422) and "mode" in response.content.decode()
    assert not PerfRun.objects.exists()


def test_the_performance_tab_offers_both_modes_and_reads_rate_runs(
    operator_client,
    served,  # noqa: F811
) -> None:
    html = operator_client.get("/models/mlp/perf/").content.decode()
    assert "Fixed concurrency" in html and "Fixed request rate" in html
    assert 'name="rates"' in html and "scheduled time" in html

    refused = operator_client.post("/models/mlp/sweep/", {"mode": "rate", "rates": "ten"})
    assert refused.status_code == 302 and not PerfRun.objects.exists()
    sent = operator_client.post(
        "/models/mlp/sweep/", {"mode": "rate", "rates": "20, 5", "step_seconds": "1"}
    )
    assert sent.status_code == 302
    run = PerfRun.objects.get()
    assert run.plan["rates"] == [5.0, 20.0]

    run.levels = [
        {"concurrency": 2, "offered_rps": 5.0, "duration_s": 1.0, "completed": 5, "failed": 0,
         "late": 0, "unsent": 0, "throughput_rps": 5.0, "latency": None, "server": None},
        {"concurrency": 3, "offered_rps": 20.0, "duration_s": 1.4, "completed": 18, "failed": 0,
         "late": 7, "unsent": 2, "throughput_rps": 12.9, "latency": None, "server": None},
    ]  # fmt: skip
    run.save()
    page = operator_client.get("/models/mlp/perf/", HTTP_HX_REQUEST="true", data={"part": "runs"})
    runs = page.content.decode()
    assert "Offered req/s" in runs and "achieved req/s" in runs and ">late<" in runs
    assert "fixed rate, at most" in runs
    assert '<td class="late">7 <small>+2 unsent</small></td>' in runs

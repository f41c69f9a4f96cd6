"""A canary's life as the API, the actions and the watcher live it, with a real Redis.

The worker's jobs (loading the candidate beside, the promoting switch, the unload) are played
here by marking them finished, as tests/unit/test_serving_requests.py does for switches; the
same flow against a real Triton and traffic through ``/v2`` is tests/integration/test_canary.py.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from webapp.edge.canary_split import Split, choose
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Event, Job
from webapp.registry.serving import canary as watcher
from webapp.registry.serving import canary_traffic
from webapp.registry.serving.models import Canary

SIG = {"inputs": [{"name": "x", "dtype": "TYPE_FP32", "dims": ["batch", 4]}],
       "outputs": [{"name": "y", "dtype": "TYPE_FP32", "dims": ["batch", 3]}]}  # fmt: skip
PLAN = {"version": 2, "steps": [10, 50, 100], "step_seconds": 30, "max_error_rate": 0.01,
        "max_p99_ratio": 1.5, "min_requests": 20}  # fmt: skip


@pytest.fixture
def model(operator, settings, tmp_path, redis_url) -> Model:
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    settings.LIMITS_REDIS_URL = redis_url
    model = Model.objects.create(
        name=f"mlp{random.randrange(10**9)}", target="onnxruntime", created_by=operator,
        serving_version=1,
    )  # fmt: skip
    for number in (1, 2, 3):
        Version.objects.create(
            model=model, number=number, status="ready", source_filename="m.onnx",
            source_sha256=f"{number:064d}", source_size=10, verification={"status": "passed"},
            signature=SIG,
        )  # fmt: skip
    return model


def start(api: Any, model: Model, **changes: Any) -> dict[str, Any]:
    response = api("post", f"/api/v1/models/{model.name}/canary", {**PLAN, **changes})
    assert response.status_code == 202, response.content
    assert response["Location"] == f"/api/v1/models/{model.name}/canary"
    return response.json()  # type: ignore[no-any-return]


def look(canary_id: int) -> Canary:
    """One look by the watcher, as its queued task makes it."""
    Canary.objects.filter(pk=canary_id).update(ticked=None)
    watcher.watch(canary_id)
    return Canary.objects.select_related("model", "job").get(pk=canary_id)


def job_done(canary: Canary, ok: bool = True, **model_fields: Any) -> None:
    assert canary.job is not None
    state = Job.State.SUCCEEDED if ok else Job.State.FAILED
    Job.objects.filter(pk=canary.job.pk).update(state=state, error="" if ok else "it broke")
    if model_fields:
        Model.objects.filter(pk=canary.model_id).update(**model_fields)


def traffic(model: Model, version: int, calls: int, ms: float, errors: int = 0) -> None:
    model.refresh_from_db()
    for _ in range(calls):
        canary_traffic.count(model, version, ms * random.uniform(0.95, 1.05), ok=True)
    for _ in range(errors):
        canary_traffic.count(model, version, 0.0, ok=False)


def end_step(canary: Canary) -> None:
    Canary.objects.filter(pk=canary.pk).update(
        step_started=timezone.now() - timedelta(seconds=canary.step_seconds + 1)
    )


def running(api: Any, model: Model, **changes: Any) -> Canary:
    """A canary whose candidate loaded: the first step's share goes to it."""
    started = start(api, model, **changes)
    canary = Canary.objects.get(uuid=started["id"])
    assert started["state"] == "running" and started["phase"] == "starting"
    assert started["weight"] == 0
    job_done(canary, compare_version=changes.get("version", 2))
    return look(canary.pk)


# -- the happy path ------------------------------------------------------------------------------


def test_a_healthy_candidate_goes_step_by_step_and_is_promoted(api, model) -> None:
    canary = running(api, model)
    model.refresh_from_db()
    assert canary.state == "running" and canary.weight == 10
    assert model.canary["candidate"] == 2 and model.canary["weight"] == 10
    assert model.lock_holder == canary.holder

    traffic(model, 2, 40, 8.0)
    traffic(model, 1, 400, 8.6)
    assert look(canary.pk).step_index == 0  # enough calls, but the step is not over
    end_step(canary)
    canary = look(canary.pk)
    assert canary.step_index == 1 and canary.weight == 50
    assert canary.decisions[-1]["verdict"] == "pass"
    assert canary.decisions[-1]["candidate"]["requests"] == 40
    model.refresh_from_db()
    assert model.canary["weight"] == 50 and model.canary["window"].endswith("-1")

    traffic(model, 2, 100, 7.0)
    traffic(model, 1, 100, 8.6)
    end_step(canary)
    canary = look(canary.pk)
    assert canary.state == "promoting"
    assert canary.job is not None and canary.job.kind == "serve"
    assert canary.job.params["to"] == 2 and canary.job.params["lock_holder"] == canary.holder
    model.refresh_from_db()
    assert model.canary["weight"] == 100  # every unpinned call on the candidate before the switch

    job_done(canary, serving_version=2, previous_version=1, compare_version=None)
    canary = look(canary.pk)
    model.refresh_from_db()
    assert canary.state == "promoted" and canary.finished is not None
    assert model.canary == {} and model.lock_holder == ""
    kinds = list(Event.objects.filter(model=model).values_list("kind", flat=True))
    assert "canary.started" in kinds and "canary.promoting" in kinds and "canary.promoted" in kinds
    shown = api("get", f"/api/v1/models/{model.name}/canary").json()
    assert shown["state"] == "promoted" and shown["weight"] == 100
    assert "held every gate" in shown["decisions"][0]["reason"]


def test_a_slow_candidate_is_rolled_back_at_once_naming_latency(api, model) -> None:
    canary = running(api, model)
    traffic(model, 2, 30, 41.2)
    traffic(model, 1, 300, 8.6)
    canary = look(canary.pk)  # mid-step: a failed gate does not wait for the step's end
    model.refresh_from_db()
    assert canary.state == "ending" and canary.outcome == "rolled_back"
    assert model.canary == {}  # no more calls to the candidate from now on
    reason = str(canary.reason)
    assert reason.startswith("rolled back v2 at 10%: p99 ") and "v1's" in reason
    assert reason.endswith("limit 1.5x")
    assert canary.job is not None and canary.job.params["compare"] is None
    shown = api("get", f"/api/v1/models/{model.name}/canary").json()
    assert shown["state"] == "rolled_back" and shown["phase"] == "ending"

    job_done(canary, compare_version=None)
    canary = look(canary.pk)
    model.refresh_from_db()
    assert canary.state == "rolled_back" and model.lock_holder == ""
    assert model.serving_version == 1
    event = Event.objects.get(model=model, kind="canary.rolled_back")
    assert "p99" in str(event.message) and event.data["decision"]["gate"] == "latency"


def test_a_burst_of_errors_rolls_back(api, model) -> None:
    canary = running(api, model)
    traffic(model, 2, 20, 8.0, errors=5)
    traffic(model, 1, 300, 8.0)
    canary = look(canary.pk)
    assert canary.outcome == "rolled_back" and "failed" in str(canary.reason)


def test_too_little_traffic_extends_the_step_and_says_so_once(api, model) -> None:
    canary = running(api, model)
    traffic(model, 2, 3, 8.0)
    traffic(model, 1, 30, 8.0)
    end_step(canary)
    canary = look(canary.pk)
    canary = look(canary.pk)
    assert canary.state == "running" and canary.step_index == 0
    extends = [d for d in canary.decisions if d["verdict"] == "extend"]
    assert len(extends) == 1 and "too little traffic" in str(extends[0]["reason"]["template"])
    traffic(model, 2, 30, 8.0)  # the same window keeps counting
    canary = look(canary.pk)
    assert canary.step_index == 1


# -- a person's hand --------------------------------------------------------------------------


def test_abort_stops_the_split_at_once_and_unloads_the_candidate(api, model) -> None:
    canary = running(api, model)
    response = api("post", f"/api/v1/models/{model.name}/canary/abort")
    assert response.status_code == 202
    model.refresh_from_db()
    assert model.canary == {}  # before the watcher's next look
    canary = look(canary.pk)
    assert canary.state == "ending" and canary.outcome == "aborted"
    assert str(canary.reason) == "otto aborted it at 10%."
    job_done(canary, compare_version=None)
    assert look(canary.pk).state == "aborted"
    assert api("post", f"/api/v1/models/{model.name}/canary/abort").status_code == 409


def test_promote_now_skips_the_remaining_steps(api, model) -> None:
    canary = running(api, model)
    assert api("post", f"/api/v1/models/{model.name}/canary/promote").status_code == 202
    canary = look(canary.pk)
    assert canary.state == "promoting" and canary.job is not None
    assert "otto promoted it" in str(canary.job.params["reason"]["template"] % {"user": "otto"})


def test_abort_while_the_candidate_loads_waits_then_unloads_it(api, model) -> None:
    started = start(api, model)
    canary = Canary.objects.get(uuid=started["id"])
    api("post", f"/api/v1/models/{model.name}/canary/abort")
    canary = look(canary.pk)
    assert canary.state == "ending" and canary.job is not None and canary.job.kind == "load"
    load_job = canary.job.pk
    job_done(canary, compare_version=2)  # the load finished after all
    canary = look(canary.pk)
    assert canary.job is not None and canary.job.pk != load_job  # the unload
    job_done(canary, compare_version=None)
    assert look(canary.pk).state == "aborted"


def test_a_candidate_that_fails_to_load_ends_failed_before_any_traffic(api, model) -> None:
    started = start(api, model)
    canary = Canary.objects.get(uuid=started["id"])
    job_done(canary, ok=False)
    canary = look(canary.pk)
    model.refresh_from_db()
    assert canary.state == "failed" and "did not load" in str(canary.reason)
    assert model.canary == {} and model.lock_holder == ""


# -- what is refused ------------------------------------------------------------------------------


def test_a_switch_while_a_canary_runs_is_refused_with_the_reason(api, model, operator) -> None:
    running(api, model)
    response = api("post", f"/api/v1/models/{model.name}/serve", {"version": 3})
    assert response.status_code == 409
    assert response.json()["code"] == "switch_in_progress"
    assert "canary of" in response.json()["error"] and "abort it" in response.json()["error"]
    second = api("post", f"/api/v1/models/{model.name}/canary", {**PLAN, "version": 3})
    assert second.status_code == 409


@pytest.mark.parametrize(
    ("changes", "status", "needle"),
    [
        ({"steps": [50, 10, 100]}, 400, "increase"),
        ({"steps": [10, 50]}, 400, "must be 100"),
        ({"steps": [0, 100]}, 400, "between 1 and 100"),
        ({"step_seconds": 2}, 400, "step_seconds"),
        ({"max_error_rate": 2}, 400, "max_error_rate"),
        ({"max_p99_ratio": 0.9}, 400, "max_p99_ratio"),
        ({"version": 1}, 409, "serving version already"),
        ({"version": 9}, 404, "no version 9"),
        ({"version": "2"}, 400, "version"),
    ],
)
def test_a_bad_canary_is_refused_and_changes_nothing(api, model, changes, status, needle) -> None:
    response = api("post", f"/api/v1/models/{model.name}/canary", {**PLAN, **changes})
    assert response.status_code == status, response.content
    assert needle in response.json()["error"]
    model.refresh_from_db()
    assert not Canary.objects.exists() and model.lock_holder == "" and model.canary == {}


def test_an_unpackaged_candidate_is_refused(api, model) -> None:
    Version.objects.filter(model=model, number=2).update(status="compiling")
    response = api("post", f"/api/v1/models/{model.name}/canary", PLAN)
    assert response.status_code == 409 and response.json()["code"] == "not_publishable"


def test_npu_ge_models_are_refused_with_the_reason(api, model) -> None:
    Model.objects.filter(pk=model.pk).update(target="npu_ge")
    response = api("post", f"/api/v1/models/{model.name}/canary", PLAN)
    assert response.status_code == 409 and response.json()["code"] == "not_supported"
    assert "one version per Triton model" in response.json()["error"]


def test_a_viewer_may_follow_but_not_start(viewer_api, api, model) -> None:
    assert viewer_api("post", f"/api/v1/models/{model.name}/canary", PLAN).status_code == 403
    assert viewer_api("get", f"/api/v1/models/{model.name}/canary").status_code == 404
    running(api, model)
    shown = viewer_api("get", f"/api/v1/models/{model.name}/canary").json()
    assert shown["weight"] == 10 and shown["live"]["candidate"]["version"] == 2


# -- nobody watching ------------------------------------------------------------------------------


def test_reconcile_clears_a_split_whose_canary_ended(api, model) -> None:
    canary = running(api, model)
    Canary.objects.filter(pk=canary.pk).update(state="aborted")  # as if it crashed in between
    assert watcher.clear_orphan_splits() == [model.name]
    model.refresh_from_db()
    assert model.canary == {}


def test_a_canary_nobody_looked_at_is_woken(api, model, monkeypatch) -> None:
    canary = running(api, model)
    woken: list[int] = []
    monkeypatch.setattr(watcher.dispatch, "canary_watch", lambda pk, countdown=0: woken.append(pk))
    Canary.objects.filter(pk=canary.pk).update(ticked=timezone.now() - timedelta(minutes=5))
    assert watcher.wake_stale() == 1 and woken == [canary.pk]


def test_a_second_look_right_after_the_first_does_nothing(api, model) -> None:
    canary = running(api, model)
    ticked = canary.ticked
    watcher.watch(canary.pk)
    assert Canary.objects.get(pk=canary.pk).ticked == ticked


# -- the split ----------------------------------------------------------------------------------


@pytest.mark.parametrize("weight", [10, 50, 90])
def test_the_share_of_unpinned_calls_is_the_steps(weight: int) -> None:
    rng = random.Random(weight)
    split = Split(candidate=2, weight=weight, window="w")
    picks = [choose(1, split, rng.random) for _ in range(5000)]
    share = 100 * picks.count(2) / len(picks)
    assert abs(share - weight) < 3


def test_no_split_without_a_canary_or_a_serving_version() -> None:
    assert choose(1, None) == 1
    assert choose(None, Split(2, 50, "w")) is None
    assert choose(2, Split(2, 50, "w")) == 2


# -- the page -------------------------------------------------------------------------------------


def test_the_card_offers_the_form_then_shows_the_running_canary(api, model, operator) -> None:
    from tests.fixtures.users import signed_in

    client = signed_in(operator)
    page = client.get(f"/models/{model.name}/").content.decode()
    assert 'id="canary"' in page and "Start the canary" in page
    assert '<option value="2">v2</option>' in page and '<option value="1">' not in page

    response = client.post(f"/models/{model.name}/canary/start/", {
        "version": "2", "steps": "10, 50, 100", "step_seconds": "30", "max_error_rate": "1",
        "max_p99_ratio": "1.5", "min_requests": "20"})  # fmt: skip
    assert response.status_code == 302 and response["Location"].endswith("#canary")
    canary = Canary.objects.get()
    assert canary.max_error_rate == pytest.approx(0.01) and canary.steps == [10, 50, 100]
    job_done(canary, compare_version=2)
    look(canary.pk)
    traffic(model, 2, 25, 8.0)
    traffic(model, 1, 250, 8.6)
    card = client.get(f"/models/{model.name}/canary/").content.decode()
    assert 'hx-trigger="every 2s"' in card  # follows itself while active
    assert "<strong>10%</strong>" in card and "Promote now" in card and "Abort (roll back)" in card
    assert "25" in card and "250" in card


def test_a_bad_form_says_which_field(api, model, operator) -> None:
    from tests.fixtures.users import signed_in

    client = signed_in(operator)
    response = client.post(f"/models/{model.name}/canary/start/", {
        "version": "2", "steps": "ten", "step_seconds": "30", "max_error_rate": "1",
        "max_p99_ratio": "1.5", "min_requests": "20"}, follow=True)  # fmt: skip
    assert "Whole percentages" in response.content.decode()
    response = client.post(f"/models/{model.name}/canary/start/", {
        "version": "2", "steps": "50, 10, 100", "step_seconds": "30", "max_error_rate": "1",
        "max_p99_ratio": "1.5", "min_requests": "20"}, follow=True)  # fmt: skip
    assert "steps must increase" in response.content.decode()
    assert not Canary.objects.exists()


def test_the_card_says_why_an_npu_ge_model_has_none(model, operator) -> None:
    from tests.fixtures.users import signed_in

    Model.objects.filter(pk=model.pk).update(target="npu_ge")
    page = signed_in(operator).get(f"/models/{model.name}/").content.decode()
    assert "one version per Triton model" in page and "Start the canary" not in page


def test_the_running_card_in_chinese(api, model, operator) -> None:
    from tests.fixtures.users import signed_in

    running(api, model)
    card = (
        signed_in(operator)
        .get(f"/models/{model.name}/canary/", HTTP_ACCEPT_LANGUAGE="zh-Hans")
        .content.decode()
    )
    assert "金丝雀发布" in card and "全量发布" in card and "中止" in card


def test_a_canary_that_lost_its_lock_stops_splitting(api, model) -> None:
    canary = running(api, model)
    Model.objects.filter(pk=model.pk).update(lock_holder="someone-else")  # it expired, was taken
    canary = look(canary.pk)
    model.refresh_from_db()
    assert canary.state == "ending" and canary.outcome == "failed"
    assert "lost the model's switch lock" in str(canary.reason) and model.canary == {}


def test_a_canary_whose_first_look_never_came_is_woken(api, model, monkeypatch) -> None:
    started = start(api, model)
    woken: list[int] = []
    monkeypatch.setattr(watcher.dispatch, "canary_watch", lambda pk, countdown=0: woken.append(pk))
    Canary.objects.filter(uuid=started["id"]).update(
        ticked=None, created=timezone.now() - timedelta(minutes=5)
    )
    assert watcher.wake_stale() == 1

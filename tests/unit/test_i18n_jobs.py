"""Issue 22: what a job and the audit trail show is said from templates, so pages can translate
it. Step labels are marked for the catalogue, step messages, job errors and events keep their
template once (as a message), and records of plain words show as stored.

The zh-Hans catalogue is merged later, so these tests check the mechanism with English.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.template import Context, Template
from django.utils import translation

from model_store.text import Message, say
from webapp import live
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Event, Job
from webapp.registry.jobs.steps import COMPILE_STEPS, initial_steps, shown_step


@pytest.fixture(autouse=True)
def _store(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    settings.MODEL_STORE_ROOT = tmp_path / "store"


@pytest.fixture(autouse=True)
def _no_pushes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live, "publish", lambda topic, data: None)


@pytest.fixture
def job(db: None) -> Job:
    model = Model.objects.create(name="resnet")
    return Job.objects.create(kind="compile", model=model, steps=initial_steps(COMPILE_STEPS))


def render(source: str, **context: Any) -> str:
    with translation.override("en"):
        return Template("{% load hub_i18n %}" + source).render(Context(context))


def test_an_event_stores_its_message_once_and_says_it_when_shown(db: None) -> None:
    model = Model.objects.create(name="resnet")
    message = say("%(who)s unloaded %(model)s; it no longer answers requests.", who="ana",
                  model="resnet")  # fmt: skip
    event = jobs.record_event("unload", message, model=model, data={"reason": "x"})
    event.refresh_from_db()
    assert isinstance(event.message, Message) and event.message == message
    assert str(event.message) == "ana unloaded resnet; it no longer answers requests."
    assert event.data == {"reason": "x"}
    assert render("{{ e.message|translated }}", e=event) == str(message)
    assert event.to_dict()["message"] == str(message)  # the API: words in the caller's language


def test_an_event_of_plain_words_shows_as_stored(db: None) -> None:
    event = Event.objects.create(kind="serve", message="bob switched m to v2 in 1.00 s.", data={})
    event.refresh_from_db()
    assert event.message == "bob switched m to v2 in 1.00 s."
    assert render("{{ e.message|translated }}", e=event) == event.message


def test_a_step_message_is_stored_as_its_template(job: Job) -> None:
    jobs.start_step(job, "validate")
    jobs.finish_step(job, "validate", say("%(count)s warning(s)", count=2), "warning")
    job.refresh_from_db()
    step = job.steps[0]
    assert step["message"] == {"template": "%(count)s warning(s)", "params": {"count": 2}}
    shown = job.shown_steps[0]
    assert shown["label"] == "Validate the ONNX model"
    assert shown["message"] == "2 warning(s)"
    assert render("{% load hub %}{{ s.state|state_label }}", s=shown) == "warning"
    assert job.to_dict()["steps"][0]["message"] == "2 warning(s)"


def test_a_plain_step_message_shows_as_stored(job: Job) -> None:
    jobs.finish_step(job, "validate", "no template here")
    job.refresh_from_db()
    assert job.steps[0]["message"] == "no template here"
    assert job.shown_steps[0]["message"] == "no template here"


def test_a_job_error_is_one_message_for_the_page_the_step_and_the_event(job: Job) -> None:
    jobs.start_step(job, "compile")
    error = say("The %(step)s step ran past its time limit and was stopped.", step="compile")
    jobs.fail(job, error, "timeout")
    job.refresh_from_db()
    assert job.error == error
    assert job.steps[1]["message"]["template"] == error.template
    assert job.to_dict()["error"] == str(error)  # the API keeps its English
    event = Event.objects.get(job=job, kind="job.failed")
    assert event.message == error
    assert event.data == {"code": "timeout", "step": "compile"}
    assert render("{{ j.error|translated }}", j=job) == str(error)


def test_a_job_error_of_plain_words_shows_as_stored(job: Job) -> None:
    jobs.fail(job, "Something went wrong long ago.", "failed")
    job.refresh_from_db()
    assert job.error == "Something went wrong long ago."
    assert render("{{ j.error|translated }}", j=job) == job.error


def test_the_job_page_shows_labels_messages_and_errors(job: Job) -> None:
    from django.template.loader import render_to_string

    jobs.finish_step(job, "validate", say("no problems found"))
    jobs.fail(job, say("Cancelled on request."), "cancelled", cancelled=True)
    job.refresh_from_db()
    with translation.override("en"):
        html = render_to_string("registry/_job_status.html", {"job": job, "log_lines": []})
    assert "Validate the ONNX model" in html
    assert "no problems found" in html
    assert "Cancelled on request." in html


def test_step_labels_are_marked_and_unknown_labels_stay() -> None:
    with translation.override("en"):
        assert shown_step({"name": "copy", "label": "copy", "state": "done"})["label"] == "copy"
        own = {"name": "compile", "label": "Build it my way", "state": "pending"}
        assert shown_step(own)["label"] == "Build it my way"


@pytest.mark.django_db(transaction=True)
def test_the_migration_applies_and_reverts() -> None:
    def columns() -> set[str]:
        with connection.cursor() as cursor:
            return {
                c.name
                for c in connection.introspection.get_table_description(cursor, "registry_job")
            }

    try:
        call_command("migrate", "registry", "0014_tuning_run", verbosity=0)
        assert "texts" not in columns()
        call_command("migrate", "registry", "0015_job_texts", verbosity=0)
        assert "texts" in columns()
    finally:
        call_command("migrate", verbosity=0)

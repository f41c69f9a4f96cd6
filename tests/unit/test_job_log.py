"""A job's log: the first ``JOB_LOG_MAX_LINES`` lines in the database and pushed live, every line
in a file in the store, downloadable from the job page and the API.

A chatty ATC run writes hundreds of thousands of lines; each used to become a database row and
a websocket push (and a page re-render of all of them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.fixtures.users import PASSWORD, signed_in, token_for
from webapp import live
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs import record as jobs
from webapp.registry.jobs.models import Job, JobLogLine

CAP = 10
WRITTEN = 25


@pytest.fixture(autouse=True)
def small_cap(settings, tmp_path: Path) -> None:
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    settings.JOB_LOG_MAX_LINES = CAP


@pytest.fixture
def pushes(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(live, "publish", lambda topic, data: sent.append(data))
    return sent


@pytest.fixture
def job(db: None) -> Job:
    return Job.objects.create(kind="compile", model=Model.objects.create(name="chatty"))


def chatter(job: Job, count: int = WRITTEN) -> None:
    for n in range(count):
        jobs.log(job, f"ATC line {n}")


def test_the_cap_is_a_setting_of_2000_by_default() -> None:
    import webapp.settings as module  # the module, not the test's overridden settings

    assert module.JOB_LOG_MAX_LINES == 2000


def test_a_chatty_job_stores_the_cap_and_one_note_line(job: Job) -> None:
    chatter(job)
    rows = list(JobLogLine.objects.filter(job=job).order_by("seq"))
    assert len(rows) == CAP + 1
    assert [r.text for r in rows[:CAP]] == [f"ATC line {n}" for n in range(CAP)]
    assert "full log" in rows[CAP].text
    job.refresh_from_db()
    assert job.log_lines_more == WRITTEN - CAP


def test_the_count_goes_on_across_job_instances(job: Job) -> None:
    chatter(job, 12)
    # The next step runs in another task with its own copy of the job row.
    chatter(Job.objects.get(pk=job.pk), 5)
    assert JobLogLine.objects.filter(job=job).count() == CAP + 1
    job.refresh_from_db()
    assert job.log_lines_more == 17 - CAP


def test_only_the_stored_lines_are_pushed_live(job: Job, pushes: list[dict[str, Any]]) -> None:
    chatter(job)
    lines = [p["line"]["text"] for p in pushes if "line" in p]
    assert len(lines) == CAP + 1
    assert lines[:CAP] == [f"ATC line {n}" for n in range(CAP)]


def test_the_full_log_file_has_every_line(job: Job, viewer_client: Client) -> None:
    chatter(job)
    jobs.log(job, "the end", "error")
    response = viewer_client.get(f"/jobs/{job.uuid}/log.txt")
    assert response.status_code == 200
    assert response.streaming  # from disk, not read into memory
    assert response["Content-Type"].startswith("text/plain")
    assert response["Content-Disposition"].startswith("attachment")
    text = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    lines = text.splitlines()
    assert len(lines) == WRITTEN + 1
    for n in range(WRITTEN):
        assert lines[n].endswith(f"ATC line {n}")
    assert "error" in lines[-1] and lines[-1].endswith("the end")


def test_the_job_page_says_how_many_more_lines_and_links_the_file(
    job: Job, viewer_client: Client
) -> None:
    chatter(job)
    body = viewer_client.get(f"/jobs/{job.uuid}/").content.decode()
    assert f"{WRITTEN - CAP} more lines" in body
    assert f'href="/jobs/{job.uuid}/log.txt"' in body
    assert "ATC line 24" not in body  # only in the file


def test_a_short_log_has_no_note(job: Job, viewer_client: Client) -> None:
    chatter(job, 3)
    assert JobLogLine.objects.filter(job=job).count() == 3
    body = viewer_client.get(f"/jobs/{job.uuid}/").content.decode()
    assert "more lines" not in body


def test_the_api_serves_the_full_log_and_says_what_is_left_out(
    client: Client, job: Job, viewer
) -> None:
    chatter(job)
    auth = {"HTTP_AUTHORIZATION": f"Token {token_for(viewer)}"}
    detail = client.get(f"/api/v1/jobs/{job.uuid}", **auth).json()
    assert len(detail["log"]) == CAP + 1
    assert detail["log_lines_more"] == WRITTEN - CAP
    assert detail["log_url"] == f"/api/v1/jobs/{job.uuid}/log"
    response = client.get(f"/api/v1/jobs/{job.uuid}/log", **auth)
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    text = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    assert len(text.splitlines()) == WRITTEN


def test_the_download_is_refused_to_anonymous_and_roleless_users(client: Client, job: Job) -> None:
    chatter(job, 3)
    page = client.get(f"/jobs/{job.uuid}/log.txt")
    assert page.status_code == 302 and "/login/" in page["Location"]
    api = client.get(f"/api/v1/jobs/{job.uuid}/log")
    assert api.status_code == 401
    nobody = get_user_model().objects.create_user("nemo", password=PASSWORD)
    assert signed_in(nobody).get(f"/jobs/{job.uuid}/log.txt").status_code == 403


def test_a_job_without_a_log_file_is_a_404(job: Job, viewer_client: Client) -> None:
    assert viewer_client.get(f"/jobs/{job.uuid}/log.txt").status_code == 404
    assert viewer_client.get("/jobs/not-a-uuid/log.txt").status_code == 404


def test_deleting_a_job_deletes_its_log_file(
    job: Job, tmp_path: Path, django_capture_on_commit_callbacks
) -> None:
    chatter(job, 3)
    files = list((tmp_path / "store").rglob("*.log"))
    assert len(files) == 1
    with django_capture_on_commit_callbacks(execute=True):
        job.model.delete()  # jobs go with their model
    assert not files[0].exists()


def test_the_log_path_takes_only_job_ids(tmp_path: Path) -> None:
    from model_store.errors import UnsafePath
    from model_store.store import ModelStore

    store = ModelStore(tmp_path)
    assert store.job_log_path("ab12") == tmp_path.resolve() / "logs" / "ab12.log"
    with pytest.raises(UnsafePath):
        store.job_log_path("../secret_key")

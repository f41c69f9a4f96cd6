"""Adopting an existing Triton repository: one task per version copied into the store."""

from __future__ import annotations

from workers.celery import app

# Copying is bounded by the disk, not by a model's build: an hour covers very large files.
ADOPT_LIMIT_S = 3600


@app.task(
    name="workers.tasks.adopt.run_job",
    soft_time_limit=ADOPT_LIMIT_S,
    time_limit=ADOPT_LIMIT_S + 60,
    ignore_result=True,
)
def run_job(job_id: int) -> None:
    from webapp.registry.catalogue.adopt_work import run_adopt_job

    run_adopt_job(job_id)

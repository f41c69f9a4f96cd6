"""What one compile step hands to the next: ``state.json`` in the job's work directory.

The steps may run in different worker processes or hosts (webapp/registry/build/pipeline.py), and
the web process writes here too when a node uploads a build's artifact
(webapp/registry/build/node_builds.py), so the state lives in the shared store, written whole.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from model_store.file_io import atomic_write_text
from model_store.store import ModelStore
from webapp.registry.jobs.models import Job


def work_dir(store: ModelStore, job: Job) -> Path:
    return store.work_dir(job.uuid.hex)


def read(store: ModelStore, job: Job) -> dict[str, Any]:
    path = work_dir(store, job) / "state.json"
    return json.loads(path.read_text()) if path.exists() else {}


def update(store: ModelStore, job: Job, **values: Any) -> None:
    path = work_dir(store, job) / "state.json"
    atomic_write_text(path, json.dumps(read(store, job) | values))

"""Every list page and list API answers in a number of queries that does not grow with the rows.

The same request is counted against a small registry and against 200 models x 5 versions
(with jobs and events); the counts must be equal, and small. Triton is not reachable here, so
the pages' Triton lookups fail fast and cost no query.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.fixtures.users import signed_in, token_for
from webapp.registry.models import Event, Job, Model, Version

LISTS = [
    ("page", "/models/"),
    ("page", "/jobs/"),
    ("page", "/audit/"),
    ("page", "/models/m0000/"),
    ("page", "/models/m0000/try/"),
    ("api", "/api/v1/models"),
    ("api", "/api/v1/models/m0000"),
    ("api", "/api/v1/models/m0000/versions"),
    ("api", "/api/v1/models/m0000/history"),
    ("api", "/api/v1/audit"),
    ("api", "/api/v1/jobs"),
    ("api", "/api/v1/models/m0000/examples"),
    ("api", "/api/v1/tokens"),
]
MAX_QUERIES = 30


def _fill(models: int, operator) -> None:  # type: ignore[no-untyped-def]
    start = Model.objects.count()
    rows = Model.objects.bulk_create(
        Model(name=f"m{i:04d}", created_by=operator, serving_version=1)
        for i in range(start, start + models)
    )
    versions = Version.objects.bulk_create(
        Version(
            model=m,
            number=n,
            status=Version.Status.READY,
            source_filename="m.onnx",
            source_sha256=f"{m.pk:032d}{n:032d}",
            source_size=1,
            created_by=operator,
            verification={"status": "passed"},
        )
        for m in rows
        for n in range(1, 6)
    )
    jobs = Job.objects.bulk_create(
        Job(kind=Job.Kind.COMPILE, model=v.model, version=v, created_by=operator) for v in versions
    )
    Event.objects.bulk_create(
        Event(model=j.model, version=j.version, job=j, kind="compile", actor=operator, message="x")
        for j in jobs
    )


def _count(client_for: dict[str, Client], kind: str, path: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client_for[kind].get(path)
    assert response.status_code == 200, (path, response.status_code)
    return len(queries)


@pytest.mark.parametrize(("kind", "path"), LISTS, ids=[p for _, p in LISTS])
def test_a_list_costs_the_same_queries_for_1_model_and_for_200(
    operator, settings, tmp_path, kind: str, path: str
) -> None:
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    settings.TRITON_URL = settings.TRITON_GRPC_URL = "127.0.0.1:9"
    clients = {
        "page": signed_in(operator),
        "api": Client(HTTP_AUTHORIZATION=f"Token {token_for(operator)}"),
    }
    _fill(1, operator)
    _count(clients, kind, path)  # warm caches (content types, sessions) once
    small = _count(clients, kind, path)
    _fill(199, operator)
    large = _count(clients, kind, path)
    assert large == small, f"{path}: {small} queries with 1 model, {large} with 200"
    assert large <= MAX_QUERIES, f"{path}: {large} queries"

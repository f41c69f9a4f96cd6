"""Every list page and list API answers in a number of queries that does not grow with the rows.

The same request is counted against a small registry and against 200 models x 5 versions
(with jobs, events and metric points), where the first model also has 200 saved examples,
sweeps, metric points and job log lines and its owner 200 API tokens; the counts must be
equal, and small. Triton is not reachable here, so the pages' Triton lookups fail fast and cost
no query.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from model_store.runtime.series import RAW
from tests.fixtures.users import signed_in, token_for
from webapp.accounts.models import ApiToken
from webapp.ops.models import MetricPoint
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Event, Job, JobLogLine
from webapp.registry.performance.models import PerfRun
from webapp.registry.tryit.models import TryExample

LISTS = [
    ("page", "/models/"),
    ("page", "/jobs/"),
    ("page", "/audit/"),
    ("page", "/models/m0000/"),
    ("page", "/models/m0000/try/"),
    ("api", "/api/v1/models"),
    ("api", "/api/v1/models?tag=team:vision&state=serving&sort=-updated&per_page=100"),
    ("api", "/api/v1/models?retired=true&owner=otto"),
    ("page", "/models/?tag=team:vision&owner=otto&sort=-created"),
    ("page", "/models/?state=failing&sort=-updated"),
    ("api", "/api/v1/models/m0000"),
    ("api", "/api/v1/models/m0000/versions"),
    ("api", "/api/v1/models/m0000/history"),
    ("api", "/api/v1/audit"),
    ("api", "/api/v1/jobs"),
    ("api", "/api/v1/models/m0000/examples"),
    ("api", "/api/v1/tokens"),
    ("page", "/models/m0000/perf/"),
    ("page", "/models/m0000/metrics/"),
    ("page", "/account/tokens/"),
    ("page", "/server/"),
    ("page", "/jobs/{job}/"),
    ("api", "/api/v1/models/m0000/sweeps"),
    ("api", "/api/v1/models/m0000/metrics"),
    ("api", "/api/v1/jobs/{job}"),
    ("api", "/metrics"),
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
    now = timezone.now()
    MetricPoint.objects.bulk_create(
        MetricPoint(model_name=m.name, version="1", tier=RAW, start=now - timedelta(minutes=1),
                    seconds=15, success=10, inferences=10, executions=10)
        for m in rows
    )  # fmt: skip
    _fill_first_model(models, operator, now)


def _fill_first_model(count: int, operator, now: datetime) -> None:  # type: ignore[no-untyped-def]
    """``count`` more rows in each of m0000's own lists (and the operator's tokens)."""
    model = Model.objects.get(name="m0000")
    version = model.versions.get(number=1)
    first_job = model.jobs.order_by("pk").first()
    TryExample.objects.bulk_create(
        TryExample(model=model, name=f"e{i}", inputs={"x": [[0.0]]}, created_by=operator)
        for i in range(count)
    )
    sweeps = Job.objects.bulk_create(
        Job(kind=Job.Kind.SWEEP, model=model, version=version, created_by=operator,
            state=Job.State.SUCCEEDED)
        for _ in range(count)
    )  # fmt: skip
    PerfRun.objects.bulk_create(
        PerfRun(model=model, version=version, job=job, config_sha256="0" * 64) for job in sweeps
    )
    seq = JobLogLine.objects.filter(job=first_job).count()
    JobLogLine.objects.bulk_create(
        JobLogLine(job=first_job, seq=seq + i, text=f"line {seq + i}") for i in range(count)
    )
    MetricPoint.objects.bulk_create(
        MetricPoint(model_name=model.name, version=str(1 + i % 5), tier=RAW,
                    start=now - timedelta(seconds=15 * (i + 8)), seconds=15, success=1)
        for i in range(count)
    )  # fmt: skip
    first = ApiToken.objects.count()
    ApiToken.objects.bulk_create(
        ApiToken(user=operator, name=f"t{n}", key_hash=f"{n:064x}", key_prefix="hub_test")
        for n in range(first, first + count)
    )


def _count(client_for: dict[str, Client], kind: str, path: str) -> int:
    job = Job.objects.filter(model__name="m0000", kind=Job.Kind.COMPILE).order_by("pk").first()
    path = path.format(job=job.uuid if job else "")
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

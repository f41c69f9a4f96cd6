"""Bad input, counted: hostile requests through every API never get a 5xx or change anything.

A table of requests an attacker (or a buggy script) would send beyond uploads: type confusion
in JSON, huge, negative and non-finite numbers, overlong strings and headers, unicode tricks,
path-like names, wrong content types, replayed or foreign ids, other users' objects. Each runs
as a signed-in operator (the role that may change things) against a model with a served
version, and must get a 4xx with the error shape, and leave every table as it was. The count
is printed (`-s`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.test import Client

from tests.fixtures.users import token_for
from webapp.accounts.models import ApiToken
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.jobs.models import Event, Job
from webapp.registry.serving.models import Canary
from webapp.registry.tryit.models import TryExample

SIG = {
    "inputs": [{"name": "x", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 4]}],
    "outputs": [{"name": "y", "dtype": "TYPE_FP32", "numpy": "float32", "dims": ["batch", 3]}],
}


@dataclass(frozen=True)
class Hostile:
    why: str
    method: str
    path: str
    body: object = None
    raw: bytes | None = None
    content_type: str = "application/json"
    headers: dict[str, str] | None = None


def _json_cases() -> list[Hostile]:
    """Type confusion and odd values in every JSON field the API reads."""
    m = "/api/v1/models/mlp"
    values: list[tuple[str, object]] = [
        ("null", None), ("true", True), ("a list", [1]), ("an object", {"a": 1}),
        ("a huge int", 10**40), ("a negative", -1), ("zero", 0), ("a float", 1.5),
        ("a numeric string", "1"), ("an overlong string", "x" * 100_000),
    ]  # fmt: skip
    cases = []
    for label, value in values:
        cases += [
            Hostile(f"serve version = {label}", "post", f"{m}/serve", {"version": value}),
            # "1" is a fine model name; every other value here is not.
            *(
                [Hostile(f"model name = {label}", "post", "/api/v1/models", {"name": value})]
                if value != "1"
                else []
            ),
            Hostile(
                f"sweep concurrency = {label}", "post", f"{m}/sweeps", {"max_concurrency": value}
            ),
            Hostile(
                f"infer top_k = {label}",
                "post",
                f"{m}/infer",
                {"inputs": {"x": [[1, 2, 3, 4]]}, "top_k": value},
            ),
            Hostile(
                f"upload size = {label}",
                "post",
                "/api/v1/uploads",
                {"filename": "m.onnx", "size": value},
            ),
        ]
        # null leaves the tags as they are (a 200 that changes nothing); "1" is a fine tag.
        if value is not None:
            cases.append(Hostile(f"model tags = {label}", "patch", m, {"tags": value}))
        if value != "1":
            cases.append(Hostile(f"one tag = {label}", "patch", m, {"tags": ["ok", value]}))
    return cases


def _other_cases() -> list[Hostile]:
    m = "/api/v1/models/mlp"
    return [
        Hostile(
            "NaN as top_k",
            "post",
            f"{m}/infer",
            raw=b'{"inputs": {"x": [[1, 2, 3, 4]]}, "top_k": NaN}',
        ),
        Hostile("Infinity in a version", "post", f"{m}/serve", raw=b'{"version": Infinity}'),
        Hostile("1e999 in sweep", "post", f"{m}/sweeps", raw=b'{"max_concurrency": 1e999}'),
        Hostile("a body that is not JSON", "post", "/api/v1/models", raw=b"name=mlp"),
        Hostile("JSON that is a list", "post", "/api/v1/models", raw=b"[1, 2]"),
        Hostile("JSON nested 10000 deep", "post", f"{m}/infer", raw=b"[" * 10000 + b"]" * 10000),
        Hostile(
            "a tensor nested 900 deep",
            "post",
            f"{m}/infer",
            raw=b'{"inputs": {"x": ' + b"[" * 900 + b"1" + b"]" * 900 + b"}}",
        ),
        Hostile("invalid UTF-8", "post", "/api/v1/models", raw=b'{"name": "\xff\xfe"}'),
        Hostile(
            "a real form body",
            "post",
            "/api/v1/models",
            raw=b"name=x&target=onnxruntime",
            content_type="application/x-www-form-urlencoded",
        ),
        Hostile(
            "XML as content type",
            "post",
            "/api/v1/models",
            raw=b"<name>x</name>",
            content_type="application/xml",
        ),
        Hostile("name with a slash", "post", "/api/v1/models", {"name": "a/b"}),
        Hostile("name ..", "post", "/api/v1/models", {"name": ".."}),
        Hostile("name with NUL", "post", "/api/v1/models", {"name": "a\x00b"}),
        Hostile("name with RTL override", "post", "/api/v1/models", {"name": "abc\u202egpj"}),
        Hostile("name of fullwidth letters", "post", "/api/v1/models", {"name": "\uff4d\uff4c"}),
        Hostile("name with a newline", "post", "/api/v1/models", {"name": "a\nb"}),
        Hostile("an unknown target", "post", "/api/v1/models", {"name": "n1", "target": "../x"}),
        Hostile("a path-like model in the URL", "get", "/api/v1/models/..%2F..%2Fetc"),
        Hostile("an owner who is no user", "patch", m, {"owner": "' OR 1=1 --"}),
        Hostile("a tag with markup", "patch", m, {"tags": ["<script>"]}),
        Hostile("a tag with RTL override", "patch", m, {"tags": ["abc\u202egpj"]}),
        Hostile("a thousand tags", "patch", m, {"tags": [f"t{i}" for i in range(1000)]}),
        Hostile("edit a model that does not exist", "patch", "/api/v1/models/nope", {"tags": []}),
        Hostile("retire a serving model unconfirmed", "delete", m),
        Hostile("retire with confirm=maybe", "delete", f"{m}?confirm_serving=maybe"),
        Hostile("retire with an overlong reason", "delete", f"{m}?reason={'x' * 600}"),
        Hostile("list past int64 per page", "get", "/api/v1/models?per_page=" + "9" * 30),
        Hostile("list page -1", "get", "/api/v1/models?page=-1"),
        Hostile("list sorted by a NUL", "get", "/api/v1/models?sort=%00"),
        Hostile("list in an unknown state", "get", "/api/v1/models?state=../x"),
        Hostile("a dotted model in the URL", "get", "/api/v1/models/.."),
        Hostile("a unicode model in the URL", "get", "/api/v1/models/%E2%80%AEmlp"),
        Hostile("a version past int64", "get", f"{m}/versions/99999999999999999999999"),
        Hostile(
            "someone else's upload",
            "put",
            "/api/v1/uploads/" + "a" * 32,
            raw=b"x",
            headers={"Upload-Offset": "0"},
        ),
        Hostile("a malformed upload id", "get", "/api/v1/uploads/../../etc/passwd"),
        Hostile("an upload id of 300 chars", "get", "/api/v1/uploads/" + "b" * 300),
        Hostile(
            "a version from an unknown upload", "post", f"{m}/versions", {"upload_id": "c" * 32}
        ),
        Hostile(
            "a version from a replayed upload id", "post", f"{m}/versions", {"upload_id": "REPLAY"}
        ),
        Hostile(
            "a negative Upload-Offset",
            "put",
            "/api/v1/uploads/REPLAY",
            raw=b"x",
            headers={"Upload-Offset": "-1"},
        ),
        Hostile(
            "a huge Upload-Offset",
            "put",
            "/api/v1/uploads/REPLAY",
            raw=b"x",
            headers={"Upload-Offset": "9" * 40},
        ),
        Hostile("an unknown job", "get", "/api/v1/jobs/00000000-0000-0000-0000-000000000000"),
        Hostile("a job id that is not a uuid", "get", "/api/v1/jobs/' OR 1=1 --"),
        Hostile("cancel an unknown job", "post", "/api/v1/jobs/nope/cancel", {}),
        Hostile("cancel someone else's upload", "delete", "/api/v1/uploads/REPLAY"),
        Hostile("an example id past int64", "get", f"{m}/examples/99999999999999999999999"),
        Hostile("someone else's token", "delete", "/api/v1/tokens/OTHER_TOKEN"),
        Hostile(
            "a token scope wider than the owner",
            "post",
            "/api/v1/tokens",
            {"name": "x", "scope": "admin"},
        ),
        Hostile(
            "a token that lives 1e9 days",
            "post",
            "/api/v1/tokens",
            {"name": "x", "expires_in_days": 10**9},
        ),
        Hostile(
            "infer a version that does not exist",
            "post",
            f"{m}/infer",
            {"inputs": {"x": [[1, 2, 3, 4]]}, "version": 999},
        ),
        Hostile(
            "infer an input that does not exist",
            "post",
            f"{m}/infer",
            {"inputs": {"../x": [[1, 2, 3, 4]]}},
        ),
        Hostile(
            "infer a shape of a million dims",
            "post",
            f"{m}/infer",
            {"inputs": {"x": {"data": [1], "shape": [1] * 1000}}},
        ),
        Hostile(
            "infer negative shape",
            "post",
            f"{m}/infer",
            {"inputs": {"x": {"data": [1, 2, 3, 4], "shape": [-1, 4]}}},
        ),
        Hostile(
            "infer base64 that is not",
            "post",
            f"{m}/infer",
            {"inputs": {"x": {"b64": "!!!", "shape": [1, 4]}}},
        ),
        Hostile(
            "infer an npy with a pickle",
            "post",
            f"{m}/infer",
            {"inputs": {"x": {"npy_b64": "gANjYnVpbHRpbnMKZXZhbApxAC4="}}},
        ),
        Hostile(
            "infer an image that is text",
            "post",
            f"{m}/infer",
            {"inputs": {"x": {"image_b64": "aGVsbG8="}}},
        ),
        Hostile(
            "a preprocess that is a string",
            "post",
            f"{m}/infer",
            {"inputs": {"x": [[1, 2, 3, 4]]}, "preprocess": "imagenet"},
        ),
        Hostile(
            "labels that are binary",
            "put",
            f"{m}/labels",
            raw=b"\x00\x01\x02" * 100,
            content_type="application/octet-stream",
        ),
        Hostile("try-settings of the wrong type", "put", f"{m}/try-settings", {"preprocess": 5}),
        Hostile("compare with a string", "post", f"{m}/compare", {"version": "2"}),
        Hostile("override without a reason", "post", f"{m}/versions/1/override", {}),
        Hostile("metrics with a bad range", "get", f"{m}/metrics?range=1000y"),
        Hostile("metrics range injection", "get", f"{m}/metrics?range=1h%27%3B--"),
        Hostile(
            "an Upload-Offset of 60 KiB",
            "put",
            "/api/v1/uploads/REPLAY",
            raw=b"x",
            headers={"Upload-Offset": "7" * 60_000},
        ),
        Hostile(
            "an Authorization scheme of garbage",
            "get",
            "/api/v1/models",
            headers={"Authorization": "Basic " + "z" * 5000},
        ),
        Hostile("a method the endpoint lacks", "delete", "/api/v1/health"),
        Hostile("PATCH on serve", "patch", f"{m}/serve", {"version": 1}),
        Hostile("a metrics range of 20 000 chars", "get", f"{m}/metrics?range=" + "x" * 20_000),
        Hostile("the tar of a package gone from disk", "get", f"{m}/versions/1/package.tar"),
        Hostile(
            "the tar of a version past int64",
            "get",
            f"{m}/versions/99999999999999999999999/package.tar",
        ),
        Hostile("the tar of a dotted model", "get", "/api/v1/models/%2E%2E/versions/1/package.tar"),
        Hostile("POST to a package tar", "post", f"{m}/versions/1/package.tar", {}),
        Hostile("a canary of steps that go down", "post", f"{m}/canary", {
            "version": 1, "steps": [90, 10, 100], "step_seconds": 30, "max_error_rate": 0.01,
            "max_p99_ratio": 1.5}),
        Hostile("a canary with steps as a string", "post", f"{m}/canary", {
            "version": 1, "steps": "10,100", "step_seconds": 30, "max_error_rate": 0.01,
            "max_p99_ratio": 1.5}),
        Hostile("a canary with an infinite ratio", "post", f"{m}/canary",
                raw=b'{"version": 1, "steps": [10, 100], "step_seconds": 30, '
                    b'"max_error_rate": 0.01, "max_p99_ratio": Infinity}'),
        Hostile("a canary of a million steps", "post", f"{m}/canary", {
            "version": 1, "steps": list(range(1, 101)) * 10_000, "step_seconds": 30,
            "max_error_rate": 0.01, "max_p99_ratio": 1.5}),
        Hostile("a canary with no body", "post", f"{m}/canary"),
        Hostile("promote with no canary", "post", f"{m}/canary/promote"),
        Hostile("abort with no canary", "post", f"{m}/canary/abort"),
        Hostile("the canary of a dotted model", "get", "/api/v1/models/%2E%2E/canary"),
    ]  # fmt: skip


CASES = _json_cases() + _other_cases()


def _counts() -> dict[str, int]:
    tables = (Model, Version, Job, Event, TryExample, Canary)
    return {m.__name__: m.objects.count() for m in tables} | {
        "live tokens": ApiToken.objects.filter(revoked=None).count()
    }


@pytest.fixture
def world(operator, viewer, settings, tmp_path) -> Callable[[Hostile], object]:  # type: ignore[no-untyped-def]
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    settings.TRITON_URL = settings.TRITON_GRPC_URL = "127.0.0.1:9"  # nothing listens
    model = Model.objects.create(name="mlp", created_by=operator, serving_version=1)
    Version.objects.create(
        model=model, number=1, status=Version.Status.READY, source_filename="m.onnx",
        source_sha256="0" * 64, source_size=1, signature=SIG, verification={"status": "failed"},
    )  # fmt: skip
    other_example = TryExample.objects.create(
        model=model, name="theirs", inputs={}, created_by=viewer
    )
    other_token, _ = ApiToken.issue(viewer)
    from webapp.registry.catalogue.storage import get_uploads

    replay = get_uploads().create("m.onnx", 10, owner=str(viewer.pk))  # someone else's upload
    client = Client(raise_request_exception=False)
    key = token_for(operator)

    def send(case: Hostile):  # type: ignore[no-untyped-def]
        path = case.path.replace("OTHER_EXAMPLE", str(other_example.pk))
        path = path.replace("OTHER_TOKEN", str(other_token.pk)).replace("REPLAY", replay.id)
        body = case.body if case.raw is None else None
        data = case.raw if case.raw is not None else (json.dumps(body) if body is not None else "")
        if body is not None and "REPLAY" in json.dumps(body):
            data = json.dumps(body).replace("REPLAY", replay.id)
        extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in (case.headers or {}).items()}
        extra.setdefault("HTTP_AUTHORIZATION", f"Token {key}")
        return getattr(client, case.method)(
            path, data=data, content_type=case.content_type, **extra
        )

    return send


def test_there_are_at_least_80_hostile_requests() -> None:
    print(f"\n{len(CASES)} hostile requests")
    assert len(CASES) >= 80


@pytest.mark.parametrize("case", CASES, ids=[c.why for c in CASES])
def test_a_hostile_request_gets_a_4xx_and_changes_nothing(world, case: Hostile) -> None:  # type: ignore[no-untyped-def]
    before = _counts()
    response = world(case)
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    if response.get("Content-Type", "").startswith("application/json"):
        body = response.json()
        assert isinstance(body.get("error"), str) and isinstance(body.get("code"), str)
    assert _counts() == before

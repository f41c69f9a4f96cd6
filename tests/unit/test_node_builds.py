"""Host-bound builds on nodes (docs/nodes.md#host-bound-builds): where a build goes, and the two
calls a node makes for a build it runs (fetch the source, send the artifact), with its token only.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from model_store.package_tar.files import extract_files, write_files
from tests.fakes.cann import make_fake_toolkit
from tests.fixtures.nodes import NPU, Node_, report
from webapp.nodes import build_routing as routing
from webapp.nodes.build_routing import build_status as target_status
from webapp.nodes.models import HostReport, Node
from webapp.registry.build import state_file as job_state
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs.models import Job

pytestmark = pytest.mark.django_db

SOC = "Ascend310P3"


@pytest.fixture(autouse=True)
def no_toolkit_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """This worker has no CANN unless a test says so."""
    for key in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ATC_PATH"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("ASCEND_ROOT", "/nonexistent-ascend")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")


def joined(name: str, *, npus: list[dict[str, Any]] | None = None, acl: bool = True) -> Node_:
    node = Node_(name)
    body = report(name)
    body["devices"]["npus"] = [NPU] if npus is None else npus
    body["targets"]["acl"]["available"] = acl
    answer = node.report(body)
    assert answer.status_code == 200, answer.content
    return node


# --------------------------------------------------------------------------- where a build goes


def test_a_build_needing_cann_goes_to_the_node_with_the_toolkit_and_the_soc() -> None:
    joined("a", npus=[], acl=True)  # toolkit, no NPU
    joined("b")  # toolkit and a 310P3
    route = routing.build_route("acl", {"soc_version": SOC})
    assert (route.node, route.verifies) == ("b", True)
    assert "b" in route.why


def test_without_an_npu_of_that_soc_a_node_with_the_toolkit_still_compiles() -> None:
    joined("a", npus=[], acl=True)
    route = routing.build_route("acl", {"soc_version": "Ascend910B1"})
    assert (route.node, route.verifies) == ("a", False)


def test_the_cpu_target_builds_anywhere() -> None:
    assert routing.build_route("onnxruntime", {}).node is None


def test_no_node_means_a_clear_refusal_naming_the_soc_and_each_node() -> None:
    joined("b", npus=[], acl=False)  # a node without CANN
    with pytest.raises(routing.NoBuildHost) as refused:
        routing.build_route("acl", {"soc_version": SOC})
    message = str(refused.value.message)
    assert refused.value.code == "cann_missing"
    assert SOC in message and "b: up" in message and "no CANN" not in message[:40]


def test_down_and_draining_nodes_take_no_builds(settings) -> None:  # type: ignore[no-untyped-def]
    joined("b")
    Node.objects.filter(name="b").update(draining=True)
    with pytest.raises(routing.NoBuildHost):
        routing.build_route("acl", {"soc_version": SOC})
    Node.objects.filter(name="b").update(draining=False)
    old = timezone.now() - timedelta(seconds=10 * settings.HOST_PROBE_SECONDS)
    HostReport.objects.filter(node="b").update(received=old)
    with pytest.raises(routing.NoBuildHost):
        routing.build_route("acl", {"soc_version": SOC})


def test_a_worker_with_the_toolkit_builds_itself_unless_a_node_has_the_npus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in make_fake_toolkit(tmp_path / "Ascend").items():
        monkeypatch.setenv(key, value)
    route = routing.build_route("acl", {"soc_version": SOC})
    assert route.node is None
    joined("b")
    assert routing.build_route("acl", {"soc_version": SOC}).node == "b"


def test_the_target_shows_as_available_when_a_node_builds_it() -> None:
    assert target_status("acl")["available"] is False
    joined("b")
    status = target_status("acl")
    assert status["available"] is True and "node b" in status["reason"]


# --------------------------------------------------------------------------- the node's calls


@pytest.fixture
def building_on_b(operator) -> Job:  # type: ignore[no-untyped-def]
    model = Model.objects.create(name="mlp", target="acl", created_by=operator)
    version = Version.objects.create(
        model=model, number=1, source_filename="m.onnx", source_size=10
    )
    job = Job.objects.create(
        kind=Job.Kind.COMPILE, model=model, version=version, state=Job.State.RUNNING,
        step="compile", params={"build_node": "b"},
    )  # fmt: skip
    work = get_store().work_dir(job.uuid.hex)
    work.mkdir(parents=True, exist_ok=True)
    (work / "src").mkdir()
    (work / "src" / "model.onnx").write_bytes(b"onnx bytes")
    write_files({"model.onnx": work / "src" / "model.onnx"}, work / "node-source.tar")
    return job


def _source(job: Job, name: str = "b") -> str:
    return f"/api/v1/nodes/{name}/builds/{job.uuid.hex}/source.tar"


def _artifact(job: Job, name: str = "b") -> str:
    return f"/api/v1/nodes/{name}/builds/{job.uuid.hex}/artifact.tar"


def test_the_building_node_fetches_the_source_with_its_hash(building_on_b, tmp_path) -> None:
    node = Node_("b")
    answer = node.call("get", _source(building_on_b))
    assert answer.status_code == 200
    body = b"".join(answer.streaming_content)
    assert answer["X-Content-SHA256"] == hashlib.sha256(body).hexdigest()
    (tmp_path / "s.tar").write_bytes(body)
    assert extract_files(tmp_path / "s.tar", tmp_path / "out", answer["X-Content-SHA256"]) == [
        "model.onnx"
    ]


def test_only_the_building_node_gets_the_source(building_on_b, api) -> None:  # type: ignore[no-untyped-def]
    other = Node_("c")
    assert other.call("get", _source(building_on_b, "c")).status_code == 404  # not c's build
    assert other.call("get", _source(building_on_b, "b")).status_code == 403  # not c's URL
    assert api("get", _source(building_on_b)).status_code == 403  # a person's token
    Job.objects.filter(pk=building_on_b.pk).update(state=Job.State.FAILED)
    assert Node_("b").call("get", _source(building_on_b)).status_code == 404  # over


def _tar(members: dict[str, bytes], *, link: str | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(info)
    return out.getvalue()


def _put(node: Node_, job: Job, body: bytes, sha256: str | None = None) -> Any:
    return node.call(
        "put", _artifact(job), body, content_type="application/x-tar",
        HTTP_X_CONTENT_SHA256=sha256 or hashlib.sha256(body).hexdigest(),
    )  # fmt: skip


def test_the_artifact_comes_back_checked_and_unpacked(building_on_b) -> None:
    node = Node_("b")
    body = _tar({"model.om": b"OM" * 100})
    answer = _put(node, building_on_b, body)
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "received": True, "sha256": hashlib.sha256(body).hexdigest(), "files": ["model.om"],
    }  # fmt: skip
    work = get_store().work_dir(building_on_b.uuid.hex)
    assert (work / "node-build" / "model.om").read_bytes() == b"OM" * 100
    assert job_state.read(get_store(), building_on_b)["node_artifact"]["files"] == ["model.om"]


@pytest.mark.parametrize(
    ("members", "link", "code"),
    [
        ({"../escape.om": b"x"}, None, "invalid_artifact"),
        ({"/abs.om": b"x"}, None, "invalid_artifact"),
        ({"model.om": b"x"}, "evil", "invalid_artifact"),
    ],
)
def test_a_hostile_artifact_tar_is_refused_and_leaves_nothing(
    building_on_b, members, link, code
) -> None:
    answer = _put(Node_("b"), building_on_b, _tar(members, link=link))
    assert answer.status_code == 400 and answer.json()["code"] == code
    work = get_store().work_dir(building_on_b.uuid.hex)
    assert not (work / "node-build").exists()
    assert not (work.parent / "escape.om").exists()


def test_an_artifact_whose_hash_differs_is_refused(building_on_b) -> None:
    answer = _put(Node_("b"), building_on_b, _tar({"model.om": b"x"}), sha256="0" * 64)
    assert answer.status_code == 400 and "SHA-256" in answer.json()["error"]
    answer = _put(Node_("b"), building_on_b, _tar({"model.om": b"x"}), sha256="nothex")
    assert answer.status_code == 400


# --------------------------------------------------------------------------- the files tar


def test_a_files_tar_is_deterministic_and_round_trips(tmp_path: Path) -> None:
    (tmp_path / "a.onnx").write_bytes(b"a" * 10)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "weights.bin").write_bytes(b"w" * 1000)
    files = {"a.onnx": tmp_path / "a.onnx", "w/weights.bin": tmp_path / "w" / "weights.bin"}
    one = write_files(files, tmp_path / "1.tar")
    two = write_files(files, tmp_path / "2.tar")
    assert one.sha256 == two.sha256 and one.size == (tmp_path / "1.tar").stat().st_size
    names = extract_files(one.path, tmp_path / "out", one.sha256)
    assert names == ["a.onnx", "w/weights.bin"]
    assert (tmp_path / "out" / "w" / "weights.bin").read_bytes() == b"w" * 1000

"""``manage.py adopt``: the dry run changes nothing; adopting copies whole versions, once."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.fixtures.team_repository import build_team_repository
from tests.fixtures.triton import mlp_onnx_bytes
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.storage import get_store
from webapp.registry.jobs.models import Event, Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def repo(tmp_path: Path, settings) -> Path:  # type: ignore[no-untyped-def]
    settings.MODEL_STORE_ROOT = tmp_path / "store"
    return build_team_repository(tmp_path / "team")


def adopt(*args: str) -> str:
    out = io.StringIO()
    call_command("adopt", *args, stdout=out)
    return out.getvalue()


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_dry_run_prints_the_table_and_changes_nothing(repo: Path) -> None:
    before = tree(repo)
    out = adopt(str(repo), "--dry-run")
    assert "dry run: nothing changes" in out
    assert "classifier" in out and "adopt v1,2 as classifier" in out
    assert "broken" in out and "cannot adopt" in out
    assert "Triton's environment" in out  # what the hub cannot do for the Python model
    assert Model.objects.count() == 0 and not any(get_store().sources_dir.iterdir())
    assert tree(repo) == before

    data = json.loads(adopt(str(repo), "--dry-run", "--json"))
    plans = {m["directory"]: m["plan"]["action"] for m in data["models"]}
    assert plans["broken"] == "not_adoptable" and plans["doubler"] == "adopt"


def test_adopting_copies_versions_once(repo: Path, admin_user) -> None:  # type: ignore[no-untyped-def]
    before = tree(repo)
    out = adopt(str(repo), "--user", admin_user.username, "--only", "classifier",
                "--only", "doubler", "--only", "ge_one_file")  # fmt: skip
    assert "classifier v2: adopted (verification passed)" in out
    assert "doubler v1: adopted (verification adopted)" in out
    assert tree(repo) == before  # copied, never moved or edited

    store = get_store()
    classifier = Model.objects.get(name="classifier")
    assert classifier.target == "onnxruntime"
    v2 = classifier.versions.get(number=2)
    assert v2.status == Version.Status.READY and v2.publishable
    assert (store.version_dir("classifier", 2) / "model.onnx").read_bytes() == (
        repo / "classifier" / "2" / "model.onnx"
    ).read_bytes()
    assert (store.source_dir("classifier", 2) / "adopted.json").is_file()

    doubler = Model.objects.get(name="doubler")
    assert doubler.target == "external"
    d1 = doubler.versions.get(number=1)
    assert d1.status == Version.Status.READY and not d1.publishable  # needs the override
    assert (store.package_dir("doubler", 1) / "1" / "model.py").is_file()

    ge = Model.objects.get(name="ge_one_file")
    assert ge.target == "npu_ge"
    assert not store.version_dir("ge_one_file", 1).exists()  # swapped in only when served
    assert [p.name for p in (store.package_dir("ge_one_file", 1) / "1").iterdir()] == ["model.onnx"]
    assert Event.objects.filter(kind="model.adopted").count() == 3

    again = adopt(str(repo), "--only", "classifier", "--only", "doubler")
    assert "Nothing to adopt" in again and "already in the hub" in again
    assert Version.objects.count() == 4 and Job.objects.filter(kind="adopt").count() == 4


def test_a_clash_is_skipped_unless_renamed(repo: Path, admin_user) -> None:  # type: ignore[no-untyped-def]
    Model.objects.create(name="classifier", target="onnxruntime")
    out = adopt(str(repo), "--dry-run", "--only", "classifier")
    assert "CLASH: skipped" in out and "not overwritten" in out
    out = adopt(str(repo), "--only", "classifier", "--rename", "classifier=team_classifier")
    assert "team_classifier v1: adopted" in out
    assert Model.objects.get(name="classifier").versions.count() == 0


def test_bad_input_is_a_clear_error(repo: Path) -> None:
    with pytest.raises(CommandError, match="not a directory"):
        adopt("/no/such/place", "--dry-run")
    with pytest.raises(CommandError, match="old=new"):
        adopt(str(repo), "--rename", "nothing")
    with pytest.raises(CommandError, match="No model folder"):
        adopt(str(repo), "--dry-run", "--rename", "ghost=spirit")


def test_a_file_changed_after_the_scan_fails_its_version_whole(repo: Path, admin_user) -> None:  # type: ignore[no-untyped-def]
    from webapp.registry.catalogue.adopt import start_adoption
    from webapp.registry.catalogue.adopt_work import run_adopt_job

    # Queued, not sent: the test's transaction never commits, so no worker is asked.
    _, [job] = start_adoption(path=repo, user=admin_user, chosen=["bare_onnx"])
    (repo / "bare_onnx" / "1" / "model.onnx").write_bytes(b"changed after the dry run")
    run_adopt_job(job.pk)
    version = Version.objects.get(model__name="bare_onnx")
    assert version.status == Version.Status.FAILED and "changed since the scan" in version.error
    store = get_store()
    assert not store.source_dir("bare_onnx", 1).exists()
    assert not store.version_dir("bare_onnx", 1).exists()
    # Adopting again tries the failed version again, now that the file is whole.
    (repo / "bare_onnx" / "1" / "model.onnx").write_bytes(mlp_onnx_bytes(seed=3))
    out = adopt(str(repo), "--only", "bare_onnx")
    assert "bare_onnx v1: adopted (verification passed)" in out
    assert Version.objects.get(model__name="bare_onnx").status == Version.Status.READY

"""Scanning an existing Triton repository and planning its adoption (model_store.adopt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_store.adopt import (
    ExistingModel,
    InvalidRename,
    ScanRefused,
    parse_renames,
    plan_adoption,
    scan_repository,
)
from model_store.config import VERBATIM_HEADER, parse_pbtxt, render_pbtxt
from tests.fixtures.team_repository import build_team_repository


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return build_team_repository(tmp_path / "team")


def codes(problems: object) -> set[str]:
    return {p.code for p in problems}  # type: ignore[attr-defined]


def test_every_model_directory_is_understood(repo: Path) -> None:
    scan = scan_repository(repo)
    found = {m.directory: m for m in scan.models}
    assert sorted(found) == ["bare_onnx", "broken", "classifier", "doubler", "ge_one_file",
                             "pipeline"]  # fmt: skip
    assert {p.code for p in scan.problems} == {"not_a_model"}  # scripts/ (README is a file)

    classifier = found["classifier"]
    assert (classifier.target, classifier.backend) == ("onnxruntime", "onnxruntime")
    assert [v.number for v in classifier.versions] == [1, 2]
    assert classifier.versions[0].digest != classifier.versions[1].digest
    assert classifier.adoptable and classifier.signature["inputs"][0]["name"] == "x"
    assert parse_pbtxt(classifier.config_text).max_batch_size == 8

    bare = found["bare_onnx"]
    assert (bare.target, bare.config_origin) == ("onnxruntime", "generated")
    assert "generated_config" in codes(bare.problems)

    ge = found["ge_one_file"]
    assert ge.target == "npu_ge" and ge.adoptable
    assert "ge_several_model_files" in codes(ge.problems)  # backup.onnx beside version 1
    assert "not_copied" in codes(ge.problems)

    doubler = found["doubler"]
    assert (doubler.target, doubler.backend) == ("external", "python")
    assert doubler.config_text.startswith(VERBATIM_HEADER)
    assert any("Triton's environment" in line for line in doubler.limits)
    assert doubler.signature["inputs"] == [
        {"name": "x", "dtype": "TYPE_FP32", "numpy": "float32", "dims": [-1, 3]}
    ]

    pipeline = found["pipeline"]
    assert (pipeline.target, pipeline.composes) == ("external", ["classifier", "doubler"])
    assert pipeline.adoptable  # its empty version folder is how ensembles are

    broken = found["broken"]
    assert not broken.adoptable and "broken_config" in codes(broken.problems)
    assert "line 4" in next(p.message for p in broken.problems if p.code == "broken_config")


def test_an_external_config_is_served_as_written(repo: Path) -> None:
    pipeline = scan_repository(repo).model("pipeline")
    assert pipeline is not None
    cfg = parse_pbtxt(pipeline.config_text)
    cfg.version_policy_specific = [1]
    text = render_pbtxt(cfg)
    # The ensemble's steps survive, and no instance_group is added: the team wrote none.
    assert "ensemble_scheduling" in text and "instance_group" not in text
    assert "specific" in text and text.startswith(VERBATIM_HEADER)


def test_symlinks_out_of_the_repository_are_not_followed(repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("no")
    (repo / "doubler" / "1" / "leak.txt").symlink_to(secret)
    (repo / "elsewhere").symlink_to(tmp_path)
    (repo / "doubler" / "1" / "helper.py").symlink_to(repo / "doubler" / "1" / "model.py")
    scan = scan_repository(repo)
    doubler = scan.model("doubler")
    assert doubler is not None
    # A link that stays inside the repository is read (its target's content is copied).
    assert [f.relpath for f in doubler.versions[0].files] == ["helper.py", "model.py"]
    assert any("outside the repository" in p.message for p in doubler.versions[0].problems)
    assert scan.model("elsewhere") is None


def test_refuses_what_is_no_repository(tmp_path: Path) -> None:
    with pytest.raises(ScanRefused, match="absolute"):
        scan_repository(Path("relative/path"))
    with pytest.raises(ScanRefused, match="not a directory"):
        scan_repository(tmp_path / "missing")
    build_team_repository(tmp_path / "big")
    with pytest.raises(ScanRefused, match="more than"):
        scan_repository(tmp_path / "big", max_entries=5)


def test_plan_adopts_what_it_can_and_says_why_not(repo: Path) -> None:
    plan = plan_adoption(scan_repository(repo), {})
    actions = {m.directory: (m.action, m.versions) for m in plan.models}
    assert actions == {
        "bare_onnx": ("adopt", [1]),
        "broken": ("not_adoptable", []),
        "classifier": ("adopt", [1, 2]),
        "doubler": ("adopt", [1]),
        "ge_one_file": ("adopt", [1]),
        "pipeline": ("adopt", [1]),
    }


def test_plan_clash_skip_rename_and_idempotence(repo: Path) -> None:
    scan = scan_repository(repo)
    classifier = scan.model("classifier")
    assert classifier is not None
    digests = frozenset(v.digest for v in classifier.versions)
    other = ExistingModel("onnxruntime", frozenset({"x" * 64}), frozenset({1}))
    plan = plan_adoption(scan, {"classifier": other}, chosen=["classifier"])
    by_dir = {m.directory: m for m in plan.models}
    assert by_dir["classifier"].action == "clash"
    assert "not overwritten" in by_dir["classifier"].reasons[0]
    assert by_dir["doubler"].action == "not_chosen"

    renamed = plan_adoption(
        scan, {"classifier": other}, chosen=["classifier"], renames={"classifier": "clf2"}
    )
    assert [(m.hub_name, m.action) for m in renamed.models if m.copies] == [("clf2", "adopt")]

    same = ExistingModel("onnxruntime", digests, frozenset({1, 2}), str(scan.root))
    again = plan_adoption(scan, {"classifier": same}, chosen=["classifier"])
    assert again.models[2].action == "already_adopted" and not again.copying()

    older = ExistingModel("onnxruntime", frozenset({classifier.versions[0].digest}),
                          frozenset({1}), str(scan.root))  # fmt: skip
    more = plan_adoption(scan, {"classifier": older}, chosen=["classifier"])
    assert (more.models[2].action, more.models[2].versions) == ("add_versions", [2])


def test_an_ensemble_brings_the_models_it_composes(repo: Path) -> None:
    scan = scan_repository(repo)
    plan = plan_adoption(scan, {}, chosen=["pipeline"])
    assert sorted(m.directory for m in plan.copying()) == ["classifier", "doubler", "pipeline"]
    blocked = plan_adoption(scan, {}, chosen=["pipeline"], renames={"doubler": "twice"})
    pipeline = next(m for m in blocked.models if m.directory == "pipeline")
    assert pipeline.action == "not_adoptable" and "renamed" in pipeline.reasons[-1]
    other = ExistingModel("onnxruntime", frozenset(), frozenset())
    clashing = plan_adoption(scan, {"classifier": other})
    pipeline = next(m for m in clashing.models if m.directory == "pipeline")
    assert pipeline.action == "not_adoptable" and "another model" in pipeline.reasons[-1]


def test_renames_are_checked() -> None:
    assert parse_renames(["a=b"]) == {"a": "b"}
    with pytest.raises(InvalidRename):
        parse_renames(["nothing"])
    with pytest.raises(Exception, match="not allowed"):
        parse_renames(["a=../etc"])


def test_scanning_changes_nothing(repo: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in repo.rglob("*")}
    scan_repository(repo)
    assert {p: p.stat().st_mtime_ns for p in repo.rglob("*")} == before

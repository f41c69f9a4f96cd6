"""deploy/images/build.py (make compose-images): which settings it writes and which mirrors it
takes, without Docker (its builds run in the compose suite)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hub_images", ROOT / "deploy/images/build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_first_env_never_names_an_ascend_triton() -> None:
    """The Ascend layout reads ASCEND_TRITON_IMAGE (default: the recipe's tag); a first .env
    names the CPU Triton only, so it can never point the Ascend layout at the CPU image."""
    builder = _builder()
    settings = builder.env_settings(dict(builder.LOCAL_IMAGES))
    assert settings["TRITON_IMAGE"] == "triton-model-hub/triton-cpu:latest"
    assert not any("ASCEND" in name for name in settings)
    assert "triton-ascend" not in "".join(settings.values())


@pytest.mark.parametrize("mirrored", [False, True])
def test_the_registry_path_takes_mirrors_for_the_base_image_and_pypi(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mirrored: bool
) -> None:
    builder = _builder()
    builds: list[tuple[str, dict[str, str]]] = []
    monkeypatch.setattr(builder, "check_engine", lambda: None)
    monkeypatch.setattr(builder, "build", lambda tag, dockerfile, context, **args: builds.append(
        (tag, args)))  # fmt: skip
    monkeypatch.setattr(builder, "build_ascend_standin", lambda *a: builds.append(("standin", {
        "base": a[1]})))  # fmt: skip
    for name in ("HUB_PYTHON_IMAGE", "PIP_INDEX_URL", "ASCEND_BASE_IMAGE", *builder.LOCAL_IMAGES):
        monkeypatch.delenv(name, raising=False)
    if mirrored:
        monkeypatch.setenv("HUB_PYTHON_IMAGE", "mirror.example/library/python:3.11-slim-bookworm")
        monkeypatch.setenv("PIP_INDEX_URL", "https://pypi.mirror.example/simple")
        monkeypatch.setenv("ASCEND_BASE_IMAGE", "mirror.example/library/ubuntu:22.04")
    assert builder.main(["--from", "registry", "--env-file", str(tmp_path / ".env")]) == 0
    hub = dict(builds)["triton-model-hub:latest"]
    if mirrored:
        assert hub == {"PYTHON_IMAGE": "mirror.example/library/python:3.11-slim-bookworm",
                       "PIP_INDEX_URL": "https://pypi.mirror.example/simple"}  # fmt: skip
        assert dict(builds)["standin"] == {"base": "mirror.example/library/ubuntu:22.04"}
    else:
        assert hub == {"PYTHON_IMAGE": "python:3.11-slim-bookworm"}
        assert dict(builds)["standin"] == {"base": "ubuntu:22.04"}

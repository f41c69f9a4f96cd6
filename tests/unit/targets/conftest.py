"""Fixtures for the target tests: builds in tmp dirs, a CANN-free env, the fake CANN and pyACL."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from model_store.onnx_info import inspect_onnx
from model_store.targets import BuildContext, BuildResult, Target
from tests.fakes.cann import fake_cann

__all__ = ["fake_cann"]  # re-exported so the tests here can use the fixture by name

Build = Callable[..., tuple[BuildResult, list[str]]]


@pytest.fixture
def no_cann(tmp_path: Path) -> dict[str, str]:
    """An environment in which no ATC can be found (empty PATH dir, no CANN variables)."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    return {"PATH": str(empty)}


@pytest.fixture
def build(tmp_path: Path, no_cann: dict[str, str]) -> Build:
    """``build(target, source, options, env=None, name="work") -> (BuildResult, log lines)``."""

    def run(
        target: Target,
        source: Path,
        options: dict[str, Any] | None = None,
        *,
        env: dict[str, str] | None = None,
        name: str = "work",
        cancelled: Callable[[], bool] = lambda: False,
    ) -> tuple[BuildResult, list[str]]:
        info = inspect_onnx(source)
        parsed = target.parse_options(options or {}, info=info)
        workdir = tmp_path / name
        workdir.mkdir()
        lines: list[str] = []
        ctx = BuildContext(
            source=source,
            workdir=workdir,
            info=info,
            options=parsed,
            log=lines.append,
            cancelled=cancelled,
            env=env if env is not None else no_cann,
        )
        return target.build(ctx), lines

    return run


@pytest.fixture
def fake_acl(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The fake pyACL importable as ``acl``, fresh, with the backend's process flags reset."""
    from model_store.backends.acl import model as backend

    module = importlib.import_module("tests.fakes.acl")
    module._fake.reset()
    monkeypatch.setitem(sys.modules, "acl", module)
    monkeypatch.setattr(backend, "_initialized_by_us", set())
    monkeypatch.setattr(backend, "_open_sessions", 0)
    return module


@pytest.fixture
def without_acl(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes ``import acl`` fail, as on a worker without CANN."""
    monkeypatch.setitem(sys.modules, "acl", None)

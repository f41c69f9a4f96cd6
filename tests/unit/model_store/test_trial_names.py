"""Trial model names never collide with hub models, and crash leftovers are swept.

The load/unload behaviour itself runs against the real Triton in
tests/integration/test_trial_model.py; here only what needs no server.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from model_store.errors import InvalidModelName
from model_store.names import validate_model_name
from model_store.serving import is_trial_name, remove_stale_trials, trial_name
from model_store.store import ModelStore


class _Index:
    """Stands in for Triton's repository API: nothing is loaded; unloads are recorded."""

    def __init__(self) -> None:
        self.unloaded: list[str] = []

    def load(self, name: str, config: dict[str, Any] | None = None) -> None:
        raise AssertionError("a sweep never loads")

    def unload(self, name: str, unload_dependents: bool = False) -> None:
        self.unloaded.append(name)

    def repository_index(self) -> list[dict[str, str]]:
        return []


@pytest.mark.parametrize("base", ["resnet", "a" * 64, "x/../y", "ünïcode", ""])
def test_trial_names_are_fresh_and_never_hub_model_names(base: str) -> None:
    first, second = trial_name(base), trial_name(base)
    assert first != second
    assert is_trial_name(first)
    assert "/" not in first and ".." not in first and len(first) <= 64
    with pytest.raises(InvalidModelName):
        validate_model_name(first)


def test_hub_names_are_not_trial_names() -> None:
    assert not is_trial_name("resnet")
    assert not is_trial_name("trial-resnet")


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


def test_remove_stale_trials_removes_only_old_trials(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    store.ensure_layout()
    old = store.repository_dir / trial_name("resnet")
    young = store.repository_dir / trial_name("resnet")
    hub = store.repository_dir / "resnet"
    for path in (old, young, hub):
        (path / "1").mkdir(parents=True)
    staged = store.root / "staging" / f"{trial_name('resnet')}-0123456789abcdef"
    staged.mkdir(parents=True)
    for path in (old, hub, staged):
        _age(path, 3600)
    runtime = _Index()

    removed = remove_stale_trials(store, runtime, older_than_s=600)

    assert removed == [old.name]
    assert runtime.unloaded == [old.name]
    assert not old.exists() and not staged.exists()
    assert young.exists() and hub.exists()
    assert not list((store.root / "retired").iterdir())

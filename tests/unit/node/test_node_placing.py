"""``node.place`` before Triton: its arguments are checked as if a stranger sent them, and the
package comes over HTTP, must have the hash asked for, and lands whole or not at all."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from model_store import spawn
from model_store.package_tar import PackageTarMismatch, package_tar
from model_store.store import ModelStore
from tests.unit.model_store.test_package_tar import _packaged
from tests.unit.node.conftest import ContractHub
from workers.node.hub_client import HubClient
from workers.node.placing import (
    PlacementRefused,
    _from_version,
    checked_request,
    fetch_package,
    load_beside,
    placed_hash,
)
from workers.node.reporting import Heartbeat
from workers.node.settings import read_settings

TOKEN = "node-token-0123456789abcdef"
SHA = "ab" * 32
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("model", "version", "sha256", "target", "message"),
    [
        ("../etc", 1, SHA, None, "model name"),
        ("mlp/x", 1, SHA, None, "model name"),
        ("mlp", 0, SHA, None, "version"),
        ("mlp", True, SHA, None, "whole number"),
        ("mlp", "2", SHA, None, "whole number"),
        ("mlp", 1, "abc", None, "64 hexadecimal digits"),
        ("mlp", 1, ["a"], None, "64 hexadecimal digits"),
        ("mlp", 1, SHA, "cuda", "no target"),
    ],
)
def test_bad_arguments_are_refused(
    model: object, version: object, sha256: object, target: object, message: str
) -> None:
    with pytest.raises(PlacementRefused, match=message):
        checked_request(model, version, sha256, target)


def test_good_arguments_pass_normalised() -> None:
    request = checked_request("mlp", 3, SHA.upper(), "onnxruntime")
    assert (request.model, request.version, request.sha256, request.target) == (
        "mlp", 3, SHA, "onnxruntime",
    )  # fmt: skip


def _serving_tar(hub: ContractHub, tmp_path: Path) -> str:
    """The hub's tar of mlp v2 served at its contract path; its SHA-256."""
    tar = package_tar(_packaged(tmp_path / "hub-store"), "mlp", 2)
    body = tar.path.read_bytes()
    hub.routes[("GET", "/api/v1/models/mlp/versions/2/package.tar")] = lambda seen: (
        200, {"X-Content-SHA256": tar.sha256}, body,
    )  # fmt: skip
    return tar.sha256


def test_the_package_comes_over_http_and_lands_whole(
    contract_hub: ContractHub, tmp_path: Path
) -> None:
    sha = _serving_tar(contract_hub, tmp_path)
    node = ModelStore(tmp_path / "node-store")
    request = checked_request("mlp", 2, sha)

    size = fetch_package(node, HubClient(contract_hub.url, TOKEN), request)

    package = node.package_dir("mlp", 2)
    assert size > 0 and (package / "config.pbtxt").is_file()
    assert sorted(p.name for p in (package / "2").iterdir()) == ["model.onnx", "model.onnx.data"]
    assert placed_hash(node, request) == sha
    assert not list((node.root / "downloads").iterdir())
    assert not list((node.root / "staging").iterdir())


def test_a_package_with_another_hash_is_refused_and_nothing_lands(
    contract_hub: ContractHub, tmp_path: Path
) -> None:
    _serving_tar(contract_hub, tmp_path)
    node = ModelStore(tmp_path / "node-store")

    with pytest.raises(PackageTarMismatch):
        fetch_package(node, HubClient(contract_hub.url, TOKEN), checked_request("mlp", 2, SHA))

    assert not node.package_dir("mlp", 2).exists()
    assert not list((node.root / "downloads").iterdir())


def _settings(tmp_path: Path, hub_url: str) -> dict[str, str]:
    return {
        "NODE_NAME": "b", "HUB_URL": hub_url, "NODE_TOKEN": TOKEN,
        "REDIS_URL": "redis://127.0.0.1:1/0", "TRITON_URL": "127.0.0.1:1",
        "TRITON_GRPC_URL": "127.0.0.1:2", "TRITON_METRICS_URL": "127.0.0.1:3",
        "NODE_REPOSITORY": str(tmp_path / "store" / "repository"), "NODE_LABELS": "zone=a",
        "PATH": os.environ.get("PATH", ""),
    }  # fmt: skip


def test_the_heartbeat_posts_the_host_report_with_who_the_node_is(
    contract_hub: ContractHub, tmp_path: Path
) -> None:
    contract_hub.routes[("POST", "/api/v1/nodes/b/reports")] = lambda seen: (
        200, {}, json.dumps({"accepted": True, "protocol": 1, "report_every_s": 7}).encode(),
    )  # fmt: skip
    settings = read_settings(_settings(tmp_path, contract_hub.url))
    heartbeat = Heartbeat(settings, HubClient(settings.hub_url, settings.token))

    heartbeat.beat()

    assert heartbeat.last == "accepted" and heartbeat.every_s == 7
    report = json.loads(contract_hub.seen[0].body)
    assert {"protocol", "host", "devices", "targets", "cann", "diagnostics"} <= set(report)
    assert report["node"]["name"] == "b" and report["node"]["labels"] == {"zone": "a"}
    assert report["node"]["triton"] == {
        "http": "127.0.0.1:1", "grpc": "127.0.0.1:2", "metrics": "127.0.0.1:3",
    }  # fmt: skip
    assert report["node"]["hub_version"] not in ("", "unknown")
    assert TOKEN not in contract_hub.seen[0].body.decode()


def test_a_refused_node_keeps_beating_and_says_why(
    contract_hub: ContractHub, tmp_path: Path
) -> None:
    contract_hub.routes[("POST", "/api/v1/nodes/b/reports")] = lambda seen: (
        409, {}, b'{"code": "node_incompatible", "error": "protocol 1 is too old"}',
    )  # fmt: skip
    settings = read_settings(_settings(tmp_path, contract_hub.url))
    heartbeat = Heartbeat(settings, HubClient(settings.hub_url, settings.token))

    heartbeat.beat()
    heartbeat.beat()

    assert "protocol 1 is too old" in heartbeat.last and len(contract_hub.seen) == 2


def test_the_node_worker_loads_neither_django_nor_webapp(tmp_path: Path) -> None:
    """Even with DJANGO_SETTINGS_MODULE set (Celery's Django fix-up would set Django up).

    kombu's JSON module imports ``django.utils.functional`` when Django is installed (to
    encode lazy strings); that loads no settings and no database, so the check is that no
    ``webapp`` module, no ``django.db`` and no ``django.conf`` settings were loaded."""
    env = {**os.environ, **_settings(tmp_path, "http://127.0.0.1:1")}
    env["DJANGO_SETTINGS_MODULE"] = "webapp.settings"
    check = (
        "import sys, workers.node.tasks, workers.node.launch; "
        "app = workers.node.tasks.app; app.loader.import_default_modules(); "
        "above = sorted(m for m in sys.modules if m.split('.')[0] == 'webapp' "
        "or m.startswith(('django.db', 'django.conf', 'django.apps'))); "
        "assert not above, above; "
        "print(sorted(n for n in app.tasks if n.startswith('node.')))"
    )
    result = spawn.run(
        [sys.executable, "-c", check], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "['node.build', 'node.compare', 'node.place', 'node.probe', 'node.trial', 'node.unload']"
    )


def _pinning(tmp_path: Path, versions: list[int]) -> ModelStore:
    store = ModelStore(tmp_path / "store")
    listed = ", ".join(str(v) for v in versions)
    policy = f"version_policy {{ specific {{ versions: [{listed}] }} }}"
    store.write_config("mlp", f'name: "mlp"\nbackend: "onnxruntime"\n{policy}\n')
    return store


def test_a_candidate_is_loaded_beside_only_the_version_this_node_serves(tmp_path: Path) -> None:
    """The hub's view can lag the node's (its Triton restarted, someone placed by hand): the
    node refuses before it fetches or loads anything, naming what it serves."""
    _pinning(tmp_path, [1])
    settings = read_settings(_settings(tmp_path, "http://127.0.0.1:1"))
    with pytest.raises(PlacementRefused, match="serves mlp v1, not v2"):
        load_beside(
            settings, HubClient("http://127.0.0.1:1", TOKEN), checked_request("mlp", 3, SHA),
            model="mlp", serving=2, runtime=None,  # type: ignore[arg-type]
        )  # fmt: skip


@pytest.mark.parametrize(
    ("pinned", "to", "before"),
    [([1], 2, 1), ([1], 1, 1), ([1, 2], 2, 1), ([1, 2], 1, 2), ([], 1, None)],
)
def test_a_switch_knows_what_served_before_even_with_a_candidate_beside(
    tmp_path: Path, pinned: list[int], to: int, before: int | None
) -> None:
    store = _pinning(tmp_path, pinned) if pinned else ModelStore(tmp_path / "store")
    assert _from_version(store, checked_request("mlp", to, SHA)) == before

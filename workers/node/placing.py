"""Placing a packaged version on this node: fetch it from the hub, check it, serve it.

No shared file system: the package comes over HTTP with the node token, and nothing in the
broker message is trusted beyond the model name, the version number and the SHA-256, which
are checked here before anything is fetched. The tar's hash must be the one the hub asked
for (:func:`model_store.package_tar.safe_extract` checks it, and every name and entry in it,
before it writes anything); it unpacks into a staging folder beside the repository and
becomes the node's package of that version by one rename, so a package is there whole or
not at all. Serving is then :func:`model_store.serving.switch_version`, as on the hub: it
loads the new version before it unloads the old one and puts the previous state back when
the load fails.

The node's store root (the repository's parent) holds, as on the hub:
``sources/<model>/<version>/package`` (the unpacked package, plus ``package.sha256``),
``repository/`` (what Triton reads), ``staging/``, ``retired/`` and ``downloads/``.
"""

from __future__ import annotations

import re
import secrets
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from model_store.config import parse_pbtxt
from model_store.errors import InvalidConfig, ModelStoreError
from model_store.file_io import DIR_MODE, atomic_write_text, fsync_dir
from model_store.names import validate_model_name, validate_version
from model_store.package_tar import safe_extract
from model_store.runtime.client import TritonRuntime
from model_store.serving import STAGING_ROOT, load_alongside, switch_version, unload_model
from model_store.serving.directory_swap import RETIRED_ROOT, aside_path
from model_store.serving.restart_needed import backend_of
from model_store.store import CONFIG_FILE, ModelStore
from model_store.targets import UnknownTarget, get_target, known_targets
from workers.node.hub_client import HubClient
from workers.node.settings import NodeSettings

#: Largest package a node downloads (an OM or ONNX with external data is a few GiB).
MAX_PACKAGE_BYTES = 64 * 1024**3
_SHA256 = re.compile(r"[0-9a-f]{64}")
_DOWNLOADS = "downloads"
_HASH_FILE = "package.sha256"


class PlacementRefused(ModelStoreError):
    """The message asked for something this node will not do (bad name, version or hash)."""

    code = "placement_refused"


@dataclass(frozen=True)
class PlaceRequest:
    """A checked ``node.place`` message."""

    model: str
    version: int
    sha256: str
    target: str | None = None


@dataclass
class PlaceResult:
    """What ``node.place`` returns (JSON-able through :meth:`to_dict`)."""

    model: str
    version: int
    sha256: str
    ok: bool
    fetched: bool
    bytes: int = 0
    reason: str = ""
    restored: bool = False
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def checked_request(
    model: object, version: object, sha256: object, target: object = None
) -> PlaceRequest:
    """The message's arguments, checked as if a stranger sent them.

    Raises:
        PlacementRefused: A name, version, hash or target that is not valid.
    """
    name, number = checked_version(model, version)
    if not isinstance(sha256, str) or not _SHA256.fullmatch(sha256.strip().lower()):
        raise PlacementRefused("The SHA-256 must be 64 hexadecimal digits.")
    if target is not None:
        try:
            get_target(target)
        except UnknownTarget as exc:
            raise PlacementRefused(exc.message) from None
    return PlaceRequest(
        name, number, sha256.strip().lower(), target if isinstance(target, str) else None
    )


def checked_version(model: object, version: object) -> tuple[str, int]:
    """A model name and a version number from a message, checked.

    Raises:
        PlacementRefused: Either is not valid.
    """
    try:
        name = validate_model_name(model)
        number = validate_version(version)
    except ModelStoreError as exc:
        raise PlacementRefused(exc.message) from None
    if isinstance(version, bool) or not isinstance(version, int):
        raise PlacementRefused(f"The version must be a whole number, not {version!r:.40}.")
    return name, number


def node_store(settings: NodeSettings) -> ModelStore:
    store = ModelStore(settings.store_root)
    store.repository_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    return store


def node_runtime(settings: NodeSettings) -> TritonRuntime:
    return TritonRuntime(
        http_url=settings.triton_http,
        grpc_url=settings.triton_grpc,
        metrics_url=settings.triton_metrics,
        api_key=settings.triton_api_key,
    )


def place(
    settings: NodeSettings, client: HubClient, request: PlaceRequest, *, runtime: TritonRuntime
) -> PlaceResult:
    """Makes ``request.version`` the version this node's Triton serves.

    Raises:
        HubError: The package could not be fetched (nothing changed).
        PackageTarError: The tar is not the one asked for, or not a safe package (nothing
            changed).
        ModelStoreError: The package cannot be served as it is (nothing changed).
    """
    store = node_store(settings)
    result = PlaceResult(request.model, request.version, request.sha256, ok=False, fetched=False)
    began = time.monotonic()
    if placed_hash(store, request) != request.sha256:
        result.bytes = fetch_package(store, client, request)
        result.fetched = True
        result.timings["fetch_s"] = round(time.monotonic() - began, 4)
    target = request.target or _target_of(store, request)
    switched = switch_version(
        store, runtime, name=request.model, target=target, to_version=request.version,
        from_version=_from_version(store, request),
        timeout_s=settings.load_timeouts.for_target(target),
    )  # fmt: skip
    result.ok, result.reason, result.restored = switched.ok, switched.reason, switched.restored
    result.timings |= {"switch_s": round(switched.duration_s, 4), **switched.phases}
    result.timings["total_s"] = round(time.monotonic() - began, 4)
    return result


def unload(settings: NodeSettings, model: object, *, runtime: TritonRuntime) -> dict[str, Any]:
    """Unloads ``model`` from this node's Triton; its files stay (a later place reloads it)."""
    try:
        name = validate_model_name(model)
    except ModelStoreError as exc:
        raise PlacementRefused(exc.message) from None
    began = time.monotonic()
    unload_model(runtime, name)
    return {"model": name, "ok": True, "timings": {"unload_s": round(time.monotonic() - began, 4)}}


def load_beside(
    settings: NodeSettings,
    client: HubClient,
    request: PlaceRequest | None,
    *,
    model: str,
    serving: int,
    runtime: TritonRuntime,
) -> dict[str, Any]:
    """Loads ``request.version`` beside ``serving``, the version this node serves (a canary's
    candidate); with no request, ``serving`` alone again. The candidate's package is fetched
    and checked as :func:`place` does; the serving version keeps answering throughout (Triton
    loads the added version and unloads only a dropped one).

    Raises:
        PlacementRefused: The node does not serve ``serving`` (the hub's view is stale).
        HubError, PackageTarError, ModelStoreError: As :func:`place`; nothing changed.
    """
    store = node_store(settings)
    pinned = _pinned_versions(store, model)
    if serving not in pinned:
        shown = ", ".join(f"v{v}" for v in pinned) or "nothing"
        raise PlacementRefused(f"This node serves {model} {shown}, not v{serving}: place it first.")
    began = time.monotonic()
    fetched = False
    if request is not None and placed_hash(store, request) != request.sha256:
        fetch_package(store, client, request)
        fetched = True
    extra = request.version if request is not None else None
    # onnxruntime, acl and npu_ge name their backend after themselves; any other gets the default.
    timeout_s = settings.load_timeouts.for_target(backend_of(store, model))
    ok, reason = load_alongside(store, runtime, model, serving, extra, timeout_s=timeout_s)
    return {
        "model": model, "serving": serving, "beside": extra, "ok": ok, "reason": reason,
        "fetched": fetched, "timings": {"total_s": round(time.monotonic() - began, 4)},
    }  # fmt: skip


# -- the package ------------------------------------------------------------------------------
def placed_hash(store: ModelStore, request: PlaceRequest) -> str | None:
    """The SHA-256 of the package this node already holds for that version, if any."""
    if not store.package_dir(request.model, request.version).is_dir():
        return None
    try:
        path = store.source_dir(request.model, request.version) / _HASH_FILE
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def fetch_package(store: ModelStore, client: HubClient, request: PlaceRequest) -> int:
    """Downloads, checks and unpacks the package; it becomes ``package_dir`` by one rename."""
    downloads = store.root / _DOWNLOADS
    downloads.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    tar = downloads / f"{request.model}-{request.version}-{secrets.token_hex(8)}.tar"
    staging = aside_path(store, STAGING_ROOT, request.model)
    try:
        download = client.download_package(
            request.model, request.version, tar, max_bytes=MAX_PACKAGE_BYTES
        )
        unpacked = safe_extract(tar, staging, request.sha256, max_bytes=MAX_PACKAGE_BYTES)
        if (unpacked.model, unpacked.version) != (request.model, request.version):
            raise PlacementRefused(
                f"The hub sent {unpacked.model} v{unpacked.version} for "
                f"{request.model} v{request.version}."
            )
        _install_package(store, request, unpacked.model_dir)
        return download.size
    finally:
        tar.unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)


def _install_package(store: ModelStore, request: PlaceRequest, unpacked: Path) -> None:
    """``unpacked`` (config.pbtxt + <version>/) becomes the version's package, whole.

    A package the node held under another hash (packaged again on the hub) is set aside
    first, with the repository's copy of that version, which the switch then installs again
    from the new package.
    """
    package = store.package_dir(request.model, request.version)
    package.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    hash_file = package.parent / _HASH_FILE
    hash_file.unlink(missing_ok=True)
    if package.exists():
        old = aside_path(store, RETIRED_ROOT, request.model)
        package.rename(old)
        version_dir = store.version_dir(request.model, request.version)
        if version_dir.is_dir():
            version_dir.rename(old / "repository-copy")
        shutil.rmtree(old, ignore_errors=True)
    unpacked.rename(package)
    fsync_dir(package.parent)
    # Written last: a crash before this leaves a package without a hash, fetched again.
    atomic_write_text(hash_file, request.sha256 + "\n")


def _target_of(store: ModelStore, request: PlaceRequest) -> str:
    """The target whose backend the packaged config names (``external`` for any other)."""
    config = parse_pbtxt(
        (store.package_dir(request.model, request.version) / CONFIG_FILE).read_text()
    )
    for target in known_targets():
        if target.backend and target.backend == config.backend:
            return target.name
    return "external"


def _from_version(store: ModelStore, request: PlaceRequest) -> int | None:
    """What this node serves before a switch to ``request.version``: the one version pinned,
    or, while a canary's candidate is loaded beside, the pinned one that is not the target."""
    pinned = _pinned_versions(store, request.model)
    if len(pinned) == 1:
        return pinned[0]
    others = [v for v in pinned if v != request.version]
    return others[0] if len(others) == 1 else None


def _pinned_versions(store: ModelStore, model: str) -> list[int]:
    """The versions the repository's config.pbtxt lists (two while a candidate is beside)."""
    try:
        config = parse_pbtxt(store.config_path(model).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, InvalidConfig):
        return []
    return list(config.version_policy_specific or [])

"""The packaged version a switch serves from: its pinned config and its files.

Packaging (``ModelStore.package_dir``) keeps every version's config.pbtxt and model files
outside the repository; serving reads them from there. :func:`link_or_copy` puts those
files into the repository without copying big weights when a hard link is possible.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from model_store.config import ModelConfig, parse_pbtxt
from model_store.errors import ModelStoreError, NotFound
from model_store.names import validate_model_name, validate_version
from model_store.store import CONFIG_FILE, ModelStore


class InvalidPackage(ModelStoreError):
    """A packaged version cannot be served as it is (missing files, several .onnx, ...)."""

    code = "invalid_package"


def serving_config(store: ModelStore, name: str, version: int) -> ModelConfig:
    """The config that serves ``version``: its packaged config, pinned to that version.

    Parsing drops fields :class:`ModelConfig` does not model; package configs are generated
    from that same dataclass, so nothing of ours is lost.

    Args:
        store: The model store.
        name: Model name.
        version: Version number.

    Returns:
        The packaged config with ``version_policy_specific=[version]`` and ``name`` set to
        the model name (Triton refuses a config whose name differs from its directory).

    Raises:
        NotFound: If the version has no packaged config.pbtxt.
        InvalidConfig: If that file cannot be parsed.
    """
    version = validate_version(version)
    path = store.package_dir(name, version) / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NotFound(
            f"Version {version} of {name!r} has no packaged config.pbtxt ({path}). "
            "Package the version again."
        ) from None
    cfg = parse_pbtxt(text)
    cfg.name = validate_model_name(name)
    cfg.version_policy_specific = [version]
    return cfg


def package_files(store: ModelStore, name: str, version: int) -> list[Path]:
    """The files of the packaged version directory (artifact plus any external data; none for
    an adopted ensemble)."""
    folder = store.package_dir(name, version) / str(version)
    files = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    # An ensemble's version folder is empty by design: its steps run other models.
    if not files and not (
        folder.is_dir() and serving_config(store, name, version).platform == "ensemble"
    ):
        raise NotFound(
            f"Version {version} of {name!r} has no packaged files ({folder}). "
            "Package the version again."
        )
    return files


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-links ``src`` to ``dst`` (no copy of big weights), copying when links are refused."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
        fd = os.open(dst, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def install_version(store: ModelStore, name: str, version: int) -> bool:
    """Puts ``version``'s packaged files into the repository when its folder is missing there.

    Packaging installs each version; the folder can still be missing after a manual cleanup, a
    restore, or on a node, whose repository gets a version only when it is first served or
    loaded beside. Returns whether anything was installed.

    Raises:
        NotFound: The version is not packaged.
    """
    if store.version_dir(name, version).is_dir():
        return False
    files = package_files(store, name, version)
    with store.stage_version(name, version) as staging:
        for path in files:
            link_or_copy(path, staging / path.name)
    return True

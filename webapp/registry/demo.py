"""The demo model: a real ImageNet classifier sent through the normal pipeline in one click.

EfficientNet-Lite0 (demo/efficientnet-lite0, exported once with its own script, so no torch is
needed here) is uploaded, compiled, verified, packaged and served exactly like a person's
upload, so the first thing a new user watches is the whole journey. Its labels and the
preprocessing it was trained with are set on the model, so the Try it panel classifies a photo
correctly from the start.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction

from model_store.inference import PRESETS, parse_labels
from webapp.errors import HubError
from webapp.registry import actions
from webapp.registry import versions as version_actions
from webapp.registry.models import Job, Model, Version
from webapp.registry.storage import get_uploads

NAME = "efficientnet-lite0"
DESCRIPTION = (
    "Demo: EfficientNet-Lite0, an ImageNet-1k classifier (Apache-2.0 weights), added from "
    "demo/efficientnet-lite0. Try it with a photo: it names what it sees among 1000 classes."
)


def demo_dir() -> Path:
    return Path(settings.BASE_DIR) / "demo" / "efficientnet-lite0"


def demo_images_dir() -> Path:
    return Path(settings.BASE_DIR) / "demo" / "images"


def is_available() -> bool:
    return (demo_dir() / "model.onnx").is_file()


@dataclass
class DemoAdded:
    model: Model
    version: Version
    job: Job


def existing_demo() -> Model | None:
    return Model.objects.filter(name=NAME).first()


def add_demo_model(user: User) -> DemoAdded:
    """Create the demo model (or reuse an empty one) and queue its first version."""
    folder = demo_dir()
    source = folder / "model.onnx"
    if not source.is_file():
        raise HubError(
            "The demo model file is not in this installation (demo/efficientnet-lite0/model.onnx).",
            "demo_missing",
            404,
        )
    model = existing_demo()
    if model is not None and model.versions.exists():
        raise HubError(
            f"The demo model is here already as {NAME}; open it to try it.", "demo_exists", 409
        )
    if model is None:
        model = actions.create_model(
            name=NAME, target="onnxruntime", description=DESCRIPTION, user=user
        )
    model.labels = parse_labels((folder / "labels.txt").read_text(encoding="utf-8"))
    model.try_settings = {"preprocess": PRESETS["efficientnet"].to_dict()}
    model.save(update_fields=["labels", "try_settings", "updated"])

    uploads = get_uploads()
    size = source.stat().st_size
    upload = uploads.create("model.onnx", size, sha256=_sha256(source), owner=str(user.pk))
    with source.open("rb") as stream:
        uploads.write_chunk(upload.id, 0, stream, size)
    finished = uploads.finish(upload.id)
    try:
        with transaction.atomic():
            version, job = version_actions.create_version(
                model=model,
                upload=finished,
                options=version_actions.parse_options(model, {}),
                user=user,
                serve_when_packaged=True,
            )
    finally:
        uploads.cancel(upload.id)  # the file now lives on as the version's source
    return DemoAdded(model, version, job)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for piece in iter(lambda: fh.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()

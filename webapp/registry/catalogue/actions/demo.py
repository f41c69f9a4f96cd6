"""Adding the demo model: created like any model, its file uploaded like any version."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext

from model_store.inference import PRESETS, parse_labels
from webapp.errors import HubError
from webapp.registry.catalogue.actions import versions as version_actions
from webapp.registry.catalogue.actions.models import create_model
from webapp.registry.catalogue.demo import DESCRIPTION, NAME, demo_dir, existing_demo
from webapp.registry.catalogue.models import Model, Version
from webapp.registry.catalogue.storage import get_uploads
from webapp.registry.jobs.models import Job


@dataclass
class DemoAdded:
    model: Model
    version: Version
    job: Job


def add_demo_model(user: User) -> DemoAdded:
    """Create the demo model (or reuse an empty one) and queue its first version."""
    folder = demo_dir()
    source = folder / "model.onnx"
    if not source.is_file():
        raise HubError(
            gettext(
                "The demo model file is not in this installation "
                "(demo/efficientnet-lite0/model.onnx)."
            ),
            "demo_missing",
            404,
        )
    model = existing_demo()
    if model is not None and model.versions.exists():
        raise HubError(
            gettext("The demo model is here already as %(name)s; open it to try it.")
            % {"name": NAME},
            "demo_exists",
            409,
        )
    if model is None:
        model = create_model(name=NAME, target="onnxruntime", description=DESCRIPTION, user=user)
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

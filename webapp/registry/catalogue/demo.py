"""The demo model: a real ImageNet classifier sent through the normal pipeline in one click.

EfficientNet-Lite0 (demo/efficientnet-lite0, exported once with its own script, so no torch is
needed here) is uploaded, compiled, verified, packaged and served exactly like a person's
upload, so the first thing a new user watches is the whole journey. Its labels and the
preprocessing it was trained with are set on the model, so the Try it panel classifies a photo
correctly from the start. Adding it is ``actions.demo.add_demo_model``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.models import Job

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


def existing_demo() -> Model | None:
    return Model.objects.filter(name=NAME).first()


@dataclass(frozen=True)
class NextSteps:
    """What the demo's Overview points at: its tabs once it serves, else the job on its way."""

    served: bool
    job: Job | None = None


def next_steps(model: Model) -> NextSteps | None:
    """The "Next steps" card of the demo model's page; None for every other model."""
    if model.name != NAME:
        return None
    if model.serving_version is not None:
        return NextSteps(served=True)
    job = (
        model.jobs.exclude(state__in=Job.FINISHED)
        .exclude(kind=Job.Kind.SWEEP)
        .order_by("-created")
        .first()
    )
    return NextSteps(served=False, job=job)

"""A model's Try it set-up: the class labels of its outputs and how photos are preprocessed."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.utils.translation import gettext

from model_store.inference import Preprocess, offered_labels, parse_labels
from model_store.inference.class_names import IMAGENET_1K, MODEL_FILE
from webapp.accounts.roles import Role, require_role
from webapp.errors import HubError
from webapp.registry.catalogue.models import Model, Version


def set_labels(*, model: Model, text: str, user: User) -> Model:
    """Replace the labels with those in ``text`` (one per line, or a JSON list or object).

    Raises:
        InferenceInputError: ``text`` holds no usable labels.
    """
    require_role(user, Role.OPERATOR)
    model.labels = parse_labels(text)
    model.save(update_fields=["labels", "updated"])
    return model


def use_offered_labels(*, model: Model, source: str, user: User) -> Model:
    """Replace the labels with those the serving version offers: ``"imagenet-1k"`` (an
    output of 1000 or 1001 classes) or ``"model-file"`` (names in the ONNX metadata).

    Raises:
        HubError: ``bad_labels`` (400) for another ``source``; ``not_served`` (409) when no
            version serves; ``not_offered`` (409) when the serving version does not offer it.
    """
    require_role(user, Role.OPERATOR)
    if source not in (IMAGENET_1K, MODEL_FILE):
        raise HubError(
            gettext("Unknown labels source %(source)s; use %(imagenet)s or %(file)s.")
            % {
                "source": repr(source[:50]),
                "imagenet": repr(IMAGENET_1K),
                "file": repr(MODEL_FILE),
            },
            "bad_labels",
        )
    version = (
        model.versions.filter(number=model.serving_version).first()
        if model.serving_version
        else None
    )
    if version is None:
        raise HubError(
            gettext("%(model)s is not served yet; labels are offered for the serving version.")
            % {"model": model.name},
            "not_served",
            409,
        )
    labels = offered_labels(source, version.signature, version.onnx_summary)
    if labels is None:
        raise HubError(_not_offered(version, source), "not_offered", 409)
    model.labels = labels
    model.save(update_fields=["labels", "updated"])
    return model


def _not_offered(version: Version, source: str) -> str:
    if source == IMAGENET_1K:
        return gettext(
            "v%(number)s has no output of ImageNet's size (a float output whose last "
            "axis is 1000 or 1001); upload a labels file instead."
        ) % {"number": version.number}
    return gettext(
        "v%(number)s's ONNX file carries no class names in its metadata (keys such as "
        "names, class_names, labels or classes); upload a labels file instead."
    ) % {"number": version.number}


def save_try_settings(*, model: Model, changes: dict[str, Any], user: User) -> Model:
    """Save the given Try it settings (``preprocess``, ``image_inputs``); keep the others."""
    require_role(user, Role.OPERATOR)
    saved: dict[str, Any] = dict(model.try_settings or {})
    if "preprocess" in changes:
        saved["preprocess"] = Preprocess.from_dict(changes["preprocess"]).to_dict()
    if "image_inputs" in changes:
        saved["image_inputs"] = changes["image_inputs"]
    model.try_settings = saved
    model.save(update_fields=["try_settings", "updated"])
    return model

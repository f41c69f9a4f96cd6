"""A model's Try it set-up: the class labels of its outputs and how photos are preprocessed."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User

from model_store.inference import Preprocess, parse_labels
from webapp.accounts.roles import Role, require_role
from webapp.registry.models import Model


def set_labels(*, model: Model, text: str, user: User) -> Model:
    """Replace the labels with those in ``text`` (one per line, or a JSON list or object).

    Raises:
        InferenceInputError: ``text`` holds no usable labels.
    """
    require_role(user, Role.OPERATOR)
    model.labels = parse_labels(text)
    model.save(update_fields=["labels", "updated"])
    return model


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

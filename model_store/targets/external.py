"""The ``external`` target: a model adopted from an existing Triton repository, served as found.

Adopting a repository (docs/adopt.md) brings in models whose backend the hub does not build:
``python``, ``tensorrt``, ``pytorch``, ensembles and the like. Their versions are copied into
the store exactly as they were, with their own config.pbtxt, which serving writes back as
written (:data:`model_store.config.VERBATIM_HEADER`): only ``name`` and ``version_policy``
change. Nothing is ever built, recompiled or verified by running the files on the worker, so
an external version needs an admin's recorded override before it may serve.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model_store.config import ModelConfig
from model_store.errors import ModelStoreError
from model_store.onnx_info import OnnxInfo
from model_store.targets.base import BuildContext, BuildResult, Target, TargetStatus, VerifyPlan
from model_store.targets.findings import Finding, error
from model_store.targets.options import OptionSpec
from model_store.text import say

#: What the hub cannot do for an external model, shown wherever one is adopted or listed.
LIMITS = (
    "Served and switched as adopted; the hub never rebuilds, optimises or converts it.",
    "Not verified by the hub: an admin records an override before a version may serve.",
    "New versions come from adopting the repository again, not from an upload.",
)


class NotBuiltHere(ModelStoreError):
    """Something asked the hub to build or configure an external model."""

    code = "external_model"


class ExternalTarget(Target):
    """Models served with their own backend and config, as adopted."""

    name = "external"
    label = say("External (adopted as is)")
    description = say("A model adopted from an existing Triton repository, served as it was found.")
    backend = ""  # the model's own config names it
    artifact_name = ""  # whatever files the version directory held
    accepts_uploads = False

    def option_specs(self) -> list[OptionSpec]:
        """None: nothing is built."""
        return []

    def check_model(self, info: OnnxInfo, options: Mapping[str, Any]) -> list[Finding]:
        """Always an error: an upload cannot become an external version."""
        return [
            error(
                "external_model",
                say(
                    "External models are adopted from a Triton repository, not built from uploads."
                ),
                say("Adopt the repository again (python manage.py adopt PATH) to add versions."),
            )
        ]

    def build(self, ctx: BuildContext) -> BuildResult:
        raise NotBuiltHere(
            "External models are served as adopted; the hub does not build them. "
            "Adopt the repository again to add a version."
        )

    def make_config(
        self, name: str, info: OnnxInfo, options: Mapping[str, Any], version: int
    ) -> ModelConfig:
        raise NotBuiltHere(
            "An external model keeps the config.pbtxt it was adopted with; the hub writes none."
        )

    def status(self, env: Mapping[str, str]) -> TargetStatus:
        """Always available: nothing is built; Triton must have the model's backend."""
        return TargetStatus(
            True, "Nothing is built; Triton must have the backend the model's config names."
        )

    def verify_plan(self, options: Mapping[str, Any], info: OnnxInfo) -> VerifyPlan:
        raise NotBuiltHere(
            "External models are not verified by the hub; an admin records an override instead."
        )

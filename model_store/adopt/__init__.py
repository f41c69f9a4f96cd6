"""Adopting a Triton model repository a team already serves (docs/adopt.md).

Django-free: :func:`scan_repository` reads the repository and says what the hub understood of
every model directory; :func:`plan_adoption` says what adopting would do given what the hub
holds. Copying the chosen versions into the store is the web layer's job
(``webapp.registry.catalogue.adopt``), run by a worker.
"""

from __future__ import annotations

from model_store.adopt.found import Problem, RepositoryScan, ScannedModel, ScannedVersion
from model_store.adopt.plan import (
    COPYING_ACTIONS,
    AdoptionPlan,
    ExistingModel,
    InvalidRename,
    PlannedModel,
    parse_renames,
    plan_adoption,
)
from model_store.adopt.scan import ScanRefused, scan_repository

__all__ = [
    "COPYING_ACTIONS",
    "AdoptionPlan",
    "ExistingModel",
    "InvalidRename",
    "PlannedModel",
    "Problem",
    "RepositoryScan",
    "ScanRefused",
    "ScannedModel",
    "ScannedVersion",
    "parse_renames",
    "plan_adoption",
    "scan_repository",
]

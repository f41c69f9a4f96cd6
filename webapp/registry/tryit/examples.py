"""Saved Try-it examples: how lists read them (saving and deleting: ``actions.examples``).

An example is an infer request's ``inputs`` kept for one-click reruns. Anyone with the viewer
role may save one, so each is validated against the serving version's signature and the
request budget before it is stored (a saved example is never bigger than a request could
be), and the totals are capped per model and per person. Lists never load the tensors:
they defer the ``inputs`` column, which only a rerun (one example) reads.
"""

from __future__ import annotations

from typing import Any

from webapp.registry.catalogue.models import Model


def listed(model: Model) -> Any:
    """The model's examples for a list: newest first, without their tensors."""
    return model.examples.defer("inputs").select_related("created_by")

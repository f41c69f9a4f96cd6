"""The header every tab of the model page shares: the model, Triton's state of it, the tab."""

from __future__ import annotations

from typing import Any

from webapp.accounts.roles import Role, role_of
from webapp.http import HubRequest
from webapp.registry.catalogue.models import Model
from webapp.registry.serving.state import state_of


def model_header(request: HubRequest, model: Model, tab: str) -> dict[str, Any]:
    state, triton_error = state_of(model.name, model.serving_version is not None)
    return {
        "model": model,
        "state": state,
        "triton_error": triton_error,
        "tab": tab,
        "nav": "models",
        "can_operate": role_of(request.user) >= Role.OPERATOR,
    }

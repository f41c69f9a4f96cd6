"""Triton's view of our models (READY, LOADING, UNAVAILABLE and why), from one index call."""

from __future__ import annotations

from dataclasses import dataclass

from model_store.runtime.errors import TritonAccessDenied, TritonRuntimeError
from model_store.serving import is_trial_name
from webapp.ops.triton import get_runtime


@dataclass
class ModelState:
    state: str  # READY, LOADING, UNLOADING, UNAVAILABLE, NOT LOADED, UNKNOWN
    version: str = ""
    reason: str = ""

    @property
    def badge(self) -> str:
        return {
            "READY": "badge-ok",
            "LOADING": "badge-busy",
            "UNLOADING": "badge-busy",
            "UNAVAILABLE": "badge-bad",
        }.get(self.state, "badge-idle")


def triton_states() -> tuple[dict[str, ModelState], str]:
    """Per model name, the state of its serving version in Triton; and an error, if any."""
    try:
        rows = get_runtime(timeout=3.0).repository_index()
    except TritonAccessDenied as exc:  # reachable, but the hub's key is missing or wrong
        return {}, str(exc)
    except TritonRuntimeError as exc:
        return {}, f"Triton is not reachable: {exc}"
    states: dict[str, ModelState] = {}
    for row in rows:
        if is_trial_name(row["name"]):  # a verification's temporary model, not a hub model
            continue
        state = ModelState(
            row.get("state") or "UNKNOWN", row.get("version", ""), row.get("reason", "")
        )
        current = states.get(row["name"])
        # Several rows per model (one per version): READY wins, then the busiest state.
        if current is None or _rank(state) > _rank(current):
            states[row["name"]] = state
    return states, ""


def _rank(state: ModelState) -> int:
    return {"READY": 4, "LOADING": 3, "UNLOADING": 2, "UNAVAILABLE": 1}.get(state.state, 0)


def state_of(name: str, served: bool) -> tuple[ModelState, str]:
    states, error = triton_states()
    if error:
        return ModelState("UNKNOWN", reason=error), error
    return states.get(name, ModelState("NOT LOADED" if served else "NOT SERVED")), ""

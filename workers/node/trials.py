"""A tuning trial the hub runs on this node's Triton (``node.trial``).

The hub's search (webapp/registry/performance/tuning.py) decides which configs to try; for a
run placed on this node it sends each trial here: the model, the version and its package's
SHA-256, the trial's config.pbtxt, the shape of one request and how to drive it. Here:

1. the package is fetched from the hub over HTTP with the node token (unless this node already
   holds it under that SHA-256), checked and unpacked as for placing (``placing``);
2. the config is parsed as Triton's protobuf and must name the model; the trial is loaded
   under a ``_trial-`` name next to whatever this node serves, measured, then unloaded and
   removed (``model_store.perf.trials``), also when it fails;
3. the answer is the measured levels as plain JSON.

Nothing in the message is trusted beyond what is checked: names, version and hash as for
placing; the config through the protobuf parser; the inputs' dtypes and element count; the
load's bounds. Trials a killed node worker left behind are removed before each new one once
they are older than any trial can take.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model_store.config import parse_pbtxt
from model_store.errors import ModelStoreError
from model_store.perf.plan import MAX_CONCURRENCY
from model_store.perf.trials import TrialLoad, measure_trial, random_inputs
from model_store.runtime.client import TritonRuntime
from model_store.serving import remove_stale_trials
from model_store.text import say
from workers.node import placing
from workers.node.hub_client import HubClient
from workers.node.settings import NodeSettings

#: A node-side trial is over well within this; older ``_trial-`` directories are debris.
STALE_TRIAL_S = 3600.0
#: config.pbtxt text a message may carry.
MAX_CONFIG_CHARS = 64 * 1024


class TrialRefused(ModelStoreError):
    """The message asked for something this node will not do."""

    code = "trial_refused"


def checked(message: dict[str, Any]) -> tuple[placing.PlaceRequest, Any, list[Any], TrialLoad, int]:
    """The message's parts, checked as if a stranger sent them.

    Raises:
        TrialRefused: Anything malformed, with what.
    """
    try:
        request = placing.checked_request(
            message.get("model"), message.get("version"), message.get("sha256")
        )
    except placing.PlacementRefused as exc:
        raise TrialRefused(exc.message) from None
    text = message.get("config")
    if not isinstance(text, str) or not text or len(text) > MAX_CONFIG_CHARS:
        raise TrialRefused(
            f"The trial's config must be config.pbtxt text of at most {MAX_CONFIG_CHARS} "
            "characters."
        )
    try:
        cfg = parse_pbtxt(text)
    except ModelStoreError as exc:
        raise TrialRefused(
            say("The trial's config is not valid: %(error)s", error=exc.message)
        ) from None
    if cfg.name != request.model:
        raise TrialRefused(f"The trial's config names {cfg.name!r}, not {request.model!r}.")
    inputs = message.get("inputs")
    if not isinstance(inputs, list) or not inputs or len(inputs) > 64:
        raise TrialRefused("The trial needs 1 to 64 input descriptions.")
    try:
        load = TrialLoad.from_dict(message.get("load") or {})
    except (TypeError, ValueError) as exc:
        raise TrialRefused(f"The trial's load is not valid: {exc}") from None
    in_flight = message.get("max_in_flight", 4)
    if (
        isinstance(in_flight, bool)
        or not isinstance(in_flight, int)
        or not 1 <= in_flight <= MAX_CONCURRENCY
    ):
        raise TrialRefused(f"max_in_flight must be 1 to {MAX_CONCURRENCY}.")
    return request, cfg, inputs, load, in_flight


def run_trial(
    settings: NodeSettings, hub: HubClient, message: dict[str, Any], *, runtime: TritonRuntime
) -> dict[str, Any]:
    """Fetch (if needed), load as a trial, measure, remove; ``{"ok": True, "levels": [...]}``."""
    request, cfg, input_specs, load, in_flight = checked(message)
    try:
        inputs = random_inputs(input_specs)
    except ValueError as exc:
        raise TrialRefused(str(exc)) from None
    store = placing.node_store(settings)
    remove_stale_trials(store, runtime, older_than_s=STALE_TRIAL_S)
    fetched = False
    if placing.placed_hash(store, request) != request.sha256:
        placing.fetch_package(store, hub, request)
        fetched = True
    folder = store.package_dir(request.model, request.version) / str(request.version)
    files: list[Path] = sorted(p for p in folder.iterdir() if p.is_file())
    levels = measure_trial(
        store, runtime, cfg, files, request.version, inputs, load, max_in_flight=in_flight
    )
    return {"ok": True, "levels": levels, "fetched": fetched}

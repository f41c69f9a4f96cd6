"""How long a load may take before the hub stops waiting on Triton's load call, per target.

Most backends load in seconds, but Triton's ``npu_ge`` backend compiles the ONNX into a graph
at load, once per device and instance, and takes one load at a time across every ``npu_ge``
model of its Triton (docs/ge-backend.md#loading-takes-minutes): minutes, not seconds. So the
timeout is a setting per target, read from the environment by the hub (webapp/settings.py)
and by a node (workers/node/settings.py) alike:

* ``LOAD_TIMEOUT_SECONDS``: every target without its own (the hub 180, a node 120 by default);
* ``LOAD_TIMEOUT_<TARGET>_SECONDS``, e.g. ``LOAD_TIMEOUT_NPU_GE_SECONDS``: one target's own.
  ``npu_ge`` has one built in (:data:`BUILT_IN_S`).

The timeout is not a verdict: a load Triton is still working on when it passes is waited out
up to :data:`CEILING_FACTOR` times as long (:func:`model_store.serving.loading.load_and_wait`).

Stdlib only: the hub's settings import this before Django is set up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: Every target a model may have (``model_store.targets.known_targets``; a unit test keeps the
#: two equal). Not imported from there: that package is heavy for settings to load.
TARGETS = ("onnxruntime", "npu_ge", "acl", "external")
#: Targets whose loads need longer than the rest by default. npu_ge: the GE backend compiles
#: per device and instance, and a load may first queue behind other npu_ge models' loads, so
#: the 180 s that suits a CPU load ran out while Triton was still compiling (issue 45).
BUILT_IN_S: Mapping[str, float] = {"npu_ge": 600.0}
#: A load still in progress at its timeout is waited for up to this many times the timeout.
CEILING_FACTOR = 3.0
#: Accepted values, in seconds.
LOWEST_S, HIGHEST_S = 1.0, 24 * 3600.0


class LoadTimeoutSettingError(ValueError):
    """A ``LOAD_TIMEOUT_*`` variable that is not a number of seconds; the message names it."""


@dataclass(frozen=True)
class LoadTimeouts:
    """Seconds per target.

    Attributes:
        default_s: For a target with no timeout of its own (and for an unknown one).
        per_target: The targets with their own timeout.
    """

    default_s: float
    per_target: Mapping[str, float] = field(default_factory=dict)

    def for_target(self, target: str | None) -> float:
        """The timeout of ``target`` (``None`` or an unknown name: the default)."""
        return self.per_target.get(target or "", self.default_s)


def variable_for(target: str) -> str:
    """``npu_ge`` -> ``LOAD_TIMEOUT_NPU_GE_SECONDS``."""
    return f"LOAD_TIMEOUT_{target.upper()}_SECONDS"


def read_load_timeouts(env: Mapping[str, str], *, default_s: float) -> LoadTimeouts:
    """The timeouts ``env`` sets, over ``default_s`` and :data:`BUILT_IN_S`.

    A built-in timeout is never shortened by a longer general one: with
    ``LOAD_TIMEOUT_SECONDS=900`` npu_ge gets 900 s, not 600 s. Only its own variable sets it
    lower.

    Raises:
        LoadTimeoutSettingError: A value that is not a number of seconds in range.
    """
    default = _seconds(env, "LOAD_TIMEOUT_SECONDS", default_s)
    per_target = {}
    for target in TARGETS:
        built_in = max(BUILT_IN_S.get(target, default), default)
        own = _seconds(env, variable_for(target), built_in)
        if own != default:
            per_target[target] = own
    return LoadTimeouts(default, per_target)


def _seconds(env: Mapping[str, str], key: str, default: float) -> float:
    return seconds_setting(env, key, default, lowest=LOWEST_S, highest=HIGHEST_S)


def seconds_setting(
    env: Mapping[str, str], key: str, default: float, *, lowest: float, highest: float
) -> float:
    """``env[key]`` as seconds between ``lowest`` and ``highest``; ``default`` when unset.

    Raises:
        LoadTimeoutSettingError: not a number in that range (the sentence names ``key``).
    """
    text = env.get(key, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not lowest <= value <= highest:  # also false for NaN
        raise LoadTimeoutSettingError(
            f"{key} must be a number of seconds from {lowest:g} to {highest:g}, not {text!r}."
        )
    return value

"""A model's switch lock outlives the longest switch its target may take (review point B1).

An npu_ge load is waited out for up to three times its load timeout (GE compiles at load), and
a failed switch loads the old version again: the lock must not expire in between, or a second
switch could start beside the first."""

from __future__ import annotations

from typing import Any

from model_store.load_timeouts import CEILING_FACTOR
from webapp.registry.catalogue.models import Model
from webapp.registry.serving.lock import lock_ttl


def test_an_npu_ge_models_lock_outlives_two_waited_out_loads(settings: Any) -> None:
    ge = Model(name="ge", target="npu_ge")
    longest_load = settings.LOAD_TIMEOUTS.for_target("npu_ge") * CEILING_FACTOR
    assert lock_ttl(ge).total_seconds() >= 2 * longest_load
    # The setting stays the floor, and what a lock without a model (reconcile's cutoff) or of a
    # target without a load timeout of its own uses, as before.
    assert lock_ttl().total_seconds() == settings.SWITCH_LOCK_TTL_SECONDS
    cpu = Model(name="cpu", target="onnxruntime")
    assert lock_ttl(cpu).total_seconds() == settings.SWITCH_LOCK_TTL_SECONDS
    settings.SWITCH_LOCK_TTL_SECONDS = 100_000
    assert lock_ttl(ge).total_seconds() == 100_000

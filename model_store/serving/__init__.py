"""Which version of a model Triton serves: switch, roll back, load, unload, inspect.

The submodules, from the bottom up (each imports only those above it in this list):

* :mod:`~model_store.serving.signature`: how two versions' interfaces differ (pure functions).
* :mod:`~model_store.serving.triton_index`: reading Triton's repository index.
* :mod:`~model_store.serving.packages`: the packaged config and files a version serves from.
* :mod:`~model_store.serving.loading`: load, unload and wait for READY.
* :mod:`~model_store.serving.directory_swap`: replacing a whole model directory (``npu_ge``).
* :mod:`~model_store.serving.switching`: switching versions, restoring the previous one on
  failure.
* :mod:`~model_store.serving.state`: what the files and Triton say, for the reconcile page.
* :mod:`~model_store.serving.trial`: a candidate loaded under a temporary name beside the
  serving model (verification through Triton), and removal of trials a crash left behind.

This package re-exports their public names, so ``from model_store.serving import
switch_version`` keeps working; code that patches a name must patch it in the submodule that
looks it up.

Example::

    result = switch_version(store, runtime, name="resnet", target="onnxruntime",
                            to_version=3, from_version=2, on_log=job_log)
    if not result.ok:   # version 2 serves again when result.restored
        report(result.reason)
"""

from __future__ import annotations

from model_store.serving.directory_swap import RETIRED_ROOT, STAGING_ROOT
from model_store.serving.loading import (
    LoadResult,
    ServingTimeout,
    load_alongside,
    load_serving,
    unload_model,
)
from model_store.serving.packages import InvalidPackage, serving_config
from model_store.serving.signature import Change, ChangeKind, signature_changes
from model_store.serving.state import (
    DEFAULT_STALE_AFTER_S,
    RepositoryState,
    TritonVersionState,
    repository_state,
)
from model_store.serving.switching import (
    SwitchResult,
    switch_version,
)
from model_store.serving.trial import (
    TrialLoadFailed,
    remove_stale_trials,
    remove_trial,
    trial_model,
    trial_name,
)
from model_store.serving.triton_index import (
    READY,
    TRIAL_PREFIX,
    UNAVAILABLE,
    ServingRuntime,
    is_trial_name,
    plain_reason,
)

__all__ = [
    "DEFAULT_STALE_AFTER_S",
    "READY",
    "RETIRED_ROOT",
    "STAGING_ROOT",
    "TRIAL_PREFIX",
    "UNAVAILABLE",
    "Change",
    "ChangeKind",
    "InvalidPackage",
    "LoadResult",
    "RepositoryState",
    "ServingRuntime",
    "ServingTimeout",
    "SwitchResult",
    "TrialLoadFailed",
    "TritonVersionState",
    "is_trial_name",
    "load_alongside",
    "load_serving",
    "plain_reason",
    "remove_stale_trials",
    "remove_trial",
    "repository_state",
    "serving_config",
    "signature_changes",
    "switch_version",
    "trial_model",
    "trial_name",
    "unload_model",
]

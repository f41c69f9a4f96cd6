"""What the stages see of the host, and what they hand on to each other.

:class:`SelftestContext` holds the settings the caller gathered (environment, the model
store, the Triton client, Triton's backend directory, the demo assets, a private scratch
directory, the chosen NPU) and :class:`Facts`, which each stage fills for the stages after
it: CANN's status, the npu-smi report, the SoC, the compiled OM and its config, and every
classification of the photo. All outside contact goes through the product's own code (the
diagnostics checks, ``read_devices``, the ``acl`` target, pyACL's ``OmSession``, the trial
loader), so the self-test proves the product's paths rather than parallel ones.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_store.ascend.npu_owner import why_not_here, worker_runs_npu_smi
from model_store.ascend.selftest.demo import Classification, DemoAssets
from model_store.compile.atc import CannStatus
from model_store.config import ModelConfig
from model_store.diagnostics import DiagnosticsContext
from model_store.errors import ModelStoreError
from model_store.host_report import devices_seen_by_triton
from model_store.onnx_info import OnnxInfo
from model_store.runtime.client import TritonRuntime
from model_store.serving.facts import ask_serving_side
from model_store.store import ModelStore
from model_store.text import Said

#: Where CANN and the NPU driver install by default (docs/cann.md#install-layouts).
DEFAULT_ASCEND_ROOT = Path("/usr/local/Ascend")
#: How long Triton may take to load a model: the GE backend compiles at load, for minutes.
DEFAULT_LOAD_TIMEOUT_S = 600.0


class InvalidDevice(ModelStoreError):
    """``--device N`` names no NPU of this host (a usage error: exit status 2)."""

    code = "invalid_device"


@dataclass
class Facts:
    """What earlier stages found, for the later ones and for the report's header.

    Attributes:
        cann: Where ATC and the toolkit are (``cann`` stage).
        atc_python: ATC's interpreter and its version, as the ``atc_python`` stage read them.
        devices: The :func:`~model_store.devices.read_devices` report (``npus`` stage).
        device_ids: The NPUs the pyACL and Triton stages use.
        soc: ATC's ``--soc_version`` for this host, and ``soc_source`` how it was found.
        acl_device_count: What ``acl.rt.get_device_count`` said (None: not asked or absent).
        info: The demo model's signature; ``tensor`` the photo as its input.
        om: The OM ATC built (``atc_compile``) and ``acl_config`` the config the acl target
            wrote for it.
        classifications: Where the photo was classified (``"pyACL, NPU 0"``, ``"Triton acl"``)
            and what came out.
        triton_version: Triton's version, once a Triton stage reached it.
        serving: What the Triton that serves said of itself (``serving_side`` stage;
            :func:`~model_store.serving.facts.summarise`), or None when not asked.
    """

    cann: CannStatus | None = None
    atc_python: dict[str, str] = field(default_factory=dict)
    devices: Mapping[str, Any] | None = None
    device_ids: list[int] = field(default_factory=list)
    soc: str | None = None
    soc_source: Said = ""
    acl_device_count: int | None = None
    info: OnnxInfo | None = None
    tensor: Any = None
    om: Path | None = None
    acl_config: ModelConfig | None = None
    classifications: dict[str, Classification] = field(default_factory=dict)
    triton_version: str | None = None
    serving: dict[str, Any] | None = None


@dataclass
class SelftestContext:
    """Everything the stages need; the management command fills it from the hub's settings.

    Attributes:
        env: The environment to judge and to run ATC with (the command's own).
        store: The hub's model store (trial models go into its repository).
        runtime: The hub's Triton client (with its repository key), or None when no Triton
            is configured.
        backends_dir: Triton's ``--backend-directory`` as seen from here, or None.
        demo: The bundled demo model, labels and photo.
        scratch: A private, empty directory; the caller removes it.
        device: ``--device N``, or None for every NPU.
        ascend_root: Where CANN and the driver are installed by default.
        load_timeout_s: How long a Triton load may take.
        npu_ge_in_serving_triton: Let the npu_ge stage load its trial into the Triton that
            serves (off by default: a failed GE load wedges every later one there).
        facts: Filled by the stages as they run.
    """

    env: Mapping[str, str]
    store: ModelStore
    runtime: TritonRuntime | None
    demo: DemoAssets
    scratch: Path
    backends_dir: Path | None = None
    device: int | None = None
    ascend_root: Path = DEFAULT_ASCEND_ROOT
    load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S
    npu_ge_in_serving_triton: bool = False
    facts: Facts = field(default_factory=Facts)
    _diagnostics: DiagnosticsContext | None = field(default=None, init=False, repr=False)

    def diagnostics(self) -> DiagnosticsContext:
        """The diagnostics checks' view of this host (one, so npu-smi is asked once). Where the
        worker leaves npu-smi to the Triton container (``WORKER_NPU``), its NPUs are the ones
        npu-smi listed there."""
        if self._diagnostics is None:
            devices = None
            if not worker_runs_npu_smi(self.env):
                devices = devices_seen_by_triton(self.serving_facts(), why_not_here(self.env))
            self._diagnostics = DiagnosticsContext(
                env=dict(self.env),
                backends_dir=self.backends_dir,
                ascend_root=self.ascend_root,
                which=lambda name: _which(name, self.env),
                devices=devices,
            )
        return self._diagnostics

    def serving_facts(self) -> dict[str, Any] | None:
        """What the Triton that serves says of itself (asked once, kept in ``facts.serving``),
        or None when no Triton is configured."""
        if self.facts.serving is None and self.runtime is not None:
            timeout = min(self.load_timeout_s, 120.0)
            self.facts.serving = ask_serving_side(self.store, self.runtime, timeout_s=timeout)
        return self.facts.serving

    def triton_url(self) -> str:
        """Triton's HTTP address, for messages (``""`` when none is configured)."""
        return self.runtime.http_url if self.runtime is not None else ""


def _which(name: str, env: Mapping[str, str]) -> str | None:
    """``shutil.which`` on ``env``'s PATH (the context's environment, not this process's)."""
    import shutil

    return shutil.which(name, path=env.get("PATH", os.defpath))

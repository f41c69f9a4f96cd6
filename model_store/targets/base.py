"""What every deployment target provides, and the pieces the targets share.

A *target* decides what a version is built into (``model.onnx`` or
``model.om``), which build options the user may set, which model properties
would make it fail, and what ``config.pbtxt`` says. The web layer renders
forms and an API schema from :class:`OptionSpec`; workers call
:meth:`Target.parse_options`, :meth:`Target.check_model`, :meth:`Target.build`
and :meth:`Target.make_config`, in that order.

The pieces the targets share live beside this module: options (``options.py``), findings
(``findings.py``), signature helpers (``signature.py``) and batching (``batching.py``).
Options whose default depends on the model (``max_batch_size``, ``dynamic_batching``)
default to None ("automatic") and are filled in by :meth:`Target.resolve_options` once
the model's signature is known.

Example:
    >>> target = get_target("onnxruntime")
    >>> options = target.parse_options({"fp16": True}, info=info)
    >>> [f.message for f in target.check_model(info, options) if f.level == "error"]
    []
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from model_store.config import ModelConfig
from model_store.errors import ModelStoreError
from model_store.onnx_info import OnnxInfo
from model_store.targets.batching import check_batching_options, resolve_batching
from model_store.targets.findings import Finding, error
from model_store.targets.options import InvalidOptions, OptionSpec, parse_value
from model_store.text import Said, as_json, say

Precision = Literal["fp32", "fp16", "mixed", "int8"]


class BuildCancelled(ModelStoreError):
    """The user cancelled the build; nothing was produced."""

    code = "cancelled"


# Build context and results ----------------------------------------------------------


def _ignore_log(_line: str) -> None:
    return None


def _ignore_progress(_fraction: float) -> None:
    return None


def _never() -> bool:
    return False


@dataclass
class BuildContext:
    """Everything a build needs; the worker fills it and streams ``log``/``progress``.

    Attributes:
        source: The uploaded ``.onnx`` (external data files beside it).
        workdir: An empty directory on the store's filesystem; the build
            leaves only the artifact there (and, for the onnxruntime target,
            ``model.onnx.data`` for models over 2 GiB).
        info: ``inspect_onnx(source)``.
        options: Options as stored (raw or parsed); the build parses them again
            with the model, which is idempotent, so defaults are always filled.
        log: Receives one human-readable line at a time.
        progress: Receives the fraction done, 0.0 to 1.0.
        cancelled: Polled between steps (and by ATC); True stops the build.
        env: Environment for tools (ATC_PATH, ASCEND_TOOLKIT_HOME, PATH, ...).
    """

    source: Path
    workdir: Path
    info: OnnxInfo
    options: dict[str, Any]
    log: Callable[[str], None] = _ignore_log
    progress: Callable[[float], None] = _ignore_progress
    cancelled: Callable[[], bool] = _never
    env: Mapping[str, str] = field(default_factory=dict)

    def check_cancelled(self) -> None:
        """Raises :class:`BuildCancelled` if the user asked to stop."""
        if self.cancelled():
            raise BuildCancelled("The build was cancelled; nothing was produced.")


@dataclass
class BuildResult:
    """What a build produced.

    Attributes:
        artifact: Path of the file to put in the version directory.
        artifact_name: Its name there: ``model.onnx`` or ``model.om``.
        commands: Shell lines actually run (e.g. the ATC command), copyable.
        notes: Plain-words remarks for the version page (skipped steps, fallbacks).
        compiled_info: ``inspect_onnx`` of an ONNX artifact (pass it to
            :meth:`Target.make_config`), None for an OM.
    """

    artifact: Path
    artifact_name: str
    commands: list[str] = field(default_factory=list)
    notes: list[Said] = field(default_factory=list)
    compiled_info: OnnxInfo | None = None


@dataclass(frozen=True)
class TargetStatus:
    """Whether this worker can build for a target, and why not."""

    available: bool
    reason: Said


@dataclass(frozen=True)
class VerifyPlan:
    """How to call :func:`model_store.verify.verify` for a version of this target.

    Attributes:
        artifact_kind: ``"onnx"`` or ``"om"``.
        precision: Tolerance set to apply (``fp32``, ``fp16``, ``mixed``).
        batch: Batch size for random inputs (a gear for OMs with gears).
        input_shapes: Full input shapes to use instead of the signature's
            (for artifacts compiled with fixed shapes), or None.
        note: What the verification does and does not measure.
        device_id: The NPU an OM is run on: the one the version will serve on (its
            ``device_id`` option), not always the first.
    """

    artifact_kind: Literal["onnx", "om"]
    precision: Precision
    batch: int
    input_shapes: dict[str, list[int]] | None
    note: Said
    device_id: int = 0


# The target interface ---------------------------------------------------------------


class Target(ABC):
    """A deployment target: options, model checks, build, and config.pbtxt.

    Class attributes:
        name: Stable identifier stored with each version (``"onnxruntime"``).
        label: Human name for the UI.
        description: One sentence for the UI.
        backend: The ``backend`` written in config.pbtxt.
        artifact_name: File name in the version directory.
        needs_cann: Building needs the Ascend CANN toolkit on the worker.
        hardware_verified: False when this target's output has never been run
            on real hardware by this project (the UI says "not run on hardware").
        device: ``"cpu"`` or ``"npu"``: which device's memory the model uses.
        versions_side_by_side: True when a model's versions sit side by side in its
            Triton directory and config.pbtxt's ``version_policy`` picks the one that
            serves; False when the directory holds only the serving version and a switch
            swaps the whole directory (the GE backend runs the first ``.onnx`` it finds).
        reports_statistics: False when the backend reports no counts or latencies to
            Triton's statistics extension, so the only numbers are the hub's own calls.
        accepts_uploads: False for a target whose versions only come from adopting an
            existing repository (``external``): it is not offered when creating a model.
        config_only_options: Options that change only config.pbtxt, never the built artifact,
            so a revision changing nothing else reuses the artifact and its verification
            (``model_store.targets.revise``). Empty by default: anything not listed rebuilds.

    This class is the one place for such facts: the registry's choices, the API schema,
    serving, packaging, metrics and advice read them from here.
    """

    name: ClassVar[str]
    label: ClassVar[Said]
    description: ClassVar[Said]
    backend: ClassVar[str]
    artifact_name: ClassVar[str]
    needs_cann: ClassVar[bool] = False
    hardware_verified: ClassVar[bool] = True
    device: ClassVar[Literal["cpu", "npu"]] = "cpu"
    versions_side_by_side: ClassVar[bool] = True
    reports_statistics: ClassVar[bool] = True
    accepts_uploads: ClassVar[bool] = True
    config_only_options: ClassVar[frozenset[str]] = frozenset()

    @abstractmethod
    def option_specs(self) -> list[OptionSpec]:
        """The options this target accepts, in form order."""

    def parse_options(
        self, raw: Mapping[str, object], *, info: OnnxInfo | None = None
    ) -> dict[str, Any]:
        """Parses user options strictly and fills defaults.

        Parsing is idempotent: parsed options parse to themselves, so they can
        be stored as JSON and parsed again later.

        Args:
            raw: Options from JSON or a form. Unknown keys are refused.
            info: The model, if known; automatic values are then resolved.

        Returns:
            A new dict with every option present.

        Raises:
            InvalidOptions: Naming the field that is wrong and why.
        """
        if not isinstance(raw, Mapping):
            raise InvalidOptions(say("Options must be an object mapping option names to values."))
        specs = {spec.name: spec for spec in self.option_specs()}
        unknown = sorted(str(key) for key in raw if key not in specs)
        if unknown:
            raise InvalidOptions(
                say(
                    "Unknown option(s) for target %(target)s: %(unknown)s. "
                    "Known options: %(known)s.",
                    target=repr(self.name),
                    unknown=", ".join(unknown),
                    known=", ".join(specs),
                )
            )
        options = {name: parse_value(spec, raw.get(name)) for name, spec in specs.items()}
        self.check_options(options)
        if info is not None:
            options = self.resolve_options(options, info)
        return options

    def check_options(self, options: dict[str, Any]) -> None:
        """Cross-field rules that need no model (override to add); raises InvalidOptions."""
        check_batching_options(options)

    def resolve_options(self, options: Mapping[str, Any], info: OnnxInfo) -> dict[str, Any]:
        """Returns a copy of parsed options with automatic values filled from the model.

        Raises:
            InvalidOptions: If the resolved values contradict each other.
        """
        resolved = dict(options)
        resolve_batching(resolved, info, overrides=resolved.get("input_shapes"))
        return resolved

    @abstractmethod
    def check_model(self, info: OnnxInfo, options: Mapping[str, Any]) -> list[Finding]:
        """Problems with this model and these (raw or parsed) options; invalid options
        become an ``invalid_options`` finding rather than an exception."""

    @abstractmethod
    def build(self, ctx: BuildContext) -> BuildResult:
        """Builds the artifact into ``ctx.workdir``.

        Raises:
            ModelStoreError: A subclass saying what failed and what to do
                (BuildCancelled when cancelled).
        """

    @abstractmethod
    def make_config(
        self, name: str, info: OnnxInfo, options: Mapping[str, Any], version: int
    ) -> ModelConfig:
        """The ``ModelConfig`` for serving ``version`` of model ``name``.

        Pass ``BuildResult.compiled_info`` as ``info`` when the build returned
        one (its signature is what is served), else the source's info.
        ``options`` may be raw or parsed.

        Raises:
            InvalidOptions: If the options are invalid for this model.
            InvalidConfig: If a tensor has no Triton type or rank.
        """

    @abstractmethod
    def status(self, env: Mapping[str, str]) -> TargetStatus:
        """Whether this worker can build for the target (``env``: the worker's environment)."""

    @abstractmethod
    def verify_plan(self, options: Mapping[str, Any], info: OnnxInfo) -> VerifyPlan:
        """How to verify an artifact of this target against its source."""

    def findings_from_options(
        self, info: OnnxInfo, options: Mapping[str, Any]
    ) -> tuple[dict[str, Any] | None, list[Finding]]:
        """Parses options for ``check_model``: (resolved, []) or (None, [finding])."""
        try:
            return self.parse_options(options, info=info), []
        except InvalidOptions as exc:
            return None, [
                error("invalid_options", exc.message, say("Change the options and try again."))
            ]

    def copies_per_device(
        self, instances: int, *, devices: int = 1, parameters: Mapping[str, str] | None = None
    ) -> tuple[int, Said]:
        """How many copies of the model's weights and buffers one device holds, and why.

        The default: every instance is its own session with its own weights, and instances
        run at the same time, so copies = instances (``devices`` and ``parameters``, the
        config.pbtxt ``parameters``, do not matter then).
        """
        return max(1, int(instances)), say("each instance holds its own weights and buffers")

    def to_dict(self, env: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The target for the UI/API: name, label, flags, options and (with env) status."""
        data: dict[str, Any] = {
            "name": self.name,
            "label": as_json(self.label),
            "description": as_json(self.description),
            "backend": self.backend,
            "artifact_name": self.artifact_name,
            "needs_cann": self.needs_cann,
            "hardware_verified": self.hardware_verified,
            "device": self.device,
            "versions_side_by_side": self.versions_side_by_side,
            "reports_statistics": self.reports_statistics,
            "options": [spec.to_dict() for spec in self.option_specs()],
        }
        if env is not None:
            status = self.status(env)
            data["status"] = {"available": status.available, "reason": as_json(status.reason)}
        return data

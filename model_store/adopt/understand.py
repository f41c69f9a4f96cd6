"""What the hub makes of one model directory: its config, backend, target and problems.

* A config.pbtxt is parsed with Triton's own protobuf schema (``model_config_pb2``); one that
  does not parse is an error naming the line (the repository's Triton refuses it too).
* ONNX models (``backend: "onnxruntime"``, ``platform: "onnxruntime_onnx"``, or no config
  and a ``model.onnx`` in every version) become ``onnxruntime`` versions: the config is read
  into the hub's own and linted against the model's signature; without one, the onnxruntime
  target's generated config is used (Triton's auto-complete would derive the same tensors).
* ``backend: "npu_ge"`` models become ``npu_ge`` versions, each holding its one ``.onnx``: the
  GE backend runs the first ``.onnx`` it finds anywhere in the model directory
  (docs/ge-backend.md#how-the-model-file-is-found), so other model files there are reported.
* Every other backend or platform (``python``, ``tensorrt``, ``ensemble``, ...) is not built by
  the hub: such models are adopted as ``external`` and keep their config as written.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as pb

from model_store.adopt.found import Problem, ScannedModel, ScannedVersion
from model_store.config import VERBATIM_HEADER, parse_pbtxt, render_pbtxt
from model_store.config_lint import lint
from model_store.dtypes import is_triton_type, triton_to_numpy
from model_store.errors import ModelStoreError
from model_store.names import validate_file_name, validate_model_name
from model_store.onnx_info import OnnxInfo, inspect_onnx
from model_store.targets.external import LIMITS as EXTERNAL_LIMITS
from model_store.targets.onnxruntime import OnnxRuntimeTarget
from model_store.text import Said, say

ONNX_BACKENDS = {"onnxruntime", "onnxruntime_onnx"}
GE_BACKEND = "npu_ge"
#: Top-level config fields the hub's own config (``model_store.config.ModelConfig``) keeps;
#: the others are dropped when an ONNX model's config is read into it, and the scan says so.
MANAGED_FIELDS = {
    "name",
    "backend",
    "platform",
    "max_batch_size",
    "input",
    "output",
    "dynamic_batching",
    "instance_group",
    "version_policy",
    "parameters",
    "model_warmup",
}
#: Model files the GE backend searches for (docs/ge-backend.md#how-the-model-file-is-found).
GE_MODEL_SUFFIXES = (".onnx", ".pb")
NEEDS_GPU = {"tensorrt", "tensorrt_plan"}


def _error(code: str, message: Said) -> Problem:
    return Problem("error", code, message)


def _warning(code: str, message: Said) -> Problem:
    return Problem("warning", code, message)


def understand_model(model: ScannedModel, config_text: str | None, extras: list[str]) -> None:
    """Fills ``model``'s config, backend, target, limits, signature and problems in place.

    Args:
        model: The scanned directory with its versions.
        config_text: Its config.pbtxt, or None when it has none.
        extras: Other entries at the model's top level (not config.pbtxt, not versions).
    """
    problems = model.problems
    try:
        validate_model_name(model.directory)
    except ModelStoreError as exc:
        problems.append(
            _error(
                "invalid_name",
                say("%(problem)s Adopt it under another name.", problem=exc.message),
            )
        )
    if not model.versions:
        problems.append(_error("no_versions", say("No numbered version folder.")))
    if extras:
        problems.append(
            _warning(
                "not_copied",
                say(
                    "Not copied (only config.pbtxt and the version folders are adopted): "
                    "%(names)s.",
                    names=", ".join(extras),
                ),
            )
        )
    _check_file_names(model)
    if config_text is None:
        _without_config(model)
    else:
        _with_config(model, config_text)
    if model.target == GE_BACKEND:
        _ge_checks(model, extras)


def _check_file_names(model: ScannedModel) -> None:
    for version in model.versions:
        for file in version.files:
            if "/" in file.relpath:
                version.problems.append(
                    _error(
                        "nested_files",
                        say(
                            "Version %(version)s holds sub-folders (%(path)s); adopted "
                            "versions hold plain files only.",
                            version=version.number,
                            path=file.relpath,
                        ),
                    )
                )
                break
            try:
                validate_file_name(file.relpath)
            except ModelStoreError as exc:
                version.problems.append(_error("invalid_file_name", exc.message))


# Without a config ------------------------------------------------------------------------


def _without_config(model: ScannedModel) -> None:
    if not model.versions or not all(_has(v, "model.onnx") for v in model.versions):
        model.problems.append(
            _error(
                "no_config",
                say(
                    "No config.pbtxt, and not every version holds a model.onnx: the hub cannot "
                    "tell what serves this model. Add a config.pbtxt."
                ),
            )
        )
        return
    info = _inspect(model, model.versions[-1], "model.onnx")
    if info is None:
        return
    try:
        cfg = OnnxRuntimeTarget().make_config(model.directory, info, {}, model.versions[-1].number)
    except ModelStoreError as exc:
        message = say(
            "No config.pbtxt, and none can be generated: %(problem)s", problem=exc.message
        )
        model.problems.append(_error("no_config", message))
        return
    cfg.version_policy_specific = None
    model.config_text = render_pbtxt(cfg)
    model.config_origin = "generated"
    model.backend = "onnxruntime"
    model.target = "onnxruntime"
    model.problems.append(
        Problem(
            "info",
            "generated_config",
            say(
                "No config.pbtxt: the hub generated one from the ONNX model (max_batch_size, "
                "inputs and outputs)."
            ),
        )
    )


# With a config ---------------------------------------------------------------------------


def _with_config(model: ScannedModel, text: str) -> None:
    try:
        cfg = parse_pbtxt(text)
    except ModelStoreError as exc:
        model.problems.append(_error("broken_config", exc.message))
        return
    message = pb.ModelConfig()
    text_format.Parse(text, message)
    model.backend = cfg.backend or cfg.platform or ""
    model.config_origin = "config.pbtxt"
    if cfg.name and cfg.name != model.directory:
        model.problems.append(
            _warning(
                "name_differs",
                say(
                    "config.pbtxt names the model %(named)s; Triton uses the folder's name "
                    "%(directory)s, and so does the hub.",
                    named=repr(cfg.name),
                    directory=repr(model.directory),
                ),
            )
        )
    if model.backend in ONNX_BACKENDS or model.backend == GE_BACKEND:
        _hub_built(model, cfg, message)
    else:
        _external(model, text, message)


def _hub_built(model: ScannedModel, cfg: Any, message: pb.ModelConfig) -> None:
    """An ONNX model: its config becomes the hub's own (linted), fields it drops are named."""
    model.target = GE_BACKEND if model.backend == GE_BACKEND else "onnxruntime"
    cfg.name = model.directory
    cfg.version_policy_specific = None
    cfg.backend, cfg.platform = (GE_BACKEND if model.target == GE_BACKEND else "onnxruntime"), None
    dropped = sorted(f.name for f, _ in message.ListFields() if f.name not in MANAGED_FIELDS)
    if dropped:
        model.problems.append(
            _warning(
                "fields_dropped",
                say(
                    "The hub manages this model's config and keeps no %(fields)s; "
                    "serving uses the rest.",
                    fields=", ".join(dropped),
                ),
            )
        )
    if model.target == "onnxruntime":
        for version in model.versions:
            if not _has(version, "model.onnx"):
                missing = say("Version %(version)s holds no model.onnx.", version=version.number)
                version.problems.append(_error("no_model_onnx", missing))
    newest = model.versions[-1] if model.versions else None
    files = _onnx_files(newest) if newest else []
    filename = "model.onnx" if "model.onnx" in files else (files[0] if files else "")
    info = _inspect(model, newest, filename) if newest and filename else None
    try:
        model.config_text = render_pbtxt(cfg)
    except ModelStoreError as exc:
        model.problems.append(_error("broken_config", exc.message))
        return
    for line in lint(cfg, info.signature_dims() if info else None):
        model.problems.append(Problem("warning", "config_lint", line))


def _external(model: ScannedModel, text: str, message: pb.ModelConfig) -> None:
    """Not built by the hub: adopted as ``external`` with its config as written."""
    model.target = "external"
    model.config_text = VERBATIM_HEADER + text.removeprefix(VERBATIM_HEADER)
    model.limits = list(EXTERNAL_LIMITS)
    if model.backend == "ensemble":
        why = say(
            "The hub does not build an ensemble: it is adopted as external, with its own config."
        )
    else:
        why = say(
            "The hub does not build a %(backend)s model: it is adopted as external, with its "
            "own config.",
            backend=model.backend or "?",
        )
    model.problems.append(_warning("unsupported_backend", why))
    if not model.backend:
        why = say("config.pbtxt names neither a backend nor a platform.")
        model.problems.append(_error("no_backend", why))
    if message.HasField("ensemble_scheduling"):
        for version in model.versions:  # empty by design: the steps run other models
            version.problems = [p for p in version.problems if p.code != "empty_version"]
        model.composes = sorted({step.model_name for step in message.ensemble_scheduling.step})
        model.limits.append(
            say(
                "An ensemble is adopted with the models it composes (%(parts)s); they must serve "
                "before it can.",
                parts=", ".join(model.composes),
            )
        )
    if model.backend == "python":
        model.limits.append(
            say(
                "A Python-backend model's dependencies (its imports) must already be installed "
                "in Triton's environment; the hub installs nothing."
            )
        )
        env = message.parameters.get("EXECUTION_ENV_PATH")
        if env is not None:
            why = say(
                "It runs in %(env)s, which must exist where Triton runs.", env=env.string_value
            )
            model.problems.append(_warning("execution_env", why))
    if model.backend in NEEDS_GPU:
        model.problems.append(
            _warning(
                "needs_gpu",
                say(
                    "TensorRT engines need an NVIDIA GPU of the kind they were built on; a "
                    "Triton without one cannot load them."
                ),
            )
        )
    model.signature = _signature_from_config(message)


def _signature_from_config(message: pb.ModelConfig) -> dict[str, object]:
    """Inputs and outputs as the version page and Try it read them (batch axis included)."""
    batched = message.max_batch_size > 0

    def tensors(items: Any) -> list[dict[str, object]]:
        found = []
        for tensor in items:
            dtype = pb.DataType.Name(tensor.data_type)
            numpy = str(triton_to_numpy(dtype)) if is_triton_type(dtype) else None
            dims = ([-1] if batched else []) + list(tensor.dims)
            found.append({"name": tensor.name, "dtype": dtype, "numpy": numpy, "dims": dims})
        return found

    return {"inputs": tensors(message.input), "outputs": tensors(message.output)}


# ONNX and the GE backend ----------------------------------------------------------------


def _has(version: ScannedVersion, relpath: str) -> bool:
    return any(f.relpath == relpath for f in version.files)


def _onnx_files(version: ScannedVersion) -> list[str]:
    return [f.relpath for f in version.files if f.relpath.endswith(GE_MODEL_SUFFIXES)]


def _inspect(model: ScannedModel, version: ScannedVersion, relpath: str) -> OnnxInfo | None:
    """The ONNX model of ``version`` (for lint, the generated config and the signature)."""
    try:
        info = inspect_onnx(model.path / str(version.number) / relpath)
    except ModelStoreError as exc:
        message = say(
            "%(version)s/%(path)s: %(problem)s",
            version=version.number,
            path=relpath,
            problem=exc.message,
        )
        version.problems.append(_error("invalid_onnx", message))
        return None
    model.signature = {
        "inputs": [_tensor(t) for t in info.inputs],
        "outputs": [_tensor(t) for t in info.outputs],
    }
    return info


def _tensor(t: Any) -> dict[str, object]:
    return {"name": t.name, "dtype": t.triton_type, "numpy": t.numpy_dtype, "dims": t.dims}


def _ge_checks(model: ScannedModel, extras: list[str]) -> None:
    """Files the GE backend would pick up by accident, and versions it cannot run alone."""
    everywhere = [f"{v.number}/{name}" for v in model.versions for name in _onnx_files(v)]
    everywhere += [name for name in extras if name.endswith(GE_MODEL_SUFFIXES)]
    if len(everywhere) > 1:
        model.problems.append(
            _warning(
                "ge_several_model_files",
                say(
                    "The GE backend runs the first .onnx (or .pb) it finds anywhere in the model "
                    "folder, so in this repository it runs an arbitrary one of: "
                    "%(files)s. The hub keeps one version per folder; each adopted "
                    "version holds only its own file.",
                    files=", ".join(everywhere),
                ),
            )
        )
    for version in model.versions:
        found = _onnx_files(version)
        if len(found) != 1:
            version.problems.append(
                _error(
                    "ge_model_files",
                    say(
                        "Version %(version)s holds %(count)s .onnx/.pb files "
                        "(%(files)s); the GE backend needs exactly one.",
                        version=version.number,
                        count=len(found),
                        files=", ".join(found) or "none",
                    ),
                )
            )

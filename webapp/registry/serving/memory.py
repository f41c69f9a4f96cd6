"""A version's memory estimate against its devices (the sums are in model_store/memory_fit.py).

Used by ``GET /api/v1/models/{name}/memory-estimate`` and the version page. The instance
count and batch size default to the version's config.pbtxt; callers pass other values to ask
"what if". Ascend targets are compared with each NPU's free memory (``npu-smi``); the
``onnxruntime`` target with this host's available memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil

from model_store.config import ModelConfig, parse_pbtxt
from model_store.errors import ModelStoreError
from model_store.memory_fit import (
    HEADROOM,
    MIB,
    ActivationEstimate,
    Verdict,
    activations_from_onnx,
    activations_from_signature,
    copies_per_device,
    estimate_memory,
    fits,
    mib,
)
from model_store.targets import get_target
from model_store.text import Message, Said, say
from webapp.ops.server_state import devices_summary
from webapp.registry.catalogue.models import Version
from webapp.registry.catalogue.storage import get_store

MAX_INSTANCES = 256
MAX_BATCH = 65536

APPROXIMATION = say(
    "copies x (weights + activations per sample x batch). Weights are the served files' size; "
    "activations are the peak of live intermediate tensors for one sample (ONNX shape inference), "
    "or a rough multiple of the input and output sizes when shapes are dynamic. Runtime context, "
    "arena slack and kernel workspaces are not counted: %(headroom)s%% of free memory is kept "
    "for them.",
    headroom=round(HEADROOM * 100),
)


def _config(version: Version) -> ModelConfig | None:
    if not version.config_pbtxt:
        return None
    try:
        return parse_pbtxt(version.config_pbtxt)
    except ModelStoreError:
        return None


def _weights(version: Version) -> tuple[int, Message]:
    """Bytes of what the server loads, and where the figure comes from."""
    folder = get_store().package_dir(version.model.name, version.number) / str(version.number)
    try:
        files = [p for p in folder.rglob("*") if p.is_file()]
    except OSError:
        files = []
    if files:
        return sum(p.stat().st_size for p in files), say("packaged version files")
    if version.artifact_size:
        return int(version.artifact_size), say("packaged artifact")
    summary = version.onnx_summary or {}
    if summary.get("file_size") and not summary.get("external_data_files"):
        return int(summary["file_size"]), say("source ONNX file")
    return int(version.source_size), say("uploaded source")


def _activations(version: Version) -> ActivationEstimate:
    stored = ActivationEstimate.from_dict((version.onnx_summary or {}).get("activations") or {})
    if stored is not None and stored.bytes_per_sample is not None:
        return stored
    store = get_store()
    candidates: list[Path] = []
    if version.artifact_name.endswith(".onnx"):
        candidates.append(
            store.package_dir(version.model.name, version.number)
            / str(version.number)
            / version.artifact_name
        )
    candidates.append(store.source_dir(version.model.name, version.number) / "model.onnx")
    for path in candidates:
        if path.is_file():
            found = activations_from_onnx(path)
            if found.bytes_per_sample is not None:
                return found
    return activations_from_signature(version.signature or {})


def _device_ids(cfg: ModelConfig | None) -> list[int]:
    raw = (cfg.parameters.get("device_ids", "") if cfg else "") or ""
    ids = []
    for part in raw.split(","):
        if part.strip().isdigit():
            ids.append(int(part.strip()))
    return ids


def _device_id(npu: dict[str, Any]) -> Any:
    """The id device_ids names: npu-smi's Device (logical id) column; the HBM layout (910B)
    prints none, so there the NPU id stands in (docs/npu-smi.md#the-info-table)."""
    device = npu.get("device_id")
    return npu.get("npu_id") if device is None else device


def _chip_label(npu: dict[str, Any]) -> str:
    label = f"NPU {npu.get('npu_id')}"
    if npu.get("chip_id") is not None:
        label += f" chip {npu['chip_id']}"
    return label


def memory_estimate(
    version: Version,
    *,
    instances: int | None = None,
    max_batch: int | None = None,
    devices: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The estimate for ``version`` as a JSON-ready dict (see the API schema)."""
    cfg = _config(version)
    from_config = {
        "instances": cfg.instance_count if cfg else None,
        "max_batch": cfg.max_batch_size if cfg else None,
    }
    if instances is None:
        instances = cfg.instance_count if cfg else 1
    if max_batch is None:
        max_batch = (
            cfg.max_batch_size if cfg else int((version.options or {}).get("max_batch_size") or 0)
        )
    instances = max(1, int(instances))
    target = version.model.target
    weights, weights_source = _weights(version)
    activations = _activations(version)
    per_sample = activations.bytes_per_sample or 0

    result: dict[str, Any] = {
        "model": version.model.name,
        "version": version.number,
        "target": target,
        "instances": instances,
        "max_batch": max_batch,
        "from_config": from_config,
        "weights": {"bytes": weights, "mib": mib(weights), "source": weights_source},
        "activations": activations.to_dict()
        | {"mib_per_sample": mib(activations.bytes_per_sample)},
        "approximation": APPROXIMATION,
        "devices": {"available": False, "reason": "", "fit": []},
        "host": None,
        "warning": None,
    }
    verdicts: list[Verdict] = []
    if get_target(target).device == "npu":
        devices = devices if devices is not None else devices_summary()
        npus = [n for n in devices.get("npus", []) if n.get("device_memory")]
        placed = _device_ids(cfg)
        copies, note = copies_per_device(
            target,
            instances,
            devices=len(placed) or len(npus) or 1,
            parameters=cfg.parameters if cfg else None,
        )
        estimate = estimate_memory(weights, copies, max_batch, per_sample)
        result["devices"]["available"] = bool(devices.get("available") and npus)
        result["devices"]["reason"] = devices.get("reason", "") or (
            "" if npus else say("npu-smi showed no device memory figures")
        )
        for npu in npus:
            verdict = fits(estimate, npu["device_memory"]["free_mb"] * MIB, device=_chip_label(npu))
            verdicts.append(verdict)
            result["devices"]["fit"].append(
                {
                    "npu_id": npu.get("npu_id"),
                    "chip_id": npu.get("chip_id"),
                    "name": npu.get("name"),
                    "memory_kind": npu["device_memory"]["kind"],
                    "total_mib": npu["device_memory"]["total_mb"],
                    "placed": not placed or _device_id(npu) in placed,
                    **verdict.to_dict(),
                }
            )
    else:
        copies, note = copies_per_device(target, instances)
        estimate = estimate_memory(weights, copies, max_batch, per_sample)
        host = fits(estimate, psutil.virtual_memory().available, device=say("this host's memory"))
        verdicts.append(host)
        result["host"] = host.to_dict()
        result["devices"]["reason"] = say("the onnxruntime target runs on the CPU")
    result["copies_per_device"] = copies
    result["copies_note"] = note
    result["estimate"] = estimate.to_dict()
    # One say() sentence nesting the verdicts' (English unchanged), so the page can translate it.
    warnings: list[Said] = [v.message for v in verdicts if v.state == "does_not_fit"]
    if activations.bytes_per_sample is None:
        warnings.append(say("Activations are unknown; only the weights are counted."))
    warning: Message | str | None = warnings[0] if warnings else None
    for more in warnings[1:]:
        warning = say("%(before)s %(after)s", before=warning, after=more)
    result["warning"] = warning
    result["summary"] = _summary(result, estimate.describe(), verdicts)
    return result


def _summary(result: dict[str, Any], described: Said, verdicts: list[Verdict]) -> Message:
    """One ``say()`` text (English unchanged) nesting the sum and the verdicts."""
    text = say("Memory estimate: %(estimate)s.", estimate=described)
    if get_target(result["target"]).device == "npu" and not result["devices"]["available"]:
        reason = result["devices"]["reason"] or say("npu-smi showed no NPU")
        return say(
            "%(before)s No NPU on this host (%(reason)s): memory estimate only.",
            before=text,
            reason=reason,
        )
    for verdict in verdicts:
        text = say("%(before)s %(after)s", before=text, after=verdict.message)
    return text

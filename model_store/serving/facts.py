"""What the Triton that serves can see: asked from inside it (docs/ascend.md#the-serving-side).

In a compose deployment the worker and Triton are different containers with different
software: Triton's image has its own CANN, its own backends and its own Python, and runs as
root where the worker runs as uid 10001. Facts read on the worker's disk say nothing about
where models load. So the hub asks Triton itself: :func:`ask_serving_side` loads a small
Python-backend model (``facts_probe/model.py``) under a temporary trial name, reads the raw
evidence it gathered inside Triton's process (backends, CANN version files, pyACL's SoC and
device count, ``npu-smi info`` as that container's user, device node modes, the stub's Python),
unloads it and removes it. :func:`summarise` turns that evidence into the ``serving`` part of
a host report with the hub's own parsers.

The probe uses only Triton's Python backend, never ``npu_ge``: a load into the GE backend can
wedge the serving Triton (docs/ge-backend.md#statistics-reload-and-unload).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from model_store.ascend.npu_owner import worker_runs_npu_smi
from model_store.cann_versions import parse_cann_version
from model_store.compile.atc.version_files import (
    release_in_version_cfg,
    version_dir_in_info,
    version_in_info_text,
)
from model_store.config import ModelConfig, TensorSpec
from model_store.devices import parse_npu_smi_info, read_devices
from model_store.diagnostics.device_checks import CHIP_NODE
from model_store.errors import ModelStoreError
from model_store.runtime.errors import TritonRuntimeError
from model_store.serving.restart_needed import needs_restart
from model_store.serving.trial import trial_model
from model_store.serving.triton_index import ServingRuntime
from model_store.store import ModelStore
from model_store.text import Message, said, say

#: The model file loaded into Triton (run there by the Python backend's stub).
PROBE_MODEL = Path(__file__).resolve().parent / "facts_probe" / "model.py"
#: The acl backend's model.py needs this Python in the stub (``zip(strict=True)``).
ACL_BACKEND_PYTHON = (3, 10)


def probe_config() -> ModelConfig:
    return ModelConfig(
        name="serving-facts",
        backend="python",
        max_batch_size=0,
        inputs=[TensorSpec("ASK", "TYPE_STRING", [1])],
        outputs=[TensorSpec("FACTS", "TYPE_STRING", [1])],
    )


def ask_serving_side(
    store: ModelStore,
    runtime: ServingRuntime,
    *,
    timeout_s: float = 90.0,
    now: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """The serving side's facts (:func:`summarise`), or ``{"available": False, "reason"}``."""
    if not runtime.is_live():  # type: ignore[attr-defined]
        # Asked again with the next report (a failed answer is kept a minute only).
        return unavailable(say("The Triton that serves is not live."), now())
    try:
        with trial_model(
            store, runtime, probe_config(), [PROBE_MODEL], timeout_s=timeout_s
        ) as name:
            answer = runtime.infer(  # type: ignore[attr-defined]
                name, {"ASK": np.array([b"facts"], dtype=np.object_)}, outputs=["FACTS"]
            )
        raw = json.loads(bytes(answer["FACTS"].reshape(-1)[0]).decode("utf-8"))
    except (ModelStoreError, TritonRuntimeError, OSError, ValueError, KeyError) as exc:
        return unavailable(
            say(
                "The Triton that serves could not be asked what it has: %(reason)s",
                reason=said(exc),
            ),
            now(),
        )
    if not isinstance(raw, dict) or raw.get("error"):
        reason = raw.get("error") if isinstance(raw, dict) else repr(raw)[:200]
        return unavailable(
            say("The facts probe failed inside Triton: %(reason)s", reason=str(reason)), now()
        )
    return summarise(raw, asked_at=now())


def unavailable(reason: Message, asked_at: float) -> dict[str, Any]:
    return {"available": False, "reason": reason, "asked_at": asked_at}


def summarise(raw: Mapping[str, Any], *, asked_at: float) -> dict[str, Any]:
    """The probe's evidence as the ``serving`` part of a host report.

    ``{"available": True, "asked_at", "python", "python_ok", "uid", "groups", "backend_dir",
    "backends": {name: "library"|"python"|"folder"}, "npu_ge": bool, "cann": {...},
    "pyacl": {...}, "npus": {...}, "device_nodes": [...]}``. Unknown keys of a newer probe are
    ignored; missing ones read as unknown.
    """
    found = raw.get("backends")
    backends: dict[str, Any] = found if isinstance(found, dict) else {}
    python = str(raw.get("python") or "")
    return {
        "available": True,
        "asked_at": asked_at,
        "python": python,
        "python_ok": _python_at_least(python, ACL_BACKEND_PYTHON),
        "isolated": raw.get("isolated"),
        "uid": raw.get("uid"),
        "groups": raw.get("groups") or [],
        "backend_dir": raw.get("backend_dir"),
        "backends": {str(k): str(v) for k, v in backends.items() if k != "error"},
        "npu_ge": backends.get("npu_ge") in ("library", "python"),
        "cann": serving_cann(raw.get("cann") or []),
        "pyacl": _pyacl(raw.get("pyacl") or {}),
        "npus": _npus(raw.get("npu_smi") or {}),
        "devices": serving_devices(raw.get("npu_smi") or {}),
        "numbering": device_numbering(raw),
        "device_nodes": list(raw.get("device_nodes") or []),
    }


def _python_at_least(version: str, needed: tuple[int, int]) -> bool | None:
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return None
    return (major, minor) >= needed


def serving_cann(homes: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The CANN beside Triton: the first home whose files name a release.

    The same order as on the worker (docs/cann.md#toolkit-version-files): the install-info
    file's ``version=``, then ``version.cfg``'s release, then ``version_dir=``.
    """
    for home in homes:
        files: Mapping[str, str] = home.get("files") or {}
        infos = [text for name, text in files.items() if name.endswith("toolkit_install.info")]
        version = next((v for v in map(version_in_info_text, infos) if v), None)
        version = version or release_in_version_cfg(files.get("version.cfg"))
        version = version or version_dir_in_info(files.get("compiler/version.info"))
        if version:
            return {
                "available": True,
                "version": version,
                "parsed": parse_cann_version(version) is not None,
                "home": home.get("home"),
            }
    where = ", ".join(str(h.get("home")) for h in homes) or "no CANN folder"
    return {
        "available": False,
        "version": None,
        "home": None,
        "reason": say("No CANN version file beside Triton (looked in %(where)s).", where=where),
    }


def _pyacl(raw: Mapping[str, Any]) -> dict[str, Any]:
    count = raw.get("device_count")
    counted = isinstance(count, int) and raw.get("device_count_ret") == 0
    ok = raw.get("importable") is True and not raw.get("error") and raw.get("init") in (0, 100002)
    return {
        "importable": raw.get("importable") is True,
        "found_by_search": bool(raw.get("found_by_search")),
        "soc": raw.get("soc") or None,
        "device_count": count if counted else None,
        "working": ok,
        "error": raw.get("error") or (None if ok else _init_failure(raw)),
    }


def _init_failure(raw: Mapping[str, Any]) -> str | None:
    if raw.get("importable") is True and raw.get("init") not in (None, 0, 100002):
        return f"acl.init returned {raw.get('init')}"
    return None


def _npus(raw: Mapping[str, Any]) -> dict[str, Any]:
    """npu-smi inside Triton's container: its chips, or why there is no table."""
    if not raw.get("path"):
        return {"available": False, "reason": say("npu-smi not found beside Triton.")}
    if raw.get("error") or raw.get("returncode") != 0:
        detail = raw.get("error") or (raw.get("stderr") or raw.get("stdout") or "")[-300:]
        return {
            "available": False,
            "path": raw["path"],
            "reason": say(
                "npu-smi beside Triton failed: %(detail)s", detail=str(detail).strip() or "?"
            ),
        }
    report = parse_npu_smi_info(str(raw.get("stdout") or ""))
    return {
        "available": True,
        "path": raw["path"],
        "chips": [
            {"npu_id": c.npu_id, "chip_id": c.chip_id, "name": c.name, "health": c.health}
            for c in report.chips
        ],
    }


def serving_devices(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The npu-smi outputs the probe gathered inside Triton, read by the hub's own
    :func:`~model_store.devices.read_devices` (the same report a worker makes of its host):
    the table, and ``info -m`` for the device ids the HBM layouts leave out. Per-chip usages
    are not asked there; the table's memory figures are."""
    outputs: dict[tuple[str, ...], Any] = {("info",): raw, ("info", "-m"): raw.get("mapping")}

    def replay(args: list[str], **_: Any) -> SimpleNamespace:
        got = outputs.get(tuple(args[1:]))
        if not isinstance(got, Mapping) or got.get("error"):
            detail = got.get("error") if isinstance(got, Mapping) else "not asked inside Triton"
            raise OSError(str(detail))
        return SimpleNamespace(
            returncode=got.get("returncode", 1),
            stdout=str(got.get("stdout") or ""),
            stderr=str(got.get("stderr") or ""),
        )

    if not raw.get("path"):
        return {"available": False, "npus": [], "reason": say("npu-smi not found beside Triton.")}
    return read_devices(runner=replay, which=lambda _: str(raw["path"]), usages=False)


def device_numbering(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Whether the NPUs pyACL counts inside Triton are the ``/dev/davinciN`` nodes mapped into
    its container: the ids the hub gives (``device_id``, ``--device``) are pyACL's, numbered
    from 0 there, so the two must agree. ``{"nodes", "pyacl_count", "agree"}``; ``agree`` is
    None when either is unknown."""
    nodes = [
        str(n.get("path"))
        for n in raw.get("device_nodes") or []
        if isinstance(n, Mapping) and CHIP_NODE.fullmatch(Path(str(n.get("path"))).name)
    ]
    acl = raw.get("pyacl") or {}
    count = acl.get("device_count") if acl.get("device_count_ret") == 0 else None
    agree = None if count is None or not nodes else count == len(nodes)
    return {"nodes": nodes, "pyacl_count": count, "agree": agree}


#: How long a good answer is kept before the serving side is asked again, and a failed one.
ASK_EVERY_S = 600.0
#: At most this old where the answer also carries the host's NPUs (the worker leaves npu-smi to
#: Triton): the Nodes page's memory and health figures should not be ten minutes old.
DEVICES_EVERY_S = 60.0
RETRY_FAILED_AFTER_S = 60.0
_CACHE_FILE = ".serving-facts.json"


def ask_every_s(env: Mapping[str, str], configured: float) -> float:
    """How long an answer is kept: ``configured`` (``SERVING_FACTS_SECONDS``), or at most
    :data:`DEVICES_EVERY_S` where the answer is also this host's npu-smi table."""
    return configured if worker_runs_npu_smi(env) else min(configured, DEVICES_EVERY_S)


def remembered_serving_facts(
    store: ModelStore,
    runtime: ServingRuntime,
    *,
    every_s: float = ASK_EVERY_S,
    now: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """The serving side's facts, asked again only when the last answer is older than
    ``every_s`` (a failed one after a minute): the probe starts a stub process in the serving
    Triton, which a host report every 30 s need not do. Kept as JSON beside the repository, so
    every worker process of the host shares it."""
    path = store.root / _CACHE_FILE
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        kept = None
    if isinstance(kept, dict):
        age = now() - float(kept.get("asked_at") or 0)
        fresh = every_s if kept.get("available") else min(every_s, RETRY_FAILED_AFTER_S)
        if 0 <= age < fresh:
            return kept | {"needs_restart": needs_restart(store)}
    facts = ask_serving_side(store, runtime, now=now)
    with contextlib.suppress(OSError):  # a read-only or full store: the next report asks again
        store.root.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps(facts, default=str), encoding="utf-8")
        scratch.replace(path)
    return json.loads(json.dumps(facts, default=str)) | {"needs_restart": needs_restart(store)}

"""The fake machine the fake ``acl`` runs on: its NPUs and its SoC (tests only; not pyACL).

A real host's runtime and its ``npu-smi`` describe the same chips. So, by default, this fake
reads the table the fake ``npu-smi`` prints (``FAKE_NPU_SMI_SAMPLE``, same default) and takes
its devices and SoC from there:

* the devices are the table's logical ids (``npu-smi info -m``'s ``Chip Logic ID``);
  ``ASCEND_RT_VISIBLE_DEVICES`` (a comma-separated list of logical ids) narrows them, and
  the runtime then numbers the visible ones 0, 1, ... (user device ids; docs/npu-smi.md);
* the SoC is ``"Ascend"`` + the table's chip name (``310P3`` -> ``Ascend310P3``), what
  ``acl.get_soc_name()`` returns and the only chip whose OMs load. An Atlas A3 table
  (``Chip  Phy-ID``) names only the family, ``Ascend910``; the real runtime then answers the
  exact SoC, which the table does not show, and this fake answers ``Ascend910_9391``
  (:data:`A3_SOC`, the fake's own choice).

``FAKE_ACL_DEVICE_COUNT`` (devices 0..N-1) and ``FAKE_ACL_SOC`` override the table.

With ``FAKE_NPU_OWNERS_DIR`` set, a chip another container holds cannot be opened
(``tests/fakes/npu_owners.py``, shared with the fake npu-smi; keyed by logical id).
"""

from __future__ import annotations

import os
import sys
from functools import cache
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path
from types import ModuleType

#: The fake npu-smi script, beside this package (resolved: the toolkit links to the package).
NPU_SMI_SCRIPT = Path(__file__).resolve().parents[1] / "npu-smi"
#: Who holds each chip across containers, shared with the fake npu-smi (same folder).
NPU_OWNERS = NPU_SMI_SCRIPT.parent / "npu_owners.py"
#: The SoC this fake gives an Atlas A3 table, which prints only ``Ascend910``: the first of the
#: A3 SoCs ATC knows (docs/atc.md#soc-versions); made up, ``FAKE_ACL_SOC`` picks another.
A3_SOC = "Ascend910_9391"


def _load(name: str, path: Path) -> ModuleType:
    """The file at ``path`` as the module ``name``, once per process (``sys.modules``)."""
    if name in sys.modules:
        return sys.modules[name]
    loader = SourceFileLoader(name, str(path))
    spec = spec_from_loader(loader.name, loader)
    assert spec is not None
    module = module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


@cache
def _npu_smi() -> ModuleType:
    """The fake npu-smi script as a module, for its sample lookup and table reader."""
    return _load("_fake_npu_smi", NPU_SMI_SCRIPT)


def owners() -> ModuleType:
    """``tests/fakes/npu_owners.py``: the chips other containers hold (one per process)."""
    return _load("_fake_npu_owners", NPU_OWNERS)


def _table_chips() -> list[dict[str, object]]:
    """The chips of the table the fake npu-smi prints now (empty if it cannot be read)."""
    smi = _npu_smi()
    sample = smi._file("FAKE_NPU_SMI_SAMPLE", smi.DEFAULT_SAMPLE)
    try:
        table = sample.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    chips: list[dict[str, object]] = smi._chips(table)
    return chips


def logical_ids() -> list[int]:
    """The logical ids of the table's chips, as ``npu-smi info -m`` numbers them."""
    ids: list[int] = _npu_smi()._logical_ids(_table_chips())
    return ids


def visible_logical_ids() -> list[int]:
    """The logical ids behind this process's devices, in device order (device i is the i-th)."""
    count = os.environ.get("FAKE_ACL_DEVICE_COUNT")
    if count:
        return list(range(int(count)))
    ids = logical_ids()
    visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if visible is None:
        return ids
    # User ids 0..k-1 stand for the listed logical ids; entries naming no device are
    # dropped (the fake's own choice: what the runtime does with them was not checked).
    listed = [int(v) for v in visible.split(",") if v.strip().isdigit()]
    return [v for v in dict.fromkeys(listed) if v in ids]


def device_ids() -> list[int]:
    """The device ids ``acl.rt.set_device`` accepts in this process."""
    count = os.environ.get("FAKE_ACL_DEVICE_COUNT")
    if count:
        return list(range(int(count)))
    if os.environ.get("ASCEND_RT_VISIBLE_DEVICES") is None:
        return logical_ids()
    return list(range(len(visible_logical_ids())))


def logical_id(device: int) -> int:
    """The logical id (the chip) behind device id ``device`` of :func:`device_ids`."""
    ids = device_ids()
    return visible_logical_ids()[ids.index(device)]


def soc_name() -> str:
    """The SoC of this fake machine: ``FAKE_ACL_SOC``, or "Ascend" + the table's chip name."""
    override = os.environ.get("FAKE_ACL_SOC")
    if override:
        return override
    chips = _table_chips()
    if not chips:
        return ""
    if chips[0].get("phy") is not None:  # an Atlas A3 table: the family name only
        return A3_SOC
    name = str(chips[0]["name"])
    return name if name.startswith("Ascend") else f"Ascend{name}"

"""Read ``npu-smi info -m``: which logical device id each chip has (Django-free).

The HBM layout of the ``info`` table (910, 910B) prints no ``Device`` column, so the id that
``aclrtSetDevice`` takes is read from the ``Chip Logic ID`` column of ``npu-smi info -m``
instead (docs/npu-smi.md#other-subcommands). :func:`parse_npu_smi_mapping` never raises:
lines it cannot read are left out.
"""

from __future__ import annotations

from model_store.devices.info_table import _to_int

__all__ = ["parse_npu_smi_mapping"]


def parse_npu_smi_mapping(text: str) -> dict[tuple[int, int], int]:
    """Parse ``npu-smi info -m``: ``(NPU id, chip id) -> Chip Logic ID``.

    The report is a title line (``NPU ID  Chip ID  Chip Logic ID  [Chip Phy-ID]  Chip Name``)
    and one line per chip, each starting with a tab. Chips without a logical id (the MCU,
    printed ``-``) are left out, as is anything before the title line
    (docs/npu-smi.md#other-subcommands).

    Example:
        >>> parse_npu_smi_mapping("\\tNPU ID  Chip ID  Chip Logic ID  Chip Name\\n"
        ...                       "\\t6  0  0  Ascend 910B1\\n\\t6  1  -  Mcu\\n")
        {(6, 0): 0}
    """
    found: dict[tuple[int, int], int] = {}
    titled = False
    for raw in (text or "").splitlines():
        if "Chip Logic ID" in raw:
            titled = True
            continue
        ids = [_to_int(token) for token in raw.split()[:3]]
        if titled and len(ids) == 3 and None not in ids:
            npu, chip, logic = (i for i in ids if i is not None)
            found[(npu, chip)] = logic
    return found

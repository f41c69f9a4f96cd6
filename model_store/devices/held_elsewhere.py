"""An NPU held by another container: the one wording of that cause (Django-free).

On stock Ascend drivers a chip opened by a process in one container cannot be opened from
another container until that process ends. pyACL then fails with 507008 (plog
``halGetDeviceInfo ... ret:87``, ``init soc version failed, ret = 507008``) and npu-smi with
``dcmi module initialize failed. ret is -8005``: vllm-project/vllm-ascend #2542 (310P, compose),
#632 and #248 (910B), #2698 ("usually ... the device is already occupied by other
containers"). Huawei's container sharing mode lifts it: ``npu-smi set -t device-share -i
<card> -c <chip> -d 1``, as root on the host, per chip, off by default and reset at every
reboot (docs/npu-smi.md#an-npu-held-by-another-container).

Every message of the hub that names this cause is built here. The one exception is the ``acl``
Triton backend (``model_store/backends/acl/model.py``), which runs inside Triton's Python stub
where ``model_store`` cannot be imported: it keeps an English copy of :func:`held_elsewhere_hint`
that a unit test compares with this one.

Example:
    >>> device_share_command(2, 0)
    'npu-smi set -t device-share -i 2 -c 0 -d 1'
    >>> npu_smi_says_held("dcmi module initialize failed. ret is -8005")
    True
"""

from __future__ import annotations

import re

from model_store.text import Message, Said, say

__all__ = [
    "NPU_SMI_HELD_CODE",
    "device_share_command",
    "held_elsewhere_hint",
    "is_npu_smi_held_reason",
    "npu_smi_held_advice",
    "npu_smi_held_reason",
    "npu_smi_says_held",
]

#: The dcmi code npu-smi prints when it cannot open a chip another container holds.
NPU_SMI_HELD_CODE = "-8005"
_HELD_CODE = re.compile(r"(?<![\w-])-8005(?!\d)")


def _sharing(card: int | str | None, chip: int | str | None) -> Message:
    return say(
        "a chip can be opened from one container at a time unless container sharing is on: "
        "`%(command)s`, as root on the host, after every reboot",
        command=device_share_command(card, chip),
    )


def device_share_command(card: int | str | None = None, chip: int | str | None = None) -> str:
    """The command that turns container sharing on for one chip; placeholders where unknown."""
    card_text = "<card>" if card is None else str(card)
    chip_text = "<chip>" if chip is None else str(chip)
    return f"npu-smi set -t device-share -i {card_text} -c {chip_text} -d 1"


def held_elsewhere_hint(card: int | str | None = None, chip: int | str | None = None) -> Message:
    """The cause in a clause: "the NPU is held by another container (... the command ...)"."""
    return say("the NPU is held by another container (%(sharing)s)", sharing=_sharing(card, chip))


def npu_smi_says_held(text: str | bytes | None) -> bool:
    """Whether npu-smi's output carries dcmi's ``-8005`` (``dcmi module initialize failed. ret
    is -8005``)."""
    if not text:
        return False
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return bool(_HELD_CODE.search(text))


def npu_smi_held_reason(failure: Said) -> Message:
    """Why npu-smi gave no table when it printed ``-8005``; ``failure`` is what it printed
    (e.g. "npu-smi info failed with exit code 255: dcmi module initialize failed. ret is
    -8005")."""
    return say(
        "npu-smi could not open the NPU: it is held by another container (%(sharing)s). "
        "npu-smi said: %(failure)s",
        sharing=_sharing(None, None),
        failure=failure,
    )


def is_npu_smi_held_reason(reason: object) -> bool:
    """Whether ``reason`` (a devices report's) is :func:`npu_smi_held_reason`'s."""
    return isinstance(reason, Message) and reason.template == _HELD_REASON.template


def npu_smi_held_advice() -> Message:
    """What to do when npu-smi could not open the NPU (``-8005``)."""
    return say(
        "Stop the other container that uses the NPU, or turn container sharing on for each chip "
        "with `%(command)s` as root on the host (card: the NPU id, chip: the Chip id of "
        "`npu-smi info`; it is off by default and reset at every reboot). In the hub's default "
        "compose layout only the Triton container should have the NPU: do not give it to the "
        "worker or to another container as well. If no other container holds it: inside a "
        "container npu-smi works for root only, and needs /usr/local/bin/npu-smi, "
        "/usr/local/dcmi and the driver's lib64 mounted.",
        command=device_share_command(),
    )


#: A reason of :func:`npu_smi_held_reason`, to recognise others by their template.
_HELD_REASON = npu_smi_held_reason("")

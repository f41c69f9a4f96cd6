"""How the interface of one version differs from another's, in plain words.

Before a switch the web layer compares the recorded signatures (inputs and outputs with data
types and shapes) of the serving version and the one about to serve, and asks for a
confirmation when a change would break existing clients. Pure functions over dicts: nothing
here reads files or talks to Triton.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

ChangeKind = Literal["breaking", "warning", "info"]


@dataclass(frozen=True)
class Change:
    """One difference between the interfaces of two versions.

    Attributes:
        kind: ``breaking`` (existing clients will get errors), ``warning`` (some clients
            may get errors or different shapes) or ``info`` (nothing changes for clients).
        tensor: The input or output concerned, as named in the old version ("" for the
            whole model).
        message: What changed and what it means for clients, in plain words.
    """

    kind: ChangeKind
    tensor: str
    message: str


def _is_fixed(dim: object) -> bool:
    """A dim is fixed when it is a positive int; -1, 0, None and names are dynamic."""
    return isinstance(dim, int) and not isinstance(dim, bool) and dim > 0


def _show_dims(dims: Sequence[object] | None) -> str:
    if dims is None:
        return "unknown"
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _tensors(signature: Mapping[str, Any], role: str) -> list[Mapping[str, Any]]:
    return [t for t in signature.get(role) or [] if isinstance(t, Mapping) and "name" in t]


def _dims_change(role: str, name: str, old: Any, new: Any) -> Change | None:
    """Compares the shapes of one tensor present in both versions."""
    label = f"{role} {name!r}"
    if old is None and new is None:
        return None
    if old is None or new is None:
        return Change(
            "warning",
            name,
            f"{label}: the shape changes from {_show_dims(old)} to {_show_dims(new)}; "
            "check what clients send and expect.",
        )
    if len(old) != len(new):
        return Change(
            "breaking",
            name,
            f"{label} changes rank from {len(old)} to {len(new)} "
            f"({_show_dims(old)} -> {_show_dims(new)}); clients built for the old shape "
            "will be rejected.",
        )
    axes = []
    for axis, (a, b) in enumerate(zip(old, new, strict=True)):
        if _is_fixed(a) and _is_fixed(b) and a != b:
            axes.append(f"axis {axis} {a} -> {b}")
        elif _is_fixed(a) != _is_fixed(b):
            before = a if _is_fixed(a) else "any size"
            after = b if _is_fixed(b) else "any size"
            axes.append(f"axis {axis} {before} -> {after}")
    if not axes:
        return None
    consequence = (
        "clients sending the old size will be rejected"
        if role == "Input"
        else "clients that rely on the old size must be checked"
    )
    return Change(
        "warning",
        name,
        f"{label} changes shape from {_show_dims(old)} to {_show_dims(new)} "
        f"({'; '.join(axes)}); {consequence}.",
    )


def _tensor_changes(
    role: str, old: Mapping[str, Any], new: Mapping[str, Any], new_name: str | None = None
) -> list[Change]:
    """Changes of one tensor found in both versions (possibly under a new name)."""
    name = str(old["name"])
    label = f"{role} {name!r}"
    changes = []
    if new_name is not None:
        who = "send" if role == "Input" else "ask for"
        changes.append(
            Change(
                "breaking",
                name,
                f"{label} is renamed to {new_name!r}; clients that {who} {name!r} "
                "will be rejected.",
            )
        )
    if old.get("dtype") != new.get("dtype"):
        changes.append(
            Change(
                "breaking",
                name,
                f"{label} changes data type from {old.get('dtype')} to {new.get('dtype')}; "
                "clients using the old type will be rejected or misread the data.",
            )
        )
    dims = _dims_change(role, name, old.get("dims"), new.get("dims"))
    if dims is not None:
        changes.append(dims)
    return changes


def _role_changes(
    role: str, old_list: list[Mapping[str, Any]], new_list: list[Mapping[str, Any]]
) -> list[Change]:
    """Changes among the inputs (or the outputs) of two versions."""
    new_by_name = {str(t["name"]): t for t in new_list}
    old_names = {str(t["name"]) for t in old_list}
    added = {i: t for i, t in enumerate(new_list) if str(t["name"]) not in old_names}
    changes: list[Change] = []
    for index, old in enumerate(old_list):
        name = str(old["name"])
        if name in new_by_name:
            changes += _tensor_changes(role, old, new_by_name[name])
        elif index in added:
            # Same position, different name: most likely a rename (an exporter that names
            # tensors differently), which is still a break for clients using the old name.
            new = added.pop(index)
            changes += _tensor_changes(role, old, new, new_name=str(new["name"]))
        else:
            consequence = (
                "clients that send it will be rejected"
                if role == "Input"
                else "clients that ask for it will get an error"
            )
            changes.append(Change("breaking", name, f"{role} {name!r} is removed; {consequence}."))
    for new in added.values():
        name = str(new["name"])
        if role == "Input":
            changes.append(
                Change(
                    "breaking",
                    name,
                    f"New input {name!r} is required; existing clients do not send it and "
                    "will be rejected.",
                )
            )
        else:
            changes.append(
                Change(
                    "info",
                    name,
                    f"New output {name!r}; existing clients are not affected.",
                )
            )
    return changes


def signature_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Lists how the interface of ``new`` differs from ``old``, most relevant first per tensor.

    Signatures are ``{"inputs": [{"name", "dtype", "dims"}], "outputs": [...]}`` as recorded
    for each version; dims are full shapes (batch included), each an int, or -1 / None / a
    symbolic name for a dynamic axis; ``dims`` None means even the rank is unknown.

    Breaking: a removed or renamed input or output, a new input (clients do not send it),
    a changed data type, a changed rank. Warning: a fixed size that changes, or an axis that
    turns dynamic or fixed. Info: a new output. Renaming one symbolic axis into another
    (``batch`` -> ``N``) is not a change.

    Args:
        old: The signature of the version serving now.
        new: The signature of the version about to serve.

    Returns:
        The changes, inputs first; empty when the interfaces match. When either signature
        was never recorded, a single warning says the two cannot be compared.
    """
    known = all(("inputs" in s or "outputs" in s) for s in (old, new))
    if not known:
        return [
            Change(
                "warning",
                "",
                "The interface of one of the two versions was not recorded, so they cannot be "
                "compared; check inputs and outputs by hand.",
            )
        ]
    inputs = _role_changes("Input", _tensors(old, "inputs"), _tensors(new, "inputs"))
    outputs = _role_changes("Output", _tensors(old, "outputs"), _tensors(new, "outputs"))
    return inputs + outputs

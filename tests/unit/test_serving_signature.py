"""signature_changes: how a new version's interface differs from the serving one."""

from __future__ import annotations

from typing import Any

from model_store.serving.signature import Change, signature_changes


def _t(name: str, dims: list[Any] | None, dtype: str = "TYPE_FP32") -> dict[str, Any]:
    return {"name": name, "dtype": dtype, "numpy": "float32", "dims": dims}


def _sig(inputs: list[dict[str, Any]], outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"inputs": inputs, "outputs": outputs}


BASE = _sig([_t("x", ["batch", 4])], [_t("y", ["batch", 3])])


def _kinds(changes: list[Change]) -> list[tuple[str, str]]:
    return [(c.kind, c.tensor) for c in changes]


def test_identical_signatures_have_no_changes() -> None:
    assert signature_changes(BASE, BASE) == []


def test_renaming_a_symbolic_axis_is_not_a_change() -> None:
    new = _sig([_t("x", ["N", 4])], [_t("y", [-1, 3])])
    assert signature_changes(BASE, new) == []


def test_none_and_minus_one_are_both_dynamic() -> None:
    old = _sig([_t("x", [None, 4])], [_t("y", [-1, 3])])
    new = _sig([_t("x", [-1, 4])], [_t("y", [None, 3])])
    assert signature_changes(old, new) == []


def test_removed_input_is_breaking() -> None:
    old = _sig([_t("x", ["batch", 4]), _t("mask", ["batch", 4])], [_t("y", ["batch", 3])])
    changes = signature_changes(old, BASE)
    assert _kinds(changes) == [("breaking", "mask")]
    assert "removed" in changes[0].message
    assert "rejected" in changes[0].message


def test_renamed_input_at_the_same_position_is_one_breaking_change() -> None:
    new = _sig([_t("input", ["batch", 4])], [_t("y", ["batch", 3])])
    changes = signature_changes(BASE, new)
    assert _kinds(changes) == [("breaking", "x")]
    assert "renamed to 'input'" in changes[0].message


def test_renamed_output_is_breaking() -> None:
    new = _sig([_t("x", ["batch", 4])], [_t("logits", ["batch", 3])])
    changes = signature_changes(BASE, new)
    assert _kinds(changes) == [("breaking", "y")]
    assert "renamed to 'logits'" in changes[0].message


def test_removed_output_is_breaking() -> None:
    old = _sig([_t("x", ["batch", 4])], [_t("y", ["batch", 3]), _t("probs", ["batch", 3])])
    changes = signature_changes(old, BASE)
    assert _kinds(changes) == [("breaking", "probs")]
    assert "ask for it" in changes[0].message


def test_new_required_input_is_breaking() -> None:
    new = _sig([_t("x", ["batch", 4]), _t("mask", ["batch", 4])], [_t("y", ["batch", 3])])
    changes = signature_changes(BASE, new)
    assert _kinds(changes) == [("breaking", "mask")]
    assert "do not send it" in changes[0].message


def test_new_output_is_info() -> None:
    new = _sig([_t("x", ["batch", 4])], [_t("y", ["batch", 3]), _t("probs", ["batch", 3])])
    changes = signature_changes(BASE, new)
    assert _kinds(changes) == [("info", "probs")]
    assert "not affected" in changes[0].message


def test_changed_dtype_is_breaking() -> None:
    new = _sig([_t("x", ["batch", 4], "TYPE_FP16")], [_t("y", ["batch", 3])])
    changes = signature_changes(BASE, new)
    assert _kinds(changes) == [("breaking", "x")]
    assert "TYPE_FP32 to TYPE_FP16" in changes[0].message


def test_changed_rank_is_breaking() -> None:
    new = _sig([_t("x", ["batch", 2, 2])], [_t("y", ["batch", 3])])
    changes = signature_changes(BASE, new)
    assert _kinds(changes) == [("breaking", "x")]
    assert "rank from 2 to 3" in changes[0].message


def test_changed_fixed_dim_is_a_warning() -> None:
    new = _sig([_t("x", ["batch", 8])], [_t("y", ["batch", 3])])
    changes = signature_changes(BASE, new)
    assert _kinds(changes) == [("warning", "x")]
    assert "axis 1 4 -> 8" in changes[0].message


def test_dynamic_to_fixed_and_back_are_warnings() -> None:
    fixed_batch = _sig([_t("x", [1, 4])], [_t("y", ["batch", 32])])
    changes = signature_changes(BASE, fixed_batch)
    assert _kinds(changes) == [("warning", "x"), ("warning", "y")]
    assert "axis 0 any size -> 1" in changes[0].message
    assert "axis 1 3 -> 32" in changes[1].message
    back = signature_changes(fixed_batch, BASE)
    assert _kinds(back) == [("warning", "x"), ("warning", "y")]
    assert "axis 0 1 -> any size" in back[0].message


def test_several_changes_on_one_tensor_are_all_reported() -> None:
    new = _sig([_t("x", ["batch", 4, 1], "TYPE_INT64")], [_t("y", ["batch", 3])])
    assert _kinds(signature_changes(BASE, new)) == [("breaking", "x"), ("breaking", "x")]


def test_unknown_rank_on_one_side_is_a_warning() -> None:
    new = _sig([_t("x", None)], [_t("y", ["batch", 3])])
    changes = signature_changes(BASE, new)
    assert _kinds(changes) == [("warning", "x")]
    assert "unknown" in changes[0].message


def test_unrecorded_signature_cannot_be_compared() -> None:
    changes = signature_changes({}, BASE)
    assert _kinds(changes) == [("warning", "")]
    assert "cannot be compared" in changes[0].message


def test_changes_are_plain_dicts_for_the_api() -> None:
    new = _sig([_t("x", ["batch", 4])], [_t("y", ["batch", 3]), _t("z", ["batch"])])
    (change,) = signature_changes(BASE, new)
    assert vars(change) == {
        "kind": "info",
        "tensor": "z",
        "message": "New output 'z'; existing clients are not affected.",
    }

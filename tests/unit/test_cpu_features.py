"""model_store/cpu_features.py: when ONNX Runtime's int8 kernels can saturate."""

from __future__ import annotations

from pathlib import Path

from model_store.cpu_features import cpu_flags, int8_saturates


def test_x86_without_vnni_saturates_and_with_vnni_or_amx_does_not() -> None:
    assert int8_saturates(frozenset({"avx2", "fma"}), "x86_64")
    assert int8_saturates(frozenset({"avx512f", "avx512bw"}), "x86_64")
    assert not int8_saturates(frozenset({"avx2", "avx_vnni"}), "x86_64")
    assert not int8_saturates(frozenset({"avx512f", "avx512_vnni"}), "x86_64")
    assert not int8_saturates(frozenset({"amx_int8"}), "x86_64")


def test_arm_never_saturates() -> None:
    assert not int8_saturates(frozenset({"asimd"}), "aarch64")


def test_flags_are_read_from_cpuinfo_of_either_architecture(tmp_path: Path) -> None:
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_vnni\n\nprocessor\t: 1\n")
    assert cpu_flags(x86) == {"fpu", "avx2", "avx512_vnni"}
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd asimddp\n")
    assert "asimddp" in cpu_flags(arm)
    assert cpu_flags(tmp_path / "missing") == frozenset()

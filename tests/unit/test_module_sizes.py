"""No module over 600 lines in the hub's code (docs/architecture.md#floors-and-rooms-kept-apart).

A module that long holds several things; whoever changes one of them has to read the others.
Tests and migrations are exempt; so are Triton's Python backends (model_store/backends/), which
Triton loads as one file each and which say so at their top.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 600
PACKAGES = ("model_store", "webapp", "workers", "tools")
BACKENDS = ROOT / "model_store" / "backends"


def _sources() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def test_no_module_is_over_the_limit() -> None:
    over = {
        str(path.relative_to(ROOT)): lines
        for path in _sources()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > LIMIT
        and BACKENDS not in path.parents
    }
    assert over == {}, f"modules over {LIMIT} lines: {over}"


def test_a_long_backend_says_why_it_is_one_file() -> None:
    for path in sorted(BACKENDS.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > LIMIT:
            head = "\n".join(text.splitlines()[:60]).lower()
            assert "one file" in head, f"{path.relative_to(ROOT)} does not say why it is one file"

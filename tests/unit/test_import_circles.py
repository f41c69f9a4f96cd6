"""No import circle between the hub's files (docs/architecture.md#floors-and-rooms-kept-apart).

Every import counts: at module level, inside a function, under ``TYPE_CHECKING``. A circle
means two files cannot be understood, changed or tested apart; grimp (the graph import-linter
is built on) finds them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("model_store", "webapp", "workers", "tools")


def circles(graph: grimp.ImportGraph) -> Iterator[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & set(modules)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in edges[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(modules)))
    try:
        for module in modules:
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    yield from found


def test_no_file_imports_itself_through_others() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))
    found = list(circles(graph))
    assert found == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for name in ("a", "a.x", "a.y", "a.z"):
        graph.add_module(name)
    graph.add_import(importer="a.x", imported="a.y")
    graph.add_import(importer="a.y", imported="a.x")
    graph.add_import(importer="a.z", imported="a.x")
    assert list(circles(graph)) == [["a.x", "a.y"]]

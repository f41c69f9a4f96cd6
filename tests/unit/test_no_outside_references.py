"""The repository cites only itself and public sources, and its docs/ citations resolve.

Team notes kept outside the repository are not available to the next maintainer, so no file
here may name them. Facts the code relies on live in ``docs/`` instead, and comments cite a
page and heading there (``docs/<page>.md#<anchor>``); every such citation must point at a page
and a heading that exist. Relative links between the docs pages are checked the same way.
"""

from __future__ import annotations

import os
import re
import subprocess  # for its exception types only; git runs through model_store.spawn
import unicodedata
from functools import cache
from pathlib import Path

import pytest

from model_store import spawn

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: Names of notes that live outside the repository (built so this file does not match itself).
OUTSIDE_NOTES = re.compile(
    r"\b(?:FACTS|RECIPES|ARCHITECTURE|STYLE|UI)\.md\b|\.\./shared\b|/work/" + "shared"
)

#: A repository-relative citation of a docs page, e.g. docs/ge-backend.md#log-phrases.
#: Not preceded by a path character, so upstream paths such as ``server/docs/x.md`` or
#: ``/blob/main/docs/x.md`` inside URLs are not mistaken for ours.
DOCS_CITATION = re.compile(r"(?<![\w./-])(docs/(?:[\w-]+/)*[\w.-]+?\.md)(?:#([\w-]+))?")

#: A Markdown link target: [text](target).
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")

#: Directories that are never part of the project's own text.
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "var",
    "test-artifacts",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
}


def _git_files() -> list[Path] | None:
    """Tracked and new (not ignored) files, or None when git cannot say."""
    try:
        result = spawn.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            timeout=60,
            cwd=ROOT,
            capture_output=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    names = result.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [ROOT / name for name in names if name]


def _walked_files() -> list[Path]:
    found = []
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        found += [Path(top) / name for name in files]
    return found


@cache
def project_texts() -> dict[str, str]:
    """Every text file of the project, by repository-relative path."""
    paths = _git_files()
    if paths is None:
        paths = _walked_files()
    texts = {}
    for path in paths:
        rel = path.relative_to(ROOT).as_posix()
        if set(Path(rel).parts) & SKIPPED_DIRS or not path.is_file():
            continue
        with path.open("rb") as handle:
            head = handle.read(8192)
            if b"\0" in head:
                continue  # binary: models, images
            data = head + handle.read()
        try:
            texts[rel] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts


def github_anchor(heading: str, seen: dict[str, int]) -> str:
    """The id GitHub gives a Markdown heading (lower case, punctuation dropped, - for spaces)."""
    text = re.sub(r"`|\*\*|__", "", heading.strip()).lower()
    kept = []
    for char in text:
        if char in " -_" or unicodedata.category(char)[0] in "LN":
            kept.append(char)
    slug = "".join(kept).replace(" ", "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"


@cache
def anchors_of(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    anchors = set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match and not in_fence:
            anchors.add(github_anchor(match.group(1), seen))
        anchors.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
    return frozenset(anchors)


def _problem(target: Path, anchor: str | None) -> str | None:
    if not target.is_file():
        return "no such file"
    if anchor and anchor not in anchors_of(target):
        return f"no heading with anchor #{anchor}"
    return None


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def test_the_project_has_text_files_to_check() -> None:
    texts = project_texts()
    assert "model_store/serving/switching.py" in texts
    assert "docs/README.md" in texts


def test_no_file_cites_notes_kept_outside_the_repository() -> None:
    found = [
        f"{rel}:{_line_of(text, m.start())}: {m.group(0)}"
        for rel, text in sorted(project_texts().items())
        for m in OUTSIDE_NOTES.finditer(text)
    ]
    assert not found, (
        "these cite notes that are not in the repository; cite a docs/ page or the public "
        "upstream source instead:\n" + "\n".join(found)
    )


def test_every_docs_citation_points_at_an_existing_page_and_heading() -> None:
    cited = 0
    broken = []
    for rel, text in sorted(project_texts().items()):
        if rel.endswith(".po"):
            continue  # a catalogue repeats the code's text, wrapped by gettext mid-anchor
        for m in DOCS_CITATION.finditer(text):
            cited += 1
            problem = _problem(ROOT / m.group(1), m.group(2))
            if problem:
                broken.append(f"{rel}:{_line_of(text, m.start())}: {m.group(0)}: {problem}")
    assert not broken, "\n".join(broken)
    assert cited > 0, "no comment cites docs/ at all; is the pattern still right?"


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_links_between_docs_pages_resolve(page: str) -> None:
    path = DOCS / page
    broken = []
    for target in MD_LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # http(s) and other absolute URLs
        file_part, _, anchor = target.partition("#")
        problem = _problem((path.parent / file_part) if file_part else path, anchor or None)
        if problem:
            broken.append(f"{page}: ({target}): {problem}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("How the model file is found", "how-the-model-file-is-found"),
        ("Statistics, reload and unload", "statistics-reload-and-unload"),
        ("Python-based backends", "python-based-backends"),
        ("`npu_ge` and **ATC**", "npu_ge-and-atc"),
    ],
)
def test_anchors_are_computed_the_way_github_does(heading: str, anchor: str) -> None:
    assert github_anchor(heading, {}) == anchor


def test_repeated_headings_get_numbered_anchors() -> None:
    seen: dict[str, int] = {}
    assert [github_anchor("Notes", seen) for _ in range(3)] == ["notes", "notes-1", "notes-2"]

"""Template text a reader sees that is not marked for translation (docs/i18n.md).

``python -m tools.i18n_unmarked`` prints, for every template under ``templates/``, how many
strings are not marked, and each one with ``-v``. ``--enforce`` fails (exit 1) when any template
but those of :data:`NOT_YET_MARKED` has one: ``make lint`` runs it, so new pages start out
checked. Paths given on the command line are checked (and enforced, with ``--enforce``) instead.

What counts: text between tags, and the ``title``, ``placeholder``, ``aria-label`` and ``alt``
attributes, outside ``{% translate %}`` and ``{% blocktranslate %}``; string literals given to
``default``, ``default_if_none``, ``yesno`` and ``pluralize`` in ``{{ }}`` (mark them as
``_("...")``). What does not: ``<code>``, ``<pre>``, ``<kbd>``, ``<samp>``, ``<script>`` and
``<style>``, elements with ``translate="no"``, Django comments, numbers, punctuation, units,
and the names and terms of :data:`KEPT_IN_ENGLISH`. It reads templates as text, without Django:
a heuristic that errs on the side of reporting.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"

#: Templates not yet fully marked, left out of `--enforce` (paths under templates/). Every
#: other template is enforced, so a new page starts out checked.
NOT_YET_MARKED: list[str] = []

#: Product names and terms every page keeps in English, in both languages (docs/glossary.md).
KEPT_IN_ENGLISH_PHRASES = [
    "Triton Model Hub", "Triton Inference Server", "AI Core", "AI CPU", "req/s", "°C",
]  # fmt: skip
KEPT_IN_ENGLISH = {
    # Products, formats and protocols
    "Triton", "ONNX", "ATC", "CANN", "API", "NPU", "HBM", "GE", "OM", "AIPP", "ACL", "pyACL",
    "Ascend", "npu-smi", "JSON", "CSV", "HTTP", "HTTPS", "gRPC", "URL", "UTC", "CPU", "GPU",
    "Prometheus", "Redis", "PostgreSQL", "SQLite", "Celery", "Django", "OpenAPI", "SHA-256",
    "FP16", "FP32", "INT8", "TensorRT", "Python", "Docker", "KServe", "htmx", "ID", "OK",
    "SoC", "NPUs", "config.pbtxt", "AICore", "RGB", "BGR", "NCHW", "NHWC", "Top-k", "Top-1",
    "Top-5", "QDQ", "AMCT", "msModelSlim",
    "p50", "p90", "p95", "p99",
    # Units
    "s", "ms", "µs", "B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB", "px", "x",
    "W", "min", "rps", "v",
}  # fmt: skip

#: Attribute values that are not prose: example inputs shown as placeholders, and the
#: breadcrumb's label, which Pico's CSS selects (``nav[aria-label=breadcrumb]``).
KEPT_ATTRIBUTE_VALUES = {
    "breadcrumb", "ci-pipeline", "/srv/triton/models", "soc=Ascend310P3, rack=r7",
}  # fmt: skip

#: Elements whose content is code, data or machine text, never translated.
SKIPPED_ELEMENTS = {"code", "pre", "kbd", "samp", "script", "style"}
CHECKED_ATTRIBUTES = {"title", "placeholder", "aria-label", "alt"}
VOID_ELEMENTS = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr",
}  # fmt: skip

# Placeholders the Django syntax is replaced with before the HTML is read: a marked string
# and any other construct both separate the text around them.
_MARKED = "\x01"
_OTHER = "\x00"
_DJANGO = re.compile(
    r"\{%\s*comment\s*%\}.*?\{%\s*endcomment\s*%\}"
    r"|\{%\s*block(?:translate|trans)\b.*?\{%\s*endblock(?:translate|trans)\s*%\}"
    r"|\{#.*?#\}"
    r"|\{%.*?%\}"
    r"|\{\{.*?\}\}",
    re.S,
)
_TEXT_FILTERS = re.compile(
    r"\|\s*(default|default_if_none|yesno|pluralize)\s*:\s*(\"[^\"]*\"|'[^']*')"
)
_WORD = re.compile(r"[^\W\d_][\w.+-]*")


@dataclass(frozen=True)
class Unmarked:
    template: str
    line: int
    text: str


_OPEN_ATTRIBUTE = re.compile(r"([\w:-]+)\s*=\s*(\"[^\"]*|'[^']*)$")


def _tag_context(source: str, position: int) -> tuple[bool, str | None]:
    """Whether ``position`` is inside an HTML start tag, and the attribute whose quoted value
    it is in (None between attributes, or outside a tag)."""
    opened = source.rfind("<", 0, position)
    if opened < 0 or source.rfind(">", 0, position) > opened:
        return False, None
    if not re.match(r"<[A-Za-z]", source[opened : opened + 2]):
        return False, None
    attribute = _OPEN_ATTRIBUTE.search(source, opened, position)
    return True, attribute.group(1).lower() if attribute else None


def _replace_django(source: str, template: str, found: list[Unmarked]) -> str:
    def placeholder(match: re.Match[str]) -> str:
        construct = match.group(0)
        line = source.count("\n", 0, match.start()) + 1
        in_tag, attribute = _tag_context(source, match.start())
        if construct.startswith("{{") and (not in_tag or attribute in CHECKED_ATTRIBUTES):
            for _name, literal in _TEXT_FILTERS.findall(construct):
                if _is_text(literal[1:-1]):
                    found.append(Unmarked(template, line, literal))
        if in_tag and attribute is None:
            # Between attributes (``<option {% if a %}selected{% endif %}>``): no text here,
            # and a placeholder would stop the HTML parser from reading the tag.
            return " " + "\n" * construct.count("\n")
        marked = re.match(r"\{%\s*(block)?(translate|trans)\b", construct)
        kind = _MARKED if marked else _OTHER
        # Keep the line numbers of what follows.
        return kind + "\n" * construct.count("\n")

    return _DJANGO.sub(placeholder, source)


def _is_text(fragment: str) -> bool:
    """Whether ``fragment`` has a word a reader would want translated."""
    for phrase in KEPT_IN_ENGLISH_PHRASES:
        fragment = fragment.replace(phrase, " ")
    return any(word.rstrip(".-") not in KEPT_IN_ENGLISH for word in _WORD.findall(fragment))


class _TextFinder(HTMLParser):
    def __init__(self, template: str, found: list[Unmarked]) -> None:
        super().__init__(convert_charrefs=True)
        self.template = template
        self.found = found
        self.open: list[tuple[str, bool]] = []  # (tag, skipped)

    @property
    def skipping(self) -> bool:
        return bool(self.open) and self.open[-1][1]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        skipped = self.skipping or tag in SKIPPED_ELEMENTS or values.get("translate") == "no"
        if not skipped:
            for name, value in attrs:
                if name in CHECKED_ATTRIBUTES and value and value not in KEPT_ATTRIBUTE_VALUES:
                    self._check(value)
        if tag not in VOID_ELEMENTS:
            self.open.append((tag, skipped))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID_ELEMENTS and self.open:
            self.open.pop()

    def handle_endtag(self, tag: str) -> None:
        # Optional end tags (li, p, td) may be missing: close up to the matching element.
        for depth in range(len(self.open) - 1, -1, -1):
            if self.open[depth][0] == tag:
                del self.open[depth:]
                return

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self._check(data)

    def _check(self, text: str) -> None:
        line = self.getpos()[0]
        for fragment in re.split(f"[{_MARKED}{_OTHER}]", text):
            if _is_text(fragment):
                self.found.append(Unmarked(self.template, line, " ".join(fragment.split())))


def unmarked_in(source: str, template: str = "<string>") -> list[Unmarked]:
    """Every unmarked string of one template's source, in order."""
    found: list[Unmarked] = []
    finder = _TextFinder(template, found)
    finder.feed(_replace_django(source, template, found))
    finder.close()
    return sorted(found, key=lambda u: u.line)


def templates(root: Path | None = None) -> list[str]:
    root = root or TEMPLATES_DIR
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.html"))


def enforced(root: Path | None = None) -> list[str]:
    """The templates ``--enforce`` checks: all but :data:`NOT_YET_MARKED`."""
    return [name for name in templates(root) if name not in NOT_YET_MARKED]


def check(names: Iterable[str], root: Path | None = None) -> dict[str, list[Unmarked]]:
    root = root or TEMPLATES_DIR
    return {n: unmarked_in((root / n).read_text(encoding="utf-8"), n) for n in names}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.i18n_unmarked", description=__doc__)
    parser.add_argument("templates", nargs="*", help="paths under templates/ (default: all)")
    parser.add_argument("--enforce", action="store_true", help="fail on the enforced templates")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every string")
    args = parser.parse_args(argv)
    names = args.templates or (enforced() if args.enforce else templates())
    results = check(names)
    failing = {n: found for n, found in results.items() if found}
    if args.enforce:
        for name, found in failing.items():
            for u in found:
                print(f"templates/{name}:{u.line}: not marked for translation: {u.text!r}")
        if failing:
            print(
                "Mark these with {% translate %} or {% blocktranslate %} (docs/i18n.md), then "
                "run the makemessages and compilemessages commands that docs/i18n.md lists.",
                file=sys.stderr,
            )
            return 1
        return 0
    total = 0
    for name, found in results.items():
        total += len(found)
        mark = " (not yet enforced)" if name in NOT_YET_MARKED else ""
        print(f"{len(found):5d}  {name}{mark}")
        if args.verbose:
            for u in found:
                print(f"         {u.line}: {u.text}")
    print(f"{total:5d}  in {len(results)} templates")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

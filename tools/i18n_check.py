"""Fails when the translation catalogues under locale/ are out of date (docs/i18n.md).

``python -m tools.i18n_check`` (part of ``make lint``) runs the same ``makemessages`` as
:data:`UPDATE_COMMANDS` in a scratch directory that links to the checkout, and compares the
``.po`` files it makes with the committed ones (all but the ``POT-Creation-Date`` line, which
changes on every run). It also compiles each committed ``.po`` and compares its messages with
the committed ``.mo``, and fails on an entry left untranslated or fuzzy (every language is
complete, or English would show through). The checkout is never written to. It needs GNU
gettext (``xgettext``, ``msgmerge``, ``msgfmt``), as ``makemessages`` does.
"""

from __future__ import annotations

import gettext
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from model_store import spawn

BASE_DIR = Path(__file__).resolve().parent.parent
LANGUAGES = ["zh_Hans"]
DOMAINS = ["django", "djangojs"]
#: Never scanned for strings: tools, data and vendored code.
IGNORED = [".venv", "var", "node_modules", "static/vendor", "test-artifacts", "tests", ".git"]
MAKEMESSAGES_OPTIONS = [
    "--no-location",
    "--no-obsolete",
    *(f"--ignore={path}/*" for path in IGNORED),
]


def makemessages_args(domain: str, language: str) -> list[str]:
    return ["makemessages", "-d", domain, "-l", language, *MAKEMESSAGES_OPTIONS]


#: What a developer runs to bring the catalogues up to date (then translates, and compiles).
UPDATE_COMMANDS = [
    " ".join(["python manage.py", *makemessages_args(d, lang)])
    for lang in LANGUAGES
    for d in DOMAINS
] + ["python manage.py compilemessages --ignore=.venv/*"]


def _without_creation_date(text: str) -> str:
    return "".join(
        line for line in text.splitlines(keepends=True) if "POT-Creation-Date:" not in line
    )


def _text(path: Path) -> str:
    """A catalogue's text; "" when makemessages found nothing to write (no such file)."""
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _scratch_checkout(scratch: Path, base: Path) -> None:
    """Links to every top-level entry of the checkout but ``locale``, which is copied."""
    skipped = {p.split("/")[0] for p in IGNORED if "/" not in p} | {"locale"}
    for entry in base.iterdir():
        if entry.name not in skipped:
            (scratch / entry.name).symlink_to(entry)
    if (base / "locale").is_dir():
        shutil.copytree(base / "locale", scratch / "locale")
    else:
        (scratch / "locale").mkdir()


def _manage(args: Sequence[str], cwd: Path) -> None:
    spawn.run(
        [sys.executable, str(BASE_DIR / "manage.py"), *args, "--symlinks"],
        cwd=cwd,
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings"},
        timeout=300,
    )


def stale_po_files(base: Path = BASE_DIR) -> list[str]:
    """The ``.po`` files makemessages would change, as paths relative to ``base``."""
    stale = []
    with tempfile.TemporaryDirectory(prefix="hub-i18n-") as tmp:
        scratch = Path(tmp)
        _scratch_checkout(scratch, base)
        for language in LANGUAGES:
            for domain in DOMAINS:
                _manage(makemessages_args(domain, language), cwd=scratch)
                relative = Path("locale", language, "LC_MESSAGES", f"{domain}.po")
                committed = _text(base / relative)
                if _without_creation_date(committed) != _without_creation_date(
                    _text(scratch / relative)
                ):
                    stale.append(str(relative))
    return stale


def stale_mo_files(base: Path = BASE_DIR) -> list[str]:
    """The committed ``.mo`` files whose messages differ from their compiled ``.po``."""
    stale = []
    with tempfile.TemporaryDirectory(prefix="hub-i18n-mo-") as tmp:
        for po in sorted((base / "locale").glob("*/LC_MESSAGES/*.po")):
            mo = po.with_suffix(".mo")
            fresh = Path(tmp) / f"{po.parent.parent.name}-{po.stem}.mo"
            spawn.run(
                ["msgfmt", "--check-format", "-o", str(fresh), str(po)], check=True, timeout=60
            )
            if not mo.exists() or _messages(mo) != _messages(fresh):
                stale.append(str(mo.relative_to(base)))
    return stale


def untranslated_entries(base: Path = BASE_DIR) -> list[str]:
    """``path: N untranslated, M fuzzy`` for each catalogue with entries nobody translated:
    a language is complete or English shows through (``msgfmt --statistics`` counts them)."""
    found = []
    for po in sorted((base / "locale").glob("*/LC_MESSAGES/*.po")):
        counts = spawn.run(
            ["msgfmt", "--statistics", "-o", os.devnull, str(po)],
            check=True, capture_output=True, text=True, timeout=60,
        ).stderr  # fmt: skip
        # "2181 translated messages, 3 fuzzy translations, 2 untranslated messages."
        missing = [part.strip() for part in counts.strip().rstrip(".").split(",")[1:]]
        if missing:
            found.append(f"{po.relative_to(base)}: {', '.join(missing)}")
    return found


def _messages(mo: Path) -> dict[object, object]:
    with mo.open("rb") as fh:
        return dict(gettext.GNUTranslations(fh)._catalog)  # type: ignore[attr-defined]


def main() -> int:
    if shutil.which("msgfmt") is None or shutil.which("xgettext") is None:
        print("GNU gettext is needed to check the catalogues (apt-get install gettext).")
        return 2
    stale = stale_po_files() + stale_mo_files()
    incomplete = untranslated_entries()
    if not stale and not incomplete:
        return 0
    if incomplete:
        print("Catalogues with entries left untranslated: " + "; ".join(incomplete))
    if not stale:
        print("Translate them (msgstr, and remove each #, fuzzy mark), then compile and commit.")
        print(f"  {UPDATE_COMMANDS[-1]}")
        return 1
    print("Translation catalogues are out of date: " + ", ".join(stale))
    print("Run these, translate the new msgstr entries, and commit the .po and .mo files:")
    for command in UPDATE_COMMANDS:
        print(f"  {command}")
    print("(docs/i18n.md says how; docs/glossary.md fixes the terms.)")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())

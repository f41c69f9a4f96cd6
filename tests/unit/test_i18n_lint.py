"""The two translation checks of `make lint` (docs/i18n.md): unmarked template text, and
catalogues that makemessages would change."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tools import i18n_check
from tools.i18n_unmarked import check, enforced, main, unmarked_in


def _texts(source: str) -> list[str]:
    return [u.text for u in unmarked_in(source)]


def test_marked_text_passes() -> None:
    source = """{% load i18n %}<h1>{% translate "Models" %}</h1>
<p>{% blocktranslate trimmed with n=count %}
  {{ n }} versions wait.{% endblocktranslate %}</p>
<input placeholder="{% translate 'Search' %}" aria-label="{% translate 'Search' %}">"""
    assert _texts(source) == []


def test_plain_text_and_attributes_are_reported() -> None:
    source = """<h1>Models</h1>
<button title="Serve it now">{% translate "Serve" %}</button>
<img alt="A chart" src="x.png"><input placeholder="name" aria-label="Model name">"""
    assert _texts(source) == ["Models", "Serve it now", "A chart", "name", "Model name"]


def test_text_around_variables_and_tags_is_reported_piece_by_piece() -> None:
    source = "<p>{{ n }} s ago{% if x %} · running{% endif %}</p>"
    assert _texts(source) == ["s ago", "· running"]


def test_code_comments_names_units_and_translate_no_are_not_text() -> None:
    source = """{# a note #}{% comment %}Old text{% endcomment %}
<p><code>make run</code> <pre>python manage.py migrate</pre> <kbd>Ctrl</kbd></p>
<p>ONNX · Triton · ATC · CANN · API · NPU · 12 ms · 3.5 GiB · v{{ n }}</p>
<small>Triton Model Hub</small><span translate="no">resnet50 input_0</span>
<script src="x.js"></script><style>.a { color: red; }</style>"""
    assert _texts(source) == []


def test_tags_between_attributes_do_not_hide_the_element() -> None:
    source = """<option value="a" {% if a %}selected{% endif %}>RGB</option>
<details {% if open %}open{% endif %}><summary>More</summary></details>
<dl id="{{ x|default:'host-cann' }}"></dl>"""
    assert _texts(source) == ["More"]


def test_english_literals_in_filters_must_be_marked() -> None:
    assert _texts('<p>{{ user|default:"an unknown user" }}</p>') == ['"an unknown user"']
    assert _texts('<p>{{ user|default:_("an unknown user") }} {{ x|default:"?" }}</p>') == []


def test_line_numbers_point_at_the_text() -> None:
    found = unmarked_in(
        "<ul>\n{% for a in b %}\n<li>{{ a }}</li>\n{% endfor %}\n<li>Other</li>\n</ul>"
    )
    assert [(u.line, u.text) for u in found] == [(5, "Other")]


def test_the_enforced_templates_are_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(enforced()) > 50  # every page of the product
    assert all(not found for found in check(enforced()).values())
    assert main(["--enforce"]) == 0


def test_enforce_fails_and_says_where(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "page.html").write_text("<h1>Hello</h1>\n")
    monkeypatch.setattr("tools.i18n_unmarked.TEMPLATES_DIR", tmp_path)
    assert main(["--enforce", "page.html"]) == 1
    assert "templates/page.html:1: not marked for translation: 'Hello'" in capsys.readouterr().out
    assert main(["page.html"]) == 0  # the report alone never fails


def test_creation_date_alone_is_no_change() -> None:
    a = '"POT-Creation-Date: 2026-01-01 00:00+0000\\n"\nmsgid "x"\n'
    b = '"POT-Creation-Date: 2026-12-04 06:10+0000\\n"\nmsgid "x"\n'
    assert i18n_check._without_creation_date(a) == i18n_check._without_creation_date(b)


@pytest.mark.skipif(shutil.which("xgettext") is None, reason="GNU gettext is not installed")
def test_a_newly_marked_string_makes_the_catalogue_stale_until_makemessages_runs(
    tmp_path: Path,
) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "locale").mkdir()  # makemessages writes here, never into the checkout's
    page = tmp_path / "templates" / "page.html"
    page.write_text('{% load i18n %}<h1>{% translate "Hello" %}</h1>\n')
    for domain in i18n_check.DOMAINS:
        i18n_check._manage(i18n_check.makemessages_args(domain, "zh_Hans"), cwd=tmp_path)
    assert i18n_check.stale_po_files(tmp_path) == []
    page.write_text('{% load i18n %}<h1>{% translate "Hello" %}</h1><p>{% translate "New" %}</p>\n')
    assert i18n_check.stale_po_files(tmp_path) == ["locale/zh_Hans/LC_MESSAGES/django.po"]


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="GNU gettext is not installed")
def test_an_untranslated_or_fuzzy_entry_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "locale" / "zh_Hans" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    header = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
    po = folder / "django.po"
    po.write_text(header + 'msgid "Models"\nmsgstr "模型"\n', encoding="utf-8")
    assert i18n_check.untranslated_entries(tmp_path) == []
    po.write_text(
        header + 'msgid "Models"\nmsgstr "模型"\n\nmsgid "Jobs"\nmsgstr ""\n\n'
        '#, fuzzy\nmsgid "Nodes"\nmsgstr "节"\n',
        encoding="utf-8",
    )
    (found,) = i18n_check.untranslated_entries(tmp_path)
    assert found.startswith("locale/zh_Hans/LC_MESSAGES/django.po: ")
    assert "1 fuzzy" in found and "1 untranslated" in found


def test_the_committed_catalogues_are_complete() -> None:
    if shutil.which("msgfmt") is None:
        pytest.skip("GNU gettext is not installed")
    assert i18n_check.untranslated_entries() == []

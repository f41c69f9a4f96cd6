"""A Django form generated from a target's option specs (model_store.targets), so the page, the
API and the worker share one definition of every compile option, its default and its help."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from model_store.targets.base import Target
from model_store.targets.options import OptionSpec
from webapp.text import localize


def _int_list(text: str) -> list[int]:
    parts = [p.strip() for p in text.replace(";", ",").split(",") if p.strip()]
    try:
        return [int(p) for p in parts]
    except ValueError:
        raise forms.ValidationError(
            gettext("Use whole numbers separated by commas, e.g. 1,2,4,8.")
        ) from None


AUTO_BOOL = [("", _("Automatic")), ("true", _("Yes")), ("false", _("No"))]


class SuggestingInput(forms.TextInput):
    """A text box with a list of suggestions (``<datalist>``): the person may pick one or type
    another value of the same form (a SoC name the list does not have yet)."""

    def __init__(self, suggestions: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suggestions = suggestions

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> SafeString:
        list_id = f"{(attrs or {}).get('id') or 'id_' + name}-suggestions"
        box = super().render(name, value, {**(attrs or {}), "list": list_id}, renderer)
        options = format_html_join(
            "", '<option value="{}">{}</option>', ((v, lbl) for v, lbl in self.suggestions)
        )
        return format_html('{}<datalist id="{}">{}</datalist>', box, list_id, options)


def _field(spec: OptionSpec) -> forms.Field:
    # The spec's words come from model_store: said in the request's language when they carry
    # their template (model_store.text), else as written.
    common: dict[str, Any] = {
        "label": localize(spec.label),
        "help_text": localize(spec.help),
        "required": False,
    }
    kind = spec.kind
    if kind == "bool" and spec.default is None:
        # "Automatic" (decided from the model) must stay distinct from an unticked box.
        return forms.ChoiceField(choices=AUTO_BOOL, initial="", **common)
    if kind == "bool":
        return forms.BooleanField(initial=bool(spec.default), **common)
    if kind == "int":
        low = None if spec.minimum is None else int(spec.minimum)
        high = None if spec.maximum is None else int(spec.maximum)
        return forms.IntegerField(initial=spec.default, min_value=low, max_value=high, **common)
    if kind == "float":
        return forms.FloatField(
            initial=spec.default, min_value=spec.minimum, max_value=spec.maximum, **common
        )
    if kind == "choice":
        choices = [(value, localize(label)) for value, label in spec.choices or []]
        return forms.ChoiceField(choices=choices, initial=spec.default, **common)
    if kind == "int_list":
        initial = ",".join(str(v) for v in spec.default or [])
        return forms.CharField(initial=initial, max_length=200, **common)
    initial = spec.default if isinstance(spec.default, str) else ""
    if spec.choices:
        suggestions = [(value, localize(label)) for value, label in spec.choices]
        return forms.CharField(
            initial=initial, max_length=500, widget=SuggestingInput(suggestions), **common
        )
    return forms.CharField(initial=initial, max_length=500, **common)


def _placeholder(spec: OptionSpec) -> str:
    """Empty means "use the default", which for automatic options is decided from the model."""
    if spec.default is None:
        return gettext("Automatic")
    if isinstance(spec.default, list):
        return ",".join(str(v) for v in spec.default) or gettext("none")
    return ""


class OptionsForm(forms.Form):
    """Fields named ``opt_<name>``; ``options()`` gives the raw dict for ``parse_options``."""

    def __init__(self, target: Target, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.target = target
        self.specs = {spec.name: spec for spec in target.option_specs()}
        for spec in self.specs.values():
            field = _field(spec)
            field.widget.attrs["data-advanced"] = "1" if spec.advanced else "0"
            if placeholder := _placeholder(spec):
                field.widget.attrs.setdefault("placeholder", placeholder)
            self.fields[f"opt_{spec.name}"] = field

    def options(self) -> dict[str, Any]:
        """Only what the person set: empty fields fall back to the target's defaults."""
        raw: dict[str, Any] = {}
        for name, spec in self.specs.items():
            value = self.cleaned_data.get(f"opt_{name}")
            if spec.kind == "bool" and spec.default is None:
                if value in ("true", "false"):
                    raw[name] = value == "true"
            elif spec.kind == "bool":
                raw[name] = bool(value)
            elif value in (None, ""):
                continue
            elif spec.kind == "int_list":
                raw[name] = _int_list(value)
            else:
                raw[name] = value
        return raw

    def basic_fields(self) -> list[forms.BoundField]:
        return [self[f"opt_{n}"] for n, s in self.specs.items() if not s.advanced]

    def advanced_fields(self) -> list[forms.BoundField]:
        return [self[f"opt_{n}"] for n, s in self.specs.items() if s.advanced]

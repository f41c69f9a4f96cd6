from __future__ import annotations

from django import forms

from model_store.errors import ModelStoreError
from model_store.names import MAX_MODEL_NAME_LENGTH, validate_model_name
from webapp.registry.models import DEFAULT_TARGET, Target


class NewModelForm(forms.Form):
    name = forms.CharField(
        max_length=MAX_MODEL_NAME_LENGTH,
        help_text="Its Triton name: letters, digits, _ - and . (for example resnet50-int8).",
        widget=forms.TextInput(attrs={"autofocus": True, "autocomplete": "off"}),
    )
    target = forms.ChoiceField(
        choices=Target.choices,
        initial=DEFAULT_TARGET,
        help_text="Where its versions will run. Ascend targets need CANN on the workers.",
    )
    description = forms.CharField(
        required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 3})
    )

    def clean_name(self) -> str:
        try:
            return validate_model_name(self.cleaned_data["name"].strip())
        except ModelStoreError as exc:
            raise forms.ValidationError(str(exc)) from exc

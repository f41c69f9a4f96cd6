from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from model_store.errors import ModelStoreError
from model_store.names import MAX_MODEL_NAME_LENGTH, validate_model_name
from webapp.accounts.roles import Role, role_of
from webapp.registry.catalogue import CatalogueQuery
from webapp.registry.models import DEFAULT_TARGET, MAX_TAGS_PER_MODEL, Model, Target


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


class CatalogueFilterForm(forms.Form):
    """The Models list's filters; the same parameters as ``GET /api/v1/models``."""

    q = forms.CharField(required=False, max_length=100, label="Search")
    target = forms.ChoiceField(required=False, choices=[("", "Any target"), *Target.choices])
    state = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Any state"),
            ("serving", "Serving"),
            ("not_served", "Not served"),
            ("failing", "Failing"),
        ],
    )
    tag = forms.CharField(required=False, max_length=100)
    owner = forms.ChoiceField(required=False)
    sort = forms.ChoiceField(
        required=False,
        choices=[
            ("name", "Name"),
            ("-updated", "Recently changed"),
            ("-created", "Newest"),
            ("created", "Oldest"),
        ],
    )
    retired = forms.BooleanField(required=False, label="Retired models")
    page = forms.IntegerField(required=False, min_value=1)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        owners = (
            get_user_model()
            .objects.filter(pk__in=Model.all_objects.exclude(owner=None).values("owner"))
            .order_by("username")
            .values_list("username", flat=True)
        )
        owner = self.fields["owner"]
        assert isinstance(owner, forms.ChoiceField)
        owner.choices = [("", "Any owner"), *((u, u) for u in owners)]

    def query(self, per_page: int) -> CatalogueQuery:
        """The query the valid filters describe (an invalid one is left out)."""
        data = self.cleaned_data if self.is_bound and self.is_valid() else {}
        if self.is_bound and not self.is_valid():
            data = {k: v for k, v in self.cleaned_data.items() if k not in self.errors}
        return CatalogueQuery(
            q=(data.get("q") or "").strip(),
            target=data.get("target") or "",
            state=data.get("state") or "",
            tag=(data.get("tag") or "").strip().lower(),
            owner=data.get("owner") or "",
            sort=data.get("sort") or "name",
            retired=bool(data.get("retired")),
            page=data.get("page") or 1,
            per_page=per_page,
        )

    def is_filtered(self) -> bool:
        query = self.query(per_page=1)
        return any((query.q, query.target, query.state, query.tag, query.owner))


class ModelEditForm(forms.Form):
    description = forms.CharField(
        required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 4})
    )
    tags = forms.CharField(
        required=False,
        max_length=1000,
        help_text=f"Separated by commas or spaces, up to {MAX_TAGS_PER_MODEL}: for example "
        "team:vision, stage:prod. Letters, digits and . _ : / -.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    owner = forms.ChoiceField(required=False, help_text="Who answers for this model.")

    def __init__(self, data: Any = None, *, model: Model) -> None:
        super().__init__(
            data,
            initial={
                "description": model.description,
                "tags": ", ".join(model.tag_labels),
                "owner": model.owner.get_username() if model.owner else "",
            },
        )
        users = get_user_model().objects.filter(is_active=True).order_by("username")
        owner = self.fields["owner"]
        assert isinstance(owner, forms.ChoiceField)
        names = users.values_list("username", flat=True)
        owner.choices = [("", "Nobody"), *((u, u) for u in names)]

    def clean_tags(self) -> list[str]:
        return [t for t in re.split(r"[,\s]+", self.cleaned_data["tags"]) if t]


class RetireForm(forms.Form):
    confirm_serving = forms.BooleanField(
        required=False, label="I understand that every client request for this model will fail."
    )
    purge_sources = forms.BooleanField(
        required=False,
        label="Also delete its sources: the uploaded ONNX files and the built packages. "
        "They cannot be recovered.",
    )
    reason = forms.CharField(required=False, max_length=500, label="Why (kept in the history)")

    def __init__(self, *args: Any, model: Model, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if model.serving_version is None:
            del self.fields["confirm_serving"]
        else:
            self.fields["confirm_serving"].required = True
        if role_of(user) < Role.ADMIN:
            self.fields["purge_sources"].disabled = True
            self.fields["purge_sources"].help_text = "Only an admin can purge sources."

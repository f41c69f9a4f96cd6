from __future__ import annotations

import re
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from model_store.errors import ModelStoreError
from model_store.names import MAX_MODEL_NAME_LENGTH, validate_model_name
from model_store.targets import all_targets
from webapp.accounts.roles import Role, role_of
from webapp.registry.catalogue.listing import CatalogueQuery
from webapp.registry.catalogue.models import Model
from webapp.registry.catalogue.rules import DEFAULT_TARGET, MAX_TAGS_PER_MODEL
from webapp.text import localize


def target_choices() -> list[tuple[str, str]]:
    """The targets as ``(name, label)``, each label in the active language (called when a
    form shows its choices, so it follows the request)."""
    return [(t.name, localize(t.label)) for t in all_targets()]


def _any_target_choices() -> list[tuple[str, Any]]:
    return [("", _("Any target")), *target_choices()]


class NewModelForm(forms.Form):
    name = forms.CharField(
        label=_("Name"),
        max_length=MAX_MODEL_NAME_LENGTH,
        help_text=_("Its Triton name: letters, digits, _ - and . (for example resnet50-int8)."),
        widget=forms.TextInput(attrs={"autofocus": True, "autocomplete": "off"}),
    )
    target = forms.ChoiceField(
        label=_("Target"),
        choices=target_choices,
        initial=DEFAULT_TARGET,
        help_text=_("Where its versions will run. Ascend targets need CANN on the workers."),
    )
    description = forms.CharField(
        label=_("Description"),
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
    )

    def clean_name(self) -> str:
        try:
            return validate_model_name(self.cleaned_data["name"].strip())
        except ModelStoreError as exc:
            raise forms.ValidationError(localize(exc.message)) from exc


class CatalogueFilterForm(forms.Form):
    """The Models list's filters; the same parameters as ``GET /api/v1/models``."""

    q = forms.CharField(required=False, max_length=100, label=_("Search"))
    target = forms.ChoiceField(required=False, label=_("Target"), choices=_any_target_choices)
    state = forms.ChoiceField(
        required=False,
        label=_("State"),
        choices=[
            ("", _("Any state")),
            ("serving", _("Serving")),
            ("not_served", _("Not served")),
            ("failing", _("Failing")),
        ],
    )
    tag = forms.CharField(required=False, max_length=100, label=_("Tag"))
    owner = forms.ChoiceField(required=False, label=_("Owner"))
    sort = forms.ChoiceField(
        required=False,
        label=_("Sort by"),
        choices=[
            ("name", _("Name")),
            ("-updated", _("Recently changed")),
            ("-created", _("Newest")),
            ("created", _("Oldest")),
        ],
    )
    retired = forms.BooleanField(required=False, label=_("Retired models"))
    page = forms.IntegerField(required=False, min_value=1, label=_("Page"))

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
        owner.choices = [("", _("Any owner")), *((u, u) for u in owners)]

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
        label=_("Description"),
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 4}),
    )
    tags = forms.CharField(
        label=_("Tags"),
        required=False,
        max_length=1000,
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    owner = forms.ChoiceField(
        label=_("Owner"), required=False, help_text=_("Who answers for this model.")
    )

    def __init__(self, data: Any = None, *, model: Model) -> None:
        super().__init__(
            data,
            initial={
                "description": model.description,
                "tags": ", ".join(model.tag_labels),
                "owner": model.owner.get_username() if model.owner else "",
            },
        )
        self.fields["tags"].help_text = gettext(
            "Separated by commas or spaces, up to %(count)s: for example team:vision, "
            "stage:prod. Letters, digits and . _ : / -."
        ) % {"count": MAX_TAGS_PER_MODEL}
        users = get_user_model().objects.filter(is_active=True).order_by("username")
        owner = self.fields["owner"]
        assert isinstance(owner, forms.ChoiceField)
        names = users.values_list("username", flat=True)
        owner.choices = [("", _("Nobody")), *((u, u) for u in names)]

    def clean_tags(self) -> list[str]:
        return [t for t in re.split(r"[,\s]+", self.cleaned_data["tags"]) if t]


class RetireForm(forms.Form):
    confirm_serving = forms.BooleanField(
        required=False,
        label=_("I understand that every client request for this model will fail."),
    )
    purge_sources = forms.BooleanField(
        required=False,
        label=_(
            "Also delete its sources: the uploaded ONNX files and the built packages. "
            "They cannot be recovered."
        ),
    )
    reason = forms.CharField(required=False, max_length=500, label=_("Why (kept in the history)"))

    def __init__(self, *args: Any, model: Model, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if model.serving_version is None:
            del self.fields["confirm_serving"]
        else:
            self.fields["confirm_serving"].required = True
        if role_of(user) < Role.ADMIN:
            self.fields["purge_sources"].disabled = True
            self.fields["purge_sources"].help_text = _("Only an admin can purge sources.")

"""Issue 22: forms, choices, states and roles say their words through Django's translation.

The zh-Hans catalogue of these strings is merged later, so most tests check the mechanism (a
lazy label, English unchanged under "en"); words the catalogue already holds (``queued``,
``failed``, ``not served``) show that a state goes through it.
"""

from __future__ import annotations

import pytest
from django.template import Context, Template
from django.utils import translation
from django.utils.functional import Promise

from model_store.targets import all_targets
from model_store.targets.options import OptionSpec
from model_store.text import say
from tests.fixtures.users import signed_in
from webapp.accounts.models import ApiToken
from webapp.accounts.roles import Role, role_display
from webapp.registry.build.option_forms import AUTO_BOOL, _field, _placeholder
from webapp.registry.catalogue.forms import (
    CatalogueFilterForm,
    NewModelForm,
    RetireForm,
    target_choices,
)
from webapp.registry.catalogue.models import Version
from webapp.registry.jobs.models import Job
from webapp.registry.serving.models import NodeServing
from webapp.registry.templatetags.hub import role_label, state_label


def _render(source: str, **context: object) -> str:
    return Template("{% load hub %}" + source).render(Context(context))


def test_form_labels_and_help_are_lazy_and_english_under_en() -> None:
    name = NewModelForm.base_fields["name"]
    assert isinstance(name.label, Promise) and isinstance(name.help_text, Promise)
    with translation.override("en"):
        assert str(name.label) == "Name"
        assert str(name.help_text).startswith("Its Triton name: letters, digits")
        assert str(NewModelForm.base_fields["description"].label) == "Description"
        state = CatalogueFilterForm.base_fields["state"]
        assert [str(label) for _v, label in state.choices] == [  # type: ignore[attr-defined]
            "Any state",
            "Serving",
            "Not served",
            "Failing",
        ]
        assert str(RetireForm.base_fields["reason"].label) == "Why (kept in the history)"


@pytest.mark.django_db
def test_the_target_choices_are_made_when_shown() -> None:
    assert [v for v, _label in target_choices()] == [t.name for t in all_targets()]
    with translation.override("en"):
        shown = list(NewModelForm().fields["target"].choices)  # type: ignore[attr-defined]
        assert shown == [(t.name, str(t.label)) for t in all_targets()]
        any_target = list(CatalogueFilterForm().fields["target"].choices)  # type: ignore[attr-defined]
        assert str(any_target[0][1]) == "Any target"


@pytest.mark.django_db
def test_an_invalid_name_is_refused_in_english_under_en() -> None:
    with translation.override("en"):
        form = NewModelForm({"name": "bad name!", "target": all_targets()[0].name})
        assert not form.is_valid()
        assert "is not allowed" in form.errors["name"][0]


def test_choices_labels_are_lazy_and_unchanged_in_english() -> None:
    for label in (Job.State.RUNNING.label, Version.Status.READY.label, Job.Kind.ROLLBACK.label):
        assert isinstance(label, Promise)
    assert isinstance(ApiToken.Scope.OPERATOR.label, Promise)
    with translation.override("en"):
        assert Job(state="running").get_state_display() == "Running"
        assert Job(kind="rollback").get_kind_display() == "Roll back"
        assert Version(status="ready").get_status_display() == "Packaged"
        assert NodeServing(state="placing").get_state_display() == "Placing"
        assert str(ApiToken.Scope.OPERATOR.label) == "operator (upload, compile, serve)"
        assert str(ApiToken._meta.get_field("key_prefix").help_text).startswith("The first")


def test_state_label_keeps_english_and_the_code_case_under_en() -> None:
    with translation.override("en"):
        assert state_label("running") == "running"
        assert state_label("READY") == "READY"
        assert state_label("NOT LOADED") == "NOT LOADED"
        assert state_label("draining") == "draining"
        assert state_label("something new") == "something new"
        assert state_label("") == "" and state_label(None) == ""
        assert _render("{{ s|state_label|upper }}", s="up") == "UP"


def test_state_label_goes_through_the_catalogue() -> None:
    with translation.override("zh-hans"):
        assert state_label("queued") == "排队中"
        assert state_label("FAILED") == "失败"
        assert state_label("NOT SERVED") == "未上线"


def test_the_status_badge_shows_the_state_through_the_filter() -> None:
    with translation.override("en"):
        html = Template('{% include "registry/_status_badge.html" %}').render(
            Context({"status": "compiling"})
        )
        assert '<span class="badge badge-busy">COMPILING</span>' in html
    with translation.override("zh-hans"):
        html = Template('{% include "registry/_status_badge.html" %}').render(
            Context({"status": "queued"})
        )
        assert '<span class="badge badge-busy">排队中</span>' in html


def test_roles_have_a_display_name_and_keep_their_codes() -> None:
    assert Role.OPERATOR.label == "operator"  # the group's name and the API's code
    assert isinstance(Role.OPERATOR.display, Promise)
    with translation.override("en"):
        assert str(Role.OPERATOR.display) == "operator"
        assert str(role_display("viewer")) == "viewer"
        assert role_label("admin") == "admin"
        assert role_label("node:edge-1") == "node:edge-1"
        assert role_label("") == "" and role_label(None) == ""


def test_the_header_shows_the_role_in_english_without_a_language(operator) -> None:  # type: ignore[no-untyped-def]
    page = signed_in(operator).get("/models/").content.decode()
    assert '<span class="role">operator</span>' in page


def test_option_fields_say_model_store_words_in_the_active_language() -> None:
    spec = OptionSpec(
        name="batch",
        kind="int",
        default=None,
        label=say("Max batch size"),
        help=say("At most %(n)s requests in one batch.", n=8),
    )
    with translation.override("en"):
        field = _field(spec)
        assert field.label == "Max batch size"
        assert field.help_text == "At most 8 requests in one batch."
        assert _placeholder(spec) == "Automatic"
        assert [str(label) for _v, label in AUTO_BOOL] == ["Automatic", "Yes", "No"]


def test_a_jobs_kind_is_its_model_choice_as_a_word_and_translates() -> None:
    from django.utils import translation

    from webapp.registry.templatetags.hub import kind_word

    with translation.override("en"):
        assert kind_word("compile") == "compile"
        assert kind_word("sweep") == "performance sweep"
        assert kind_word("rollback") == "roll back"
        assert kind_word("unknown-kind") == "unknown-kind"
    with translation.override("zh-hans"):
        assert kind_word("compile") == "编译"

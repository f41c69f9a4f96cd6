"""The sign-in form and page: a local account or, with LDAP set, the directory's.

A refusal says why when the person may know it: the directory did not answer (503: try a local
account, or later) or local sign-in is off for their account (the password was right). Any
other refusal is the usual "user name and password do not match", which tells an attacker
nothing about which of the two was wrong.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpResponse

from model_store.text import Message, say


class SignInForm(AuthenticationForm):
    #: What to tell the person instead of "do not match", and the page's status with it.
    problem: Message | None = None
    problem_status = 200

    def clean(self) -> dict[str, Any]:
        try:
            return super().clean()
        except forms.ValidationError:
            request = self.request
            if getattr(request, "sso_directory_error", None):
                self.problem = say(
                    "The company's directory (LDAP) did not answer, so this sign-in could not "
                    "be checked. Try again in a while; local accounts still work."
                )
                self.problem_status = 503
            elif getattr(request, "sso_local_refused", False):
                self.problem = say(
                    "Local sign-in is turned off for this account: sign in with your "
                    "company account instead."
                )
                self.problem_status = 403
            raise


class SignInView(auth_views.LoginView):
    form_class = SignInForm
    redirect_authenticated_user = True

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        response.status_code = getattr(form, "problem_status", 200)
        return response

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        source = getattr(self.request, "sso_source", None)
        if source:
            self.request.session["sign_in_source"] = source
        return response

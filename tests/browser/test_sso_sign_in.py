"""A person signs in through the company's directory in a real Chromium: through the OpenID
Connect provider's own page and back, and through the sign-in form against a real slapd. Each
lands on the page they asked for, with the role their groups map to in the header."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.fixtures.ldap_directory import GROUPS, Directory
from tests.fixtures.sso import Provider

pytestmark = pytest.mark.sso


def test_sign_in_through_the_openid_connect_provider(
    page: Page, live_server: Any, settings: Any, transactional_db: None,
    oidc_provider: Provider, screenshot_dir: Path,
) -> None:  # fmt: skip
    from webapp.sso.oidc import forget_documents

    settings.OIDC_ISSUER = oidc_provider.issuer
    settings.OIDC_CLIENT_ID = "triton-hub"
    settings.OIDC_CLIENT_SECRET = "hub-secret"
    settings.OIDC_PROVIDER_NAME = "Example ID"
    settings.SSO_ROLE_MAP = "ml-ops=operator"
    forget_documents()
    oidc_provider.person("ana-sub", preferred_username="ana", name="Ana Lima",
                         groups=["ml-ops"])  # fmt: skip
    base = live_server.url
    page.goto(f"{base}/nodes/")
    expect(page).to_have_url(f"{base}/login/?next=/nodes/")
    page.screenshot(path=str(screenshot_dir / "sign-in-sso.png"), full_page=True)
    page.get_by_role("button", name="Sign in with Example ID").click()
    # The provider's own page: who to sign in as.
    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible()
    page.get_by_placeholder("sub").fill("ana-sub")
    page.get_by_role("button", name="Authorize").click()
    expect(page).to_have_url(f"{base}/nodes/")
    header = page.locator("header").first
    expect(header).to_contain_text("ana")
    expect(header).to_contain_text("operator")


def test_sign_in_through_ldap_with_the_form(
    page: Page, live_server: Any, settings: Any, transactional_db: None,
    ldap_directory: Directory, screenshot_dir: Path,
) -> None:  # fmt: skip
    for name, value in ldap_directory.settings().items():
        setattr(settings, name, value)
    settings.SSO_ROLE_MAP = f"cn=ml-admins,{GROUPS}=admin;ml-ops=operator"
    base = live_server.url
    page.goto(f"{base}/models/")
    expect(page.get_by_text("company account (LDAP)")).to_be_visible()
    page.get_by_label("User name").fill("ana")
    page.get_by_label("Password").fill("ana-pass-1")
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{base}/models/")
    header = page.locator("header").first
    expect(header).to_contain_text("ana")
    expect(header).to_contain_text("admin")
    page.screenshot(path=str(screenshot_dir / "signed-in-ldap.png"), full_page=True)
    # An admin sees the directory's bind checked on the Diagnostics page.
    page.goto(f"{base}/diagnostics/")
    row = page.locator("#check-ldap_bind")
    expect(row).to_have_attribute("data-state", "ok")
    expect(row).to_contain_text("accepted the bind as cn=hub")
    expect(page.locator("#check-oidc_discovery")).to_have_attribute("data-state", "not_applicable")
    row.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / "diagnostics-ldap.png"), full_page=True)

    # The directory goes away: the page says so, rather than "wrong password".
    page.goto("about:blank")  # no refresh of the old page may set a cookie now
    page.context.clear_cookies()
    settings.LDAP_SERVER_URI = "ldap://127.0.0.1:9"
    settings.LDAP_TIMEOUT_SECONDS = 1
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill("ana")
    page.get_by_label("Password").fill("ana-pass-1")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#sign-in-problem")).to_contain_text("did not answer")
    page.screenshot(path=str(screenshot_dir / "sign-in-ldap-down.png"), full_page=True)

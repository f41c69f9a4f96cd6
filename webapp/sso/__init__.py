"""Signing in with the company's accounts: OpenID Connect (docs/sso.md).

* :mod:`~webapp.sso.role_map`: ``SSO_ROLE_MAP``, directory groups to the hub's roles (pure);
* :mod:`~webapp.sso.oidc`: the provider's discovery, the authorization code flow with PKCE and
  the ID token's checks (Authlib's PKCE helpers, joserfc for the token);
* :mod:`~webapp.sso.accounts`: the hub's user behind an identity, its role at each sign-in;
* :mod:`~webapp.sso.views`: the two pages of the flow (start, callback).
"""

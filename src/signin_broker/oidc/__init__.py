"""OAuth 2.0 and OpenID Connect as a client speaks them, knowing nothing of sessions or storage.

Provider metadata, client authentication, the token, device, userinfo and revocation
calls, and id_token checks; the only place that speaks HTTP to a provider or JOSE.
"""

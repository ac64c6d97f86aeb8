"""What both example apps do with their token: ask the provider's userinfo who it is."""

from __future__ import annotations

import sys

import httpx2


def who_is_it(app: str, issuer: str, authorization: str) -> str | None:
    """The name (and email) userinfo gives for the token; None, said on stderr, if it fails."""
    try:
        discovery = httpx2.get(issuer.rstrip("/") + "/.well-known/openid-configuration").json()
        answer = httpx2.get(
            discovery["userinfo_endpoint"], headers={"Authorization": authorization}
        )
    except (httpx2.HTTPError, ValueError, KeyError) as error:
        print(f"{app}: cannot reach the provider's userinfo: {error}", file=sys.stderr)
        return None
    if answer.status_code != 200:
        print(f"{app}: userinfo answered HTTP {answer.status_code}", file=sys.stderr)
        return None
    claims = answer.json()
    # A token narrowed to fewer scopes (no `profile`, no `email`) gets fewer claims.
    name = claims.get("name") or claims.get("preferred_username") or claims.get("sub", "?")
    return f"{name} <{claims['email']}>" if claims.get("email") else str(name)

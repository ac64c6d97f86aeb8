"""Access tokens as apps and web pages get them, and whether the provider accepts them."""

from __future__ import annotations

from pathlib import Path

import httpx2

from signin_broker.client import BrokerClient


def access_token(socket_path: Path) -> str:
    with BrokerClient(socket_path) as client:
        return client.get_token().access_token


# What a web page gets for a token, through the browser extension and the native host
# alike: no refresh token, and no ID token unless the app policy allows it.
PAGE_TOKEN_FIELDS = {
    "accessToken",
    "tokenType",
    "expiresAt",
    "scopes",
    "account",
    "acr",
    "authTime",
}


def userinfo_sub(issuer: str, access_token: str) -> str | None:
    """The `sub` the stub provider's userinfo names for a Bearer token; None if it refuses it."""
    answer = httpx2.get(
        issuer + "/oauth/v2/userinfo", headers={"Authorization": f"Bearer {access_token}"}
    )
    return str(answer.json()["sub"]) if answer.status_code == 200 else None

"""`BrokerAuth` for httpx2 (Pydantic's fork of httpx): each request carries a broker token.

    import httpx2
    from signin_broker.httpx2 import BrokerAuth

    with httpx2.Client(auth=BrokerAuth()) as http:
        http.get("https://api.example.com/me")

It behaves as signin_broker.httpx.BrokerAuth does (a token per request, renewed and
sent once more after a 401), on httpx2's own Auth class, which httpx2 requires.
httpx2 comes with the broker; no extra is needed.
"""

from __future__ import annotations

import httpx2

from .client._http_auth import HttpxFlows


class BrokerAuth(HttpxFlows, httpx2.Auth):
    """An httpx2 auth that asks the broker for the token of `account` (default: the default)."""

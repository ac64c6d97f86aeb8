"""`BrokerAuth` for httpx: each request carries a token from the broker.

    import httpx
    from signin_broker.httpx import BrokerAuth

    with httpx.Client(auth=BrokerAuth()) as http:
        http.get("https://api.example.com/me")

The token is asked for per request (one call on the socket, under a millisecond while
the daemon holds a valid one). On a 401 the broker is told the token was refused, it
renews it (at most once a quarter of the token's lifetime), and the request is sent
once more with the new one; a second 401 is the caller's to see. A 401 that asks for a
stronger sign-in (RFC 9470: `WWW-Authenticate: Bearer
error="insufficient_user_authentication", acr_values="...", max_age=N`) asks the broker
for a token of such a sign-in instead, which waits while the person signs in, and the
request is sent once more with it (BrokerError FAILED_PRECONDITION when no sign-in
came). `BrokerAuth(acr_values=..., max_age_seconds=...)` asks for one always. A
DPoP-bound token (RFC 9449) goes with a proof for each request, signed by the broker,
and a server's `use_dpop_nonce` challenge is answered once with its nonce. Works with
`httpx.Client` and `httpx.AsyncClient`; install it with the `httpx` extra (or `pip install httpx`).
For httpx2, Pydantic's fork, the same is signin_broker.httpx2.BrokerAuth.
"""

from __future__ import annotations

import httpx

from .client._http_auth import HttpxFlows


class BrokerAuth(HttpxFlows, httpx.Auth):
    """An httpx auth that asks the broker for the token of `account` (default: the default)."""

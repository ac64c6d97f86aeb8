"""What the HTTP clients' auths (signin_broker.httpx, .httpx2, .requests) share.

Which token they ask for (account, scopes, audience, a step-up) and from which broker,
with a DPoP proof where the token is bound (RFC 9449); each auth adds how its library
attaches the token and sends a request once more after a 401: with a renewed token;
when the 401 is an RFC 9470 step-up challenge (`error="insufficient_user_authentication"`),
with a token of a sign-in that meets it; when it is a `use_dpop_nonce` challenge, with
a proof that carries the server's nonce. httpx and httpx2 (Pydantic's fork of httpx
0.28) run one auth-flow protocol: their two auths are HttpxFlows on each library's own
Auth class.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Generator, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ._challenges import step_up_of
from ._channel import DEFAULT_TIMEOUT_SECONDS

UNAUTHORIZED = 401
MAX_NONCES = 64  # the DPoP nonces remembered, one per server origin


class TokenRequest:
    """The token an auth asks for, from the broker at `socket_path` (default: the SDK's).

    GetToken gives it; once it has been DPoP-bound, it is asked for with the request's
    method and URL (SignDpopProof), and comes with its proof. A server's `DPoP-Nonce`
    is kept for its origin and put into the next proofs.
    """

    def __init__(
        self,
        account: str = "",
        *,
        scopes: Iterable[str] = (),
        audience: str = "",
        acr_values: str = "",
        max_age_seconds: int | None = None,
        socket_path: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.account, self.scopes, self.audience = account, tuple(scopes), audience
        self.step_up = (acr_values, max_age_seconds)  # asked every time; a challenge's wins
        self.socket_path, self.timeout = socket_path, timeout
        self._nonces: dict[str, str] = {}
        self._bound = False  # the account's token was DPoP-bound: ask for proofs

    def ask(
        self,
        client: Any,
        method: str,
        url: str,
        *,
        refused: bool = False,
        challenge: Any = None,
        proven: bool = False,
    ) -> Any:
        """The token (from the asyncio client: an awaitable); after a 401, `refused`.

        `challenge`: the 401's WWW-Authenticate values; a step-up among them asks for a
        token of a sign-in that meets it (the broker waits for one) instead. `proven`,
        or a token known to be DPoP-bound without a step-up: the token with a proof.
        The URL goes without its query, fragment and user:password@, which a proof
        leaves out anyway (RFC 9449 4.2): none of them reaches the daemon or its audit.
        """
        step_up = step_up_of(challenge) if challenge is not None else None
        acr_values, max_age = step_up or self.step_up
        if proven or (self._bound and not acr_values and max_age is None):
            parts = urlsplit(url)
            return client.sign_dpop_proof(
                method,
                urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", "")),
                self.account,
                scopes=self.scopes,
                audience=self.audience,
                nonce=self._nonces.get(_origin(url), ""),
                refused=refused,
            )
        return client.get_token(
            self.account,
            scopes=self.scopes,
            audience=self.audience,
            refused=refused and step_up is None,
            acr_values=acr_values,
            max_age_seconds=max_age,
        )

    def unproven(self, sent: Any) -> bool:
        """Whether a token is DPoP-bound and came without a proof: asked for again, proven."""
        if getattr(sent, "dpop", None) is not None or sent.token_type.lower() != "dpop":
            return False
        self._bound = True
        return True

    def again(
        self, status: int, headers: Mapping[str, str], url: str, challenge: Any
    ) -> dict[str, Any] | None:
        """How to ask once more after this answer (ask's arguments); None: not at all.

        A `use_dpop_nonce` challenge is answered with the nonce the server gave (its
        DPoP challenge may follow a Bearer one in the same header, RFC 9449 7.2); any
        other 401 with a renewed token, or one of a sign-in that meets its step-up.
        """
        nonce = headers.get("dpop-nonce", "")
        if nonce and nonce.isascii() and nonce.isprintable() and len(nonce) <= 512:
            if len(self._nonces) >= MAX_NONCES:
                self._nonces.pop(next(iter(self._nonces)))
            self._nonces[_origin(url)] = nonce
        if status != UNAUTHORIZED:
            return None
        if nonce and "use_dpop_nonce" in headers.get("www-authenticate", ""):
            return {"refused": False, "proven": True}
        return {"refused": True, "challenge": challenge}


def attach(headers: Any, sent: Any) -> None:
    """Put a token (and its DPoP proof, if it has one) on a request's headers."""
    headers["Authorization"] = sent.authorization
    if getattr(sent, "dpop", ""):
        headers["DPoP"] = sent.dpop
    else:
        headers.pop("DPoP", None)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}".lower()


class HttpxFlows(TokenRequest):
    """The auth flow of httpx and httpx2: the broker's token, once more after a 401.

    The request body is read first, so that a streamed one can be sent again.
    """

    requires_request_body = True
    _sync: Any = None  # a BrokerClient, opened at the first request
    _async: Any = None  # an AsyncBrokerClient, likewise

    def sync_auth_flow(self, request: Any) -> Generator[Any, Any, None]:
        """Send the request with the token; after a 401, once more (see `again`)."""
        if self._sync is None:
            from ._sync import BrokerClient

            self._sync = BrokerClient(self.socket_path, timeout=self.timeout)
        request.read()
        method, url = request.method, str(request.url)
        sent = self.ask(self._sync, method, url)
        if self.unproven(sent):
            sent = self.ask(self._sync, method, url, proven=True)
        attach(request.headers, sent)
        response = yield request
        challenge = response.headers.get_list("www-authenticate")
        again = self.again(response.status_code, response.headers, url, challenge)
        if again is not None:
            renewed = self.ask(self._sync, method, url, **again)
            if self.unproven(renewed):
                renewed = self.ask(self._sync, method, url, proven=True)
            if not again["refused"] or renewed.access_token != sent.access_token:
                attach(request.headers, renewed)
                yield request

    async def async_auth_flow(self, request: Any) -> AsyncGenerator[Any, Any]:
        """The same for an asyncio client."""
        if self._async is None:
            from ._async import AsyncBrokerClient  # grpc.aio: only for an asyncio client

            self._async = AsyncBrokerClient(self.socket_path, timeout=self.timeout)
        await request.aread()
        method, url = request.method, str(request.url)
        sent = await self.ask(self._async, method, url)
        if self.unproven(sent):
            sent = await self.ask(self._async, method, url, proven=True)
        attach(request.headers, sent)
        response = yield request
        challenge = response.headers.get_list("www-authenticate")
        again = self.again(response.status_code, response.headers, url, challenge)
        if again is not None:
            renewed = await self.ask(self._async, method, url, **again)
            if self.unproven(renewed):
                renewed = await self.ask(self._async, method, url, proven=True)
            if not again["refused"] or renewed.access_token != sent.access_token:
                attach(request.headers, renewed)
                yield request

    def close(self) -> None:
        """Close the broker connection of the sync flow."""
        if self._sync is not None:
            self._sync.close()

    async def aclose(self) -> None:
        """Close the broker connection of the async flow."""
        if self._async is not None:
            await self._async.close()

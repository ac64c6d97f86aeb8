"""An in-memory OpenID provider behind httpx2's MockTransport, for fast tests of signin_broker.oidc.

It serves whatever documents a test puts at whatever URLs, counts every request, and
signs id_tokens with keys a test can rotate; the Provider under test gets a fake clock.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from signin_broker.oidc.provider import Provider
from support.clocks import FakeClock

T = TypeVar("T")
CLIENT_ID = "signin-broker"


class SigningKey:
    """A key pair with a kid that signs with `algorithm`, and its public JWK.

    The JWK states its `alg` unless `states_alg` is False (it is optional, RFC 7517 4.4).
    PyJWT makes them, so what the broker's joserfc accepts is checked by another library.
    """

    def __init__(self, kid: str, algorithm: str = "RS256", *, states_alg: bool = True) -> None:
        self.kid = kid
        self.algorithm = algorithm
        if algorithm.startswith(("RS", "PS")):
            self.private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            kind: Any = jwt.algorithms.RSAAlgorithm
        elif algorithm.startswith("ES"):
            curve = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1()}[algorithm]
            self.private, kind = ec.generate_private_key(curve), jwt.algorithms.ECAlgorithm
        else:
            self.private = ed25519.Ed25519PrivateKey.generate()
            kind = jwt.algorithms.OKPAlgorithm
        jwk = json.loads(kind.to_jwk(self.private.public_key()))
        self.jwk = {**jwk, "kid": kid, "use": "sig"}
        if states_alg:
            self.jwk["alg"] = algorithm


class FakeProvider:
    """Documents by URL (an int: that HTTP error; a Response: as is), the keys at /jwks, 404 else.

    `requests` lists every URL asked for, `sent` every request.
    """

    def __init__(self, issuer: str, base: str = "https://id.example.com") -> None:
        self.issuer = issuer
        self.base = base
        self.keys = [SigningKey("key-1")]
        self.documents: dict[str, Any] = {}
        self.requests: list[str] = []
        self.sent: list[httpx2.Request] = []  # every request, headers and all
        self.set_discovery(self.discovery())

    def discovery(self, **fields: Any) -> dict[str, Any]:
        """A minimal valid discovery document of this issuer, with `fields` changed."""
        return {
            "issuer": self.issuer,
            "authorization_endpoint": self.base + "/authorize",
            "token_endpoint": self.base + "/token",
            "jwks_uri": self.base + "/jwks",
            "userinfo_endpoint": self.base + "/userinfo",
            **fields,
        }

    def set_discovery(self, document: Any) -> None:
        """Serve `document` where the daemon looks for this issuer's discovery document."""
        self.documents[self.issuer.rstrip("/") + "/.well-known/openid-configuration"] = document

    def fetches(self, url: str) -> int:
        """How many times `url` was asked for."""
        return self.requests.count(url)

    def id_token(self, key: SigningKey | None = None, **claims: Any) -> str:
        """An id_token for this client signed with `key` (the first key by default)."""
        key = key or self.keys[0]
        now = int(time.time())
        body = {"iss": self.issuer, "aud": CLIENT_ID, "sub": "1001", "iat": now, "exp": now + 300}
        body.update(claims)
        body = {name: value for name, value in body.items() if value is not None}
        return jwt.encode(body, key.private, algorithm=key.algorithm, headers={"kid": key.kid})

    def provider(self, configured_issuer: str | None = None) -> tuple[Provider, FakeClock]:
        """A Provider for `configured_issuer` (this issuer by default) talking to this fake."""
        clock = FakeClock(1000.0)
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self._answer))
        issuer = self.issuer if configured_issuer is None else configured_issuer
        return Provider(issuer, CLIENT_ID, http, clock=clock), clock

    def _answer(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        self.requests.append(url)
        self.sent.append(request)
        document = self.documents.get(url)
        if document is None and url == self.base + "/jwks":
            document = {"keys": [key.jwk for key in self.keys]}
        if document is None:
            return httpx2.Response(404, json={"error": "not_found"})
        if isinstance(document, int):
            return httpx2.Response(document, json={"error": "server_error"})
        if isinstance(document, httpx2.Response):  # an answer as the test made it
            return document
        return httpx2.Response(200, json=document)


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion in a fresh event loop."""
    return asyncio.run(coroutine)

"""A browser sign-in in progress: PKCE, state and nonce, and completing it at the callback.

The flow is authorization code with PKCE S256 (RFC 6749, RFC 7636) and an OpenID
nonce. Each begun sign-in is remembered under its state until its callback arrives,
for ten minutes at most; a state is good for one callback only, so a replayed or
forged callback finds nothing and is refused as a state mismatch. A callback whose
`iss` (RFC 9207) does not name the provider the request went to is refused too.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from ..oidc.answers import TokenResponse
from ..oidc.errors import IdTokenInvalid
from ..oidc.metadata import ProviderMetadata
from ..oidc.provider import Provider
from .accounts import SIGN_IN_SECONDS

PENDING_TTL_SECONDS = SIGN_IN_SECONDS
MAX_PENDING = 64


class SignInSecrets(Protocol):
    """Where the unguessable values of a sign-in come from (swappable for tests)."""

    def state(self) -> str:
        """A CSRF state of at least 16 characters."""

    def nonce(self) -> str:
        """An OpenID nonce that binds the id_token to this sign-in."""

    def code_verifier(self) -> str:
        """A PKCE code verifier of 43 to 128 characters."""


class RandomSecrets:
    """256 bits from the operating system's CSPRNG for each value."""

    def state(self) -> str:
        """A fresh random state."""
        return secrets.token_urlsafe(32)

    def nonce(self) -> str:
        """A fresh random nonce."""
        return secrets.token_urlsafe(32)

    def code_verifier(self) -> str:
        """A fresh random code verifier (43 characters)."""
        return secrets.token_urlsafe(32)


class DeterministicSecrets:
    """Predictable values for conformance tests (contract 5.3 c): HMAC-SHA256(seed, counter).

    Never a seeded global random: each instance has its own counter, and the same
    seed gives the same sequence, so a test can compute what the daemon will send.
    """

    def __init__(self, seed: str) -> None:
        self._seed = seed.encode()
        self._counter = 0

    def _next(self, kind: str) -> str:
        self._counter += 1
        digest = hmac.new(self._seed, f"{kind}:{self._counter}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def state(self) -> str:
        """The next state of the sequence."""
        return self._next("state")

    def nonce(self) -> str:
        """The next nonce of the sequence."""
        return self._next("nonce")

    def code_verifier(self) -> str:
        """The next code verifier of the sequence."""
        return self._next("code_verifier")


@dataclass(frozen=True, slots=True)
class PendingSignIn:
    """What the callback needs to finish a sign-in; kept in the daemon, never sent out."""

    state: str = field(repr=False)
    nonce: str = field(repr=False)
    code_verifier: str = field(repr=False)
    redirect_uri: str
    redirect_to: str  # where the browser goes afterwards (a same-origin path)
    sign_in_id: str  # correlates the outcome with a BeginSignIn; "" when begun in the browser
    created_at: float
    workspace_id: str = ""  # the workspace to act in; "" for personal use
    provider: ProviderMetadata | None = None  # where the request went, for its answer's iss

    def issuer_problem(self, iss: str | None) -> str:
        """Why the answer's `iss` parameter refuses it (RFC 9207 2.4); "" when it does not.

        A provider that advertises the parameter must send it, and any `iss` sent must
        name the provider the request went to: an answer that another provider issued
        (a mix-up attack) is never redeemed.
        """
        if self.provider is None:
            return "the sign-in has no provider to compare the response's issuer with"
        if iss is None:
            if self.provider.iss_parameter_supported:
                return "the provider promises iss in its response (RFC 9207), and sent none"
            return ""
        if not self.provider.names_issuer(iss):
            return f"the response names issuer {iss!r}, not {self.provider.issuer!r}"
        return ""


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A completed sign-in (browser or device): the tokens and the validated id_token claims."""

    tokens: TokenResponse
    claims: dict[str, Any] = field(repr=False)
    sign_in_id: str  # the BeginSignIn it completes; "" when begun in the browser
    workspace_id: str = ""
    provider: str = ""  # the alias of the provider it signed in at ("" the main one)
    client_id: str = ""  # the client the tokens were issued to


class SignInFlow:
    """Begins sign-ins (the authorize URL) and completes them (the token exchange)."""

    def __init__(
        self,
        provider: Provider,
        scopes: tuple[str, ...],
        source: SignInSecrets,
        authorize_params: Mapping[str, str] | None = None,
        alias: str = "",
    ) -> None:
        self.alias = alias  # of the provider (session.providers)
        self._provider = provider
        self._scopes = scopes
        self._source = source
        self._authorize_params = dict(authorize_params or {})  # the daemon's setting
        self._pending: OrderedDict[str, PendingSignIn] = OrderedDict()

    async def begin(
        self,
        redirect_uri: str,
        redirect_to: str,
        sign_in_id: str,
        workspace_id: str = "",
        authorize_params: Mapping[str, str] | None = None,
    ) -> str:
        """Remember a new sign-in and return the provider's authorize URL for it.

        A workspace is asked for with the `workspace_id` authorization parameter; the
        provider must confirm the membership with the same claim in the id_token.
        authorize_params (login_hint, prompt, ...; checked by the caller) are added,
        over the daemon's own setting.
        """
        metadata = await self._provider.metadata()
        pending = PendingSignIn(
            state=self._source.state(),
            nonce=self._source.nonce(),
            code_verifier=self._source.code_verifier(),
            redirect_uri=redirect_uri,
            redirect_to=redirect_to,
            sign_in_id=sign_in_id,
            created_at=time.time(),
            workspace_id=workspace_id,
            provider=metadata,
        )
        self._forget_expired()
        while len(self._pending) >= MAX_PENDING:
            self._pending.popitem(last=False)  # the oldest abandoned one
        self._pending[pending.state] = pending
        url: str = prepare_grant_uri(
            metadata.authorization_endpoint,
            client_id=self._provider.client_id,
            response_type="code",
            redirect_uri=redirect_uri,
            scope=" ".join(self._scopes),
            state=pending.state,
            code_challenge=create_s256_code_challenge(pending.code_verifier),
            code_challenge_method="S256",
            nonce=pending.nonce,
            **({"workspace_id": workspace_id} if workspace_id else {}),
            **offline_consent(self._scopes, {**self._authorize_params, **(authorize_params or {})}),
        )
        return url

    def take(self, state: str) -> PendingSignIn | None:
        """The sign-in begun with this state, removed so that it completes only once."""
        self._forget_expired()
        for known in self._pending:
            if hmac.compare_digest(known.encode(), state.encode()):  # str: ASCII only
                return self._pending.pop(known)
        return None

    async def complete(self, pending: PendingSignIn, code: str) -> SignedIn:
        """Redeem the code and validate the id_token against this sign-in's nonce."""
        tokens = await self._provider.exchange_code(
            code, pending.redirect_uri, pending.code_verifier
        )
        if tokens.id_token is None:
            raise IdTokenInvalid("the token response has no id_token (is openid in the scopes?)")
        claims = await self._provider.validate_id_token(tokens.id_token, pending.nonce)
        if pending.workspace_id and claims.get("workspace_id") != pending.workspace_id:
            raise IdTokenInvalid(
                f"the identity provider did not confirm workspace {pending.workspace_id}"
            )
        return SignedIn(
            tokens,
            claims,
            pending.sign_in_id,
            pending.workspace_id,
            self.alias,
            self._provider.client_id,
        )

    def _forget_expired(self) -> None:
        cutoff = time.time() - PENDING_TTL_SECONDS
        for state in [s for s, p in self._pending.items() if p.created_at < cutoff]:
            del self._pending[state]


def offline_consent(scopes: tuple[str, ...], params: Mapping[str, str]) -> dict[str, str]:
    """The authorize parameters, with prompt=consent when offline_access is asked for.

    OpenID Connect Core 11: a provider may ignore offline_access without it, and a
    default panva oidc-provider then issues no refresh token. A prompt the person
    chose stays as it is.
    """
    if "offline_access" in scopes and "prompt" not in params:
        return {**params, "prompt": "consent"}
    return dict(params)


def _raw(text: str) -> bytes:
    """Bytes to compare in constant time: hmac compares only ASCII str, and a state can be any."""
    return text.encode("utf-8", "surrogatepass")

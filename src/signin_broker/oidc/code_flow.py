"""The authorization code flow with PKCE (RFC 6749 4.1, RFC 7636) and an OpenID nonce.

A request carries a fresh state, nonce and S256 code verifier; its answer is checked
for the issuer it names (RFC 9207: an answer another provider issued is never
redeemed), and its code is redeemed for tokens whose id_token must carry the nonce.
Where a request is remembered until its answer comes is the caller's business.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .answers import TokenResponse
from .dpop import DpopKey, is_bound, requirement_shown
from .errors import DpopSignInAgain, IdTokenInvalid, OAuthError
from .id_tokens import check_workspace
from .metadata import ProviderMetadata
from .parameters import authorization_url, s256_challenge
from .provider import Provider

CODE = "sign-in code"  # the grant, as requirement_shown names it


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
    """Predictable values for conformance tests (docs/contract.md §17): HMAC-SHA256(seed, counter).

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
class AuthorizationRequest:
    """One authorization request's secrets and where it went; never sent out whole."""

    state: str = field(repr=False)
    nonce: str = field(repr=False)
    code_verifier: str = field(repr=False)
    redirect_uri: str
    workspace_id: str = ""  # asked for with the workspace_id parameter; "" for personal use
    provider: ProviderMetadata | None = None  # where the request went, for its answer's iss
    dpop_key: DpopKey | None = field(default=None, repr=False)  # the tokens' key (RFC 9449)

    @classmethod
    def new(
        cls,
        source: SignInSecrets,
        redirect_uri: str,
        provider: ProviderMetadata,
        workspace_id: str = "",
        dpop_key: DpopKey | None = None,
    ) -> AuthorizationRequest:
        """A request with fresh secrets from `source`; `dpop_key` binds its code and tokens."""
        return cls(
            state=source.state(),
            nonce=source.nonce(),
            code_verifier=source.code_verifier(),
            redirect_uri=redirect_uri,
            workspace_id=workspace_id,
            provider=provider,
            dpop_key=dpop_key,
        )

    def url(self, client_id: str, scopes: tuple[str, ...], params: Mapping[str, str]) -> str:
        """The provider's authorize URL for this request, with `params` (login_hint, ...) added."""
        assert self.provider is not None  # noqa: S101 - made by new()
        return authorization_url(
            self.provider.authorization_endpoint,
            [
                ("response_type", "code"),
                ("client_id", client_id),
                ("redirect_uri", self.redirect_uri),
                ("scope", " ".join(scopes)),
                ("state", self.state),
                ("code_challenge", s256_challenge(self.code_verifier)),
                ("code_challenge_method", "S256"),
                ("nonce", self.nonce),
                ("workspace_id", self.workspace_id or None),
                # RFC 9449 10: the code is bound to the key, so only its holder redeems it
                ("dpop_jkt", self.dpop_key.thumbprint if self.dpop_key else None),
                *offline_consent(scopes, params).items(),
            ],
        )

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

    async def redeem(
        self, provider: Provider, code: str
    ) -> tuple[TokenResponse, dict[str, Any], DpopKey | None]:
        """Redeem the code and validate the id_token against this request's nonce.

        Returns the tokens, the id_token's claims and the key the tokens are bound to
        (None: Bearer tokens). A provider that offers DPoP and refuses the code without
        a proof may require DPoP of this client (panva's oidc-provider answers a plain
        invalid_grant and keeps the code): the code is sent once more with a new key's
        proof. Taken so, or refused by an answer naming DPoP, it shows the requirement;
        refused both times with a plain refusal, it was never a good code (made up,
        spent, another client's), which shows nothing: that refusal is raised, and
        nothing is learned. DpopSignInAgain when a refusal naming DPoP is followed by
        one with a proof: the provider may have spent the code.
        """
        key = self.dpop_key
        try:
            tokens = await provider.exchange_code(code, self.redirect_uri, self.code_verifier, key)
        except OAuthError as refusal:
            key = None if key is not None else await provider.key_after_refusal(refusal)
            if key is None:
                raise
            if said := requirement_shown(refusal, proven=False, grant=CODE):
                provider.learned_dpop_required(said)
            try:
                tokens = await provider.exchange_code(
                    code, self.redirect_uri, self.code_verifier, key
                )
            except OAuthError:
                if not said:
                    raise refusal from None
                raise DpopSignInAgain(
                    "the provider refused the code without a DPoP proof, naming DPoP, and with one"
                ) from refusal
            if is_bound(tokens.token_type):
                provider.learned_dpop_required(requirement_shown(refusal, proven=True, grant=CODE))
        if tokens.id_token is None:
            raise IdTokenInvalid("the token response has no id_token (is openid in the scopes?)")
        claims = await provider.validate_id_token(tokens.id_token, self.nonce)
        check_workspace(claims, self.workspace_id)
        return tokens, claims, key if is_bound(tokens.token_type) else None


def offline_consent(scopes: tuple[str, ...], params: Mapping[str, str]) -> dict[str, str]:
    """The authorize parameters, with prompt=consent when offline_access is asked for.

    OpenID Connect Core 11: a provider may ignore offline_access without it, and a
    default panva oidc-provider then issues no refresh token. A prompt the person
    chose stays as it is.
    """
    if "offline_access" in scopes and "prompt" not in params:
        return {**params, "prompt": "consent"}
    return dict(params)

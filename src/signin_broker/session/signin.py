"""A provider's browser sign-in: the authorization request, and the code redeemed after.

This is one provider's half of it, and holds nothing: the pending request is kept
under its state by session.sign_ins until the callback. The protocol itself (PKCE,
nonce, the answer's `iss`) is signin_broker.oidc.code_flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..oidc.answers import TokenResponse
from ..oidc.code_flow import AuthorizationRequest, SignInSecrets
from ..oidc.dpop import DpopKey
from ..oidc.provider import Provider


@dataclass(frozen=True, slots=True)
class PendingSignIn:
    """What the callback needs to finish a sign-in; kept in the daemon, never sent out."""

    request: AuthorizationRequest
    redirect_to: str  # where the browser goes afterwards (a same-origin path)
    sign_in_id: str  # correlates the outcome with a BeginSignIn; "" when begun in the browser
    created_at: float


@dataclass(frozen=True, slots=True)
class SignedIn:
    """A completed sign-in (browser or device): the tokens and the validated id_token claims."""

    tokens: TokenResponse
    claims: dict[str, Any] = field(repr=False)
    sign_in_id: str  # the BeginSignIn it completes; "" when begun in the browser
    workspace_id: str = ""
    provider: str = ""  # the alias of the provider it signed in at ("" the main one)
    client_id: str = ""  # the client the tokens were issued to
    dpop_key: DpopKey | None = field(default=None, repr=False)  # the key they are bound to


class SignInFlow:
    """Begins one provider's sign-ins (the authorize URL) and completes them (the code)."""

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

    async def begin(
        self,
        redirect_uri: str,
        redirect_to: str,
        sign_in_id: str,
        *,
        created_at: float,
        workspace_id: str = "",
        authorize_params: Mapping[str, str] | None = None,
    ) -> tuple[PendingSignIn, str]:
        """A new sign-in to remember under its state, and the provider's authorize URL for it.

        A workspace is asked for with the `workspace_id` authorization parameter; the
        provider must confirm the membership with the same claim in the id_token.
        authorize_params (login_hint, prompt, ...; checked by the caller) are added,
        over the daemon's own setting.
        """
        request = AuthorizationRequest.new(
            self._source,
            redirect_uri,
            await self._provider.metadata(),
            workspace_id,
            await self._provider.new_dpop_key(),
        )
        url = request.url(
            self._provider.client_id,
            self._scopes,
            {**self._authorize_params, **(authorize_params or {})},
        )
        return PendingSignIn(request, redirect_to, sign_in_id, created_at), url

    async def complete(self, pending: PendingSignIn, code: str) -> SignedIn:
        """Redeem the code and validate the id_token against this sign-in's nonce."""
        tokens, claims = await pending.request.redeem(self._provider, code)
        return SignedIn(
            tokens,
            claims,
            pending.sign_in_id,
            pending.request.workspace_id,
            self.alias,
            self._provider.client_id,
            pending.request.dpop_key,
        )

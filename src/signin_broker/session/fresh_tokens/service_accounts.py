"""Service accounts: a client as an account of its own, its tokens by the client credentials grant.

A kiosk, a build machine or a TV in a shop window has no person to sign in: it holds a
client identity (a secret, or a private key for private_key_jwt) and asks the token
endpoint for the client's own token (RFC 6749 4.4), with the provider's `scopes`, and a
`resource` for a down-scoped token (RFC 8707). Its account (`[<alias>/]user:<client
id>`) is there from the start, with the broker's guarantees: one grant however many
apps ask, renewed when schedule says a token is due, app policy, audit, status. It has
no refresh token, so nothing of it is stored: a new start asks again. A grant whose
answer was lost costs nothing but another, so it is asked again after the backoff; a
refusal (the client's credentials refused, a scope it may not have) backs the account
off as a refused renewal does, and status and the doctor say why until it is granted.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ...oidc.answers import TokenResponse
from ...oidc.errors import OAuthError, ProviderUnavailable
from ..accounts.records import Account
from ..errors import ProviderRefused
from .provider_health import ProviderHealth

CHECK_CREDENTIALS = (
    "check the client's secret or key (client_secret_file, `signin-broker client-secret set`,"
    " client_private_key_file) and its registration at the provider"
)


class ClientCredentialsGrant:
    """Asks for a service account's token, and backs it off when the provider will not give one."""

    def __init__(self, health: ProviderHealth, clock: Callable[[], float] = time.time) -> None:
        self._health = health
        self._clock = clock

    async def spend(
        self, account: Account, scope: str | None = None, resource: str | None = None
    ) -> TokenResponse:
        """One client credentials grant: the account's scopes, or these (down-scoped).

        ProviderRefused when the provider refuses it, ProviderUnavailable when it does
        not answer usefully (the account backs off: provider_health.py).
        """
        client, link = account.client, self._health.link(account)
        assert client is not None  # noqa: S101 - a service account's provider is configured
        sent_at = self._clock()
        try:
            response = await client.client_credentials(
                scope if scope is not None else " ".join(link.scopes) or None, resource
            )
        except ProviderUnavailable as error:
            self._health.failed(account, str(error))
            raise
        except OAuthError as error:
            self._health.contacted(link)
            raise ProviderRefused(error.error, error.status, error.description) from None
        self._health.answered(account, sent_at)
        return response

    async def refused(self, account: Account, refusal: ProviderRefused) -> None:
        """The main token was refused: back off, and say why (status, the doctor) until granted."""
        said = f"{refusal.error}: {refusal.description}" if refusal.description else refusal.error
        what = (
            CHECK_CREDENTIALS
            if refusal.error in ("invalid_client", "unauthorized_client")
            else "check the scopes asked for (scopes) and what the client may have there"
        )
        self._health.refused(
            account, f"the provider refused the client credentials grant ({said[:300]}); {what}"
        )

"""The providers made whole and the encrypted store opened: what the daemon loads once it is ready.

Their clients with their credentials, their sign-in flows, and the vault with its key
store stand on the OAuth stack (httpx2, cryptography; keyring with `key_store =
"keyring"`; joserfc only from a sign-in's first id_token on): about a quarter of a
second to import. daemon/app.py loads this module in a worker thread after the socket
serves, so that apps are answered meanwhile (a GetToken waits for the restore, not for
a sign-in).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import replace
from pathlib import Path

from ..locations import runtime_folder
from ..oidc.client_auth import ClientAuth
from ..oidc.code_flow import DeterministicSecrets, RandomSecrets, SignInSecrets
from ..oidc.metadata import is_acceptable_url
from ..oidc.provider import Provider
from ..session.providers.dpop_requirements import DpopRequirements
from ..session.providers.flows import DeviceFlow, SignInFlow
from ..session.providers.links import ProviderLink
from ..store.journal import RUNTIME_NAME
from ..store.keys import KeyStoreUnavailable, open_key_store, the_keyring
from ..store.vault import Vault
from .client_credentials import load_client_auth
from .settings import ProviderSettings, Settings

log = logging.getLogger(__name__)

# A test hook for deterministic state and nonce (docs/contract.md §17); honoured only
# with a loopback issuer, so a real provider never sees predictable values.
DETERMINISTIC_SECRETS_ENV = "SIGNIN_BROKER_TEST_SECRETS_SEED"


def open_store(settings: Settings) -> tuple[Vault | None, str]:
    """The encrypted store, or why sessions stay in memory only (blocking: a worker thread).

    Its runtime journal, where the state goes while the state folder cannot be written at
    all, is in the user's runtime folder (store/journal.py).
    """
    runtime = runtime_folder()
    try:
        vault = Vault(
            settings.state_dir / "accounts",
            open_key_store(settings.key_store, settings.state_dir),
            runtime_journal=None if runtime is None else Path(runtime) / RUNTIME_NAME,
        )
    except KeyStoreUnavailable as error:
        log.warning("sessions will not survive a restart", extra={"reason": str(error)})
        return None, f"memory only: {error}"
    return vault, vault.description


async def provider_link(
    settings: Settings, provider: ProviderSettings, requirements: DpopRequirements
) -> ProviderLink:
    """One provider with its clients and sign-in flows, its credentials read in worker threads."""

    def client_of(client_id: str, auth: ClientAuth) -> Provider:
        required = requirements.required(provider.issuer, client_id)
        return Provider(
            provider.issuer, client_id, client_auth=auth, dpop=provider.dpop, dpop_required=required
        )

    auth = await asyncio.to_thread(client_auth, settings, provider, provider.client_id)
    client = client_of(provider.client_id, auth)
    device_client = client
    if provider.device_client_id:
        # The files and method set are the main client's: the device client is public
        # unless the keyring holds a secret for it (`client-secret set --client-id`).
        device = replace(
            provider,
            client_auth="auto",
            client_secret_file=None,
            client_private_key_file=None,
            client_certificate_file=None,
        )
        auth = await asyncio.to_thread(client_auth, settings, device, provider.device_client_id)
        device_client = client_of(provider.device_client_id, auth)
    sign_in = SignInFlow(
        client,
        provider.scopes,
        secrets_source(provider.issuer),
        provider.authorize_params,
        provider.alias,
        requirements=requirements,
    )
    return ProviderLink(
        alias=provider.alias,
        issuer=provider.issuer,
        client=client,
        device_client=device_client,
        sign_in=sign_in,
        device=DeviceFlow(device_client, provider.scopes, provider.alias, requirements),
        setting_sources=provider.sources,
        dpop=provider.dpop,
        service=provider.service,
        scopes=provider.scopes,
    )


def client_auth(settings: Settings, provider: ProviderSettings, client_id: str) -> ClientAuth:
    """How a client authenticates to the provider, its secret or key read now (blocking).

    A service account's client that found neither secret nor key refuses every request
    with why, rather than ask for its token as a public client.
    """
    auth = load_client_auth(
        client_id,
        provider.client_auth,
        secret_file=provider.client_secret_file,
        private_key_file=provider.client_private_key_file,
        key_id=provider.client_key_id,
        assertion_audience=provider.client_assertion_audience,
        keyring=the_keyring if settings.key_store == "keyring" else None,
        provider=provider.alias,
        certificate_file=provider.client_certificate_file,
    )
    if provider.service and not auth.confidential:
        flag = f" --provider {provider.alias}" if provider.alias else ""
        problem = (
            "grant = client_credentials needs the client's secret or key: store the secret"
            f" with `signin-broker client-secret set --client-id {client_id}{flag}`, or name"
            " a 0600 file with client_secret_file or client_private_key_file"
        )
        log.error("client authentication cannot work", extra={"reason": problem})
        return ClientAuth(client_id, provider.client_auth, problem=problem)
    return auth


def secrets_source(issuer: str) -> SignInSecrets:
    """Where a sign-in's state, nonce and verifier come from: random, or a test's sequence."""
    seed = os.environ.get(DETERMINISTIC_SECRETS_ENV)
    if not seed:
        return RandomSecrets()
    if not (issuer.startswith("http://") and is_acceptable_url(issuer)):
        log.warning(
            f"{DETERMINISTIC_SECRETS_ENV} is ignored: only a loopback test provider may see"
            " predictable sign-in values"
        )
        return RandomSecrets()
    log.warning(
        "TEST MODE: sign-in state, nonce and PKCE verifier are predictable"
        f" ({DETERMINISTIC_SECRETS_ENV} is set)"
    )
    return DeterministicSecrets(seed)

"""Sessions ended and chosen: sign-out, removal, the default account, the provider's logout.

Sessions begin in session.signing_in.sign_ins. Ending one revokes its tokens at the provider
(RFC 7009) and says truly what the provider did. The id_token never leaves the
daemon: a sign-out hands out a one-time link to the loopback page instead of the
provider's logout URL with the hint (session.signing_out.logout_links).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from urllib.parse import urlencode

from ...oidc.errors import ProviderUnavailable
from ...states import EventKind
from .. import audit_entries
from ..accounts.names import AccountNames
from ..accounts.overview import SessionOverview
from ..accounts.records import EVERYTHING, Account, AccountInfo, Entitlement, SignOutResult
from ..accounts.registry import AccountRegistry
from ..audit_entries import Actor, daemon_actor
from ..errors import AliasNotSaved, NoPerson
from ..ports import AuditSink
from ..providers.revocation import revoke
from ..signing_in.sign_ins import SignIns
from .logout_links import LogoutLinks

log = logging.getLogger(__name__)


class SessionLifecycle:
    """Ends sessions and chooses the default; the registry keeps what they leave."""

    def __init__(
        self,
        registry: AccountRegistry,
        overview: SessionOverview,
        sign_ins: SignIns,
        names: AccountNames,
        audit: AuditSink,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._registry = registry
        self._overview = overview
        self._names = names
        self._audit = audit
        self._sign_ins = sign_ins
        self._logout_links = LogoutLinks(clock)

    async def sign_out(
        self,
        account_id: str,
        page_url: str = "",
        *,
        actor: Actor | None = None,
        entitlement: Entitlement = EVERYTHING,
    ) -> SignOutResult:
        """End the account's session here and at the provider; not an error when there is none.

        The tokens are revoked at the provider (RFC 7009) where it offers revocation; the
        result also carries where a browser ends its session there (see logout_url).
        """
        signing_out = account_id or self._registry.default_for(entitlement)
        # Its device sign-in would sign it in again.
        await self._sign_ins.cancel_devices(signing_out, "signed out")
        if not signing_out:
            return SignOutResult(False, await self.logout_url(page_url, None))
        account = _of_a_person(self._registry.resolve(account_id, entitlement))
        await self._registry.end(
            account, EventKind.SIGNED_OUT, "signed out", actor or daemon_actor()
        )
        client = account.client
        revocation, error = await revoke(client, account.tokens, account.dpop_key)
        logout_url = await self.logout_url(page_url, account.tokens.id_token, account.info.id)
        return SignOutResult(True, logout_url, revocation, error)

    async def remove_account(
        self,
        account_id: str,
        page_url: str = "",
        *,
        actor: Actor,
        entitlement: Entitlement = EVERYTHING,
    ) -> str:
        """Sign the account out and delete all the daemon keeps of it, aliases too; see logout_url.

        The audit row of the removal is written before anything is deleted (docs/contract.md §14).
        """
        account = _of_a_person(self._registry.resolve(account_id, entitlement))
        await self._audit.record_now(audit_entries.removed(actor, account.info.id))
        await self._registry.end(account, EventKind.SIGNED_OUT, "the account was removed", actor)
        await revoke(account.client, account.tokens, account.dpop_key)
        await self._audit.forget_account(account.info.id)
        try:
            await self._names.forget(account.info.id)
        except AliasNotSaved as error:  # the account is gone; its alias names nothing now
            log.warning("a removed account's alias stays", extra={"reason": str(error)})
        return await self.logout_url(page_url, account.tokens.id_token, account.info.id)

    async def set_default(
        self, account_id: str, *, actor: Actor, entitlement: Entitlement = EVERYTHING
    ) -> AccountInfo:
        """Make the account the one used when a request names none."""
        chosen = self._registry.resolve(account_id, entitlement)
        await self._registry.set_default(chosen)
        self._audit.record(audit_entries.made_default(actor, chosen.info.id))
        return self._overview.info(chosen)

    async def logout_url(self, page_url: str, id_token: str | None, account_id: str = "") -> str:
        """Where a browser ends its session at the provider, back to the page at page_url after.

        With an id_token, a one-time link to the loopback page (logout_links.py), which alone
        sends the browser on with the id_token_hint; "" without a page to serve it.
        """
        if not page_url:
            return ""
        target = await self.provider_logout_url(page_url + "/", id_token, account_id)
        return self._logout_links.create(page_url, target) if target and id_token else target

    def take_logout_link(self, key: str) -> str | None:
        """Where a one-time sign-out link sends the browser; None once used (or too old)."""
        return self._logout_links.take(key)

    async def provider_logout_url(
        self,
        post_logout_redirect_uri: str = "",
        id_token_hint: str | None = None,
        account_id: str = "",
    ) -> str:
        """The end-session address of the account's provider, else its issuer's /logout.

        Without an account, the default provider's.
        """
        providers = self._registry.providers
        link = providers.of(account_id) if account_id else providers.default
        if link is None:
            return ""
        try:
            endpoint = (await link.client.metadata()).end_session_endpoint
        except ProviderUnavailable:
            endpoint = ""
        params = {"client_id": link.client.client_id}
        if id_token_hint:
            params["id_token_hint"] = id_token_hint
        if post_logout_redirect_uri:
            params["post_logout_redirect_uri"] = post_logout_redirect_uri
        return f"{endpoint or link.issuer.rstrip('/') + '/logout'}?{urlencode(params)}"


def _of_a_person(account: Account) -> Account:
    """The account, if a person signed it in; a service account is the client's (NoPerson)."""
    if account.info.service:
        raise NoPerson(
            account.info.id,
            "it cannot be signed out or removed while its provider is configured; take its"
            " provider's table out of the config file to stop it",
        )
    return account

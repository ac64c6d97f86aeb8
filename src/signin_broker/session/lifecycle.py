"""Sessions begun and ended: sign-ins over the API, their outcome, sign-out and removal.

A sign-in begun over the API gets an id the browser or the device flow carries; its
owner alone hears how it goes (session.accounts.owner_key). A completed sign-in
becomes an account of the provider it went to, replacing that tenant's old session.
Ending one revokes its tokens at the provider (RFC 7009) and says truly what the
provider did. The id_token never leaves the daemon: a sign-out hands out a one-time
link to the loopback page instead of the provider's logout URL with the hint
(session.signout).
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from ..identities import name_of
from ..oidc.errors import OAuthError, ProviderUnavailable
from ..store.audit import Actor
from . import audit_rows
from .accounts import (
    EVERYTHING,
    SIGN_IN_SECONDS,
    Account,
    AccountInfo,
    Entitlement,
    SignInStart,
    SignOutResult,
    account_id_of,
    owner_key,
    provider_of,
)
from .errors import InvalidSignIn, NotConfigured, ProviderUnreachable
from .events import EventKind, SessionEvent
from .ports import AuditSink, daemon_actor
from .registry import AccountRegistry
from .revocation import revoke
from .schedule import next_revalidation
from .signout import LogoutLinks
from .tokens import TokenSet

if TYPE_CHECKING:  # the OAuth stack loads after start-up (see daemon.app)
    from .device import DeviceStart
    from .providers import ProviderLink
    from .signin import SignedIn

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BegunSignIn:
    """A sign-in begun over the API, and where the person completes it."""

    start: SignInStart
    url: str  # the loopback page's address, or the provider's verification address
    device: DeviceStart | None = None  # a device sign-in's code; None for a browser one


def browser_at_hand() -> bool:
    """Whether the user's session can show a browser (else a device sign-in is offered)."""
    return sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )


class SessionLifecycle:
    """Begins, completes and ends sessions; the registry keeps what they leave."""

    def __init__(
        self,
        registry: AccountRegistry,
        audit: AuditSink,
        *,
        revalidate_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._registry = registry
        self._audit = audit
        self._revalidate_seconds = revalidate_seconds
        self._clock = clock
        self._sign_ins: dict[str, SignInStart] = {}  # begun over the API, by id
        self.logout_links = LogoutLinks(clock)

    async def begin_sign_in(
        self,
        *,
        account: str,
        app: str,
        device: bool | None,
        workspace_id: str = "",
        authorize_params: Mapping[str, str] | None = None,
        redirect_to: str = "",
        provider: str = "",
        begin_url: str,
    ) -> BegunSignIn:
        """Begin a sign-in for an app: in the browser, at begin_url, or on another device.

        Without a choice, a device sign-in where no browser can be shown. Signing an
        account in again goes to its own provider, and belongs to that account; a new
        account's sign-in belongs to the app that began it (accounts.owner_key).
        """
        if device is None:
            device = not browser_at_hand()
        if device and (redirect_to or authorize_params):
            raise InvalidSignIn(
                "redirect_to and authorize_params apply to a browser sign-in, not a device one"
            )
        if account:
            own = provider_of(account)
            if not provider:
                provider = name_of(own)
            elif self._registry.providers.named(provider).alias != own:
                raise InvalidSignIn(f"account {account} is not an account of provider {provider}")
        started = self.new_sign_in(
            workspace_id, owner_key(account, app), authorize_params, provider
        )
        if device:
            return await self._begin_device_sign_in(started)
        query = {"sign_in": started.sign_in_id}
        if started.workspace_id:
            query["workspace_id"] = started.workspace_id
        if redirect_to:
            query["redirect_to"] = redirect_to
        return BegunSignIn(started, f"{begin_url}?{urlencode(query, safe='', quote_via=quote)}")

    async def _begin_device_sign_in(self, begun: SignInStart) -> BegunSignIn:
        from ..oidc.device_flow import DeviceGrantEnded, NoDeviceGrant  # the OAuth stack is loaded

        flow = self._registry.providers.at(begun.provider).device
        try:
            started = await flow.begin(begun.sign_in_id, begun.owner, begun.workspace_id)
        except NoDeviceGrant as error:
            raise NotConfigured(str(error)) from None
        except DeviceGrantEnded as error:
            raise NotConfigured(
                f"the identity provider refused a device sign-in ({error})"
            ) from None
        except ProviderUnavailable as error:
            raise ProviderUnreachable(str(error)) from None
        return BegunSignIn(
            begun, started.verification_uri_complete or started.verification_uri, started
        )

    def device_sign_in(self, sign_in_id: str, owners: frozenset[str]) -> DeviceStart | None:
        """A pending device sign-in of one of these owners (else, for the caller, none)."""
        for link in self._registry.providers:
            found = link.device.find(sign_in_id, owners)
            if found is not None:
                return found
        return None

    def new_sign_in(
        self,
        workspace_id: str = "",
        owner: str = "",
        authorize_params: Mapping[str, str] | None = None,
        provider: str = "",
    ) -> SignInStart:
        """An id for a sign-in begun over the API; the browser carries it through the flow.

        The owner (see accounts.owner_key) is the only watcher told how it goes until
        it ends with an account, which then only those who may see it are told of.
        The authorize parameters (login_hint, prompt, ...) stay here, looked up by the
        id when the browser arrives: a page address cannot add any; nor can it choose
        another provider than the one (by alias; "" the default) chosen here.
        """
        link = self._registry.providers.named(provider)  # NotConfigured when there is no such one
        now = self._clock()
        self._sign_ins = {
            sign_in_id: begun
            for sign_in_id, begun in self._sign_ins.items()
            if begun.expires_at > now
        }
        started = SignInStart(
            secrets.token_urlsafe(16),
            now + SIGN_IN_SECONDS,
            workspace_id,
            owner,
            dict(authorize_params or {}),
            link.alias,
        )
        self._sign_ins[started.sign_in_id] = started
        return started

    def sign_in_started(self, sign_in_id: str) -> SignInStart | None:
        """A sign-in begun over the API and not yet expired, by its id."""
        begun = self._sign_ins.get(sign_in_id)
        return begun if begun is not None and begun.expires_at > self._clock() else None

    async def complete_sign_in(
        self, signed_in: SignedIn, actor: Actor | None = None
    ) -> AccountInfo:
        """Record a validated sign-in as an account (replacing that tenant's old session)."""
        link = self._registry.providers.at(signed_in.provider)
        claims = await self._profile_claims(link, signed_in)
        platform_user_id = str(claims["sub"])
        workspace_id = signed_in.workspace_id
        account_id = account_id_of(platform_user_id, workspace_id, link.alias)
        now = self._clock()
        link.last_contact = now  # it just answered the code exchange (status shows when)
        previous = self._registry.get(account_id)
        info = AccountInfo(
            id=account_id,
            platform_user_id=platform_user_id,
            workspace_id=workspace_id,
            provider=link.alias,
            display_name=_text(claims, "name") or _text(claims, "preferred_username"),
            email=_text(claims, "email"),
            is_default=previous.info.is_default if previous else not self._registry.all(),
            signed_in_at=now,
        )
        tokens = TokenSet.issued(signed_in.tokens, now, ())
        if tokens.refresh_token is None:  # status shows it too: no next renewal
            log.warning(
                "the provider issued no refresh token: sign in again when the token expires",
                extra={"account": account_id, "expires_in_s": int(tokens.expires_at - now)},
            )
        account = Account(
            info=info,
            tokens=tokens,
            apps=previous.apps if previous else {},
            client_id=signed_in.client_id,
        )
        account.revalidate_at = next_revalidation(now, self._revalidate_seconds)
        await self._registry.add(account)
        self._audit.record(
            audit_rows.signed_in(
                actor or daemon_actor(), account_id, tokens.scopes, again=previous is not None
            )
        )
        self._publish(
            EventKind.SIGNED_IN,
            account_id,
            f"signed in as {info.display_name or platform_user_id}",
            signed_in.sign_in_id,
        )
        return self._registry.info(account)

    async def _profile_claims(self, link: ProviderLink, signed_in: SignedIn) -> dict[str, Any]:
        """The id_token's claims, completed from userinfo when name or email is missing."""
        claims = dict(signed_in.claims)
        if "name" in claims and "email" in claims:
            return claims
        try:
            extra = await link.client.userinfo(signed_in.tokens.access_token)
        except (OAuthError, ProviderUnavailable) as error:
            log.info("userinfo not available for the profile", extra={"reason": str(error)})
            return claims
        if extra.get("sub") == claims["sub"]:  # OpenID Connect Core 5.3.2
            return {**extra, **claims}
        return claims

    def sign_in_failed(self, sign_in_id: str, detail: str) -> None:
        """Tell watchers that a sign-in attempt failed, and why (no secrets in detail)."""
        self._publish(EventKind.SIGN_IN_FAILED, "", detail, sign_in_id)

    def sign_in_progress(self, sign_in_id: str, detail: str) -> None:
        """Tell watchers how a sign-in that takes a while stands (a device sign-in)."""
        self._publish(EventKind.SIGN_IN_PROGRESS, "", detail, sign_in_id)

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
        for link in self._registry.providers:  # its device sign-in would sign it in again
            await link.device.cancel(signing_out, "signed out")
        if not signing_out:
            return SignOutResult(False, await self.logout_url(page_url, None))
        account = self._registry.resolve(account_id, entitlement)
        await self._registry.end(
            account, EventKind.SIGNED_OUT, "signed out", actor or daemon_actor()
        )
        client = self._registry.providers.client_of(account)
        revocation, error = await revoke(client, account.tokens)
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
        """Sign the account out and delete all the daemon keeps of it; see logout_url.

        The audit row of the removal is written before anything is deleted (contract 3).
        """
        account = self._registry.resolve(account_id, entitlement)
        await self._audit.record_now(audit_rows.removed(actor, account.info.id))
        await self._registry.end(account, EventKind.SIGNED_OUT, "the account was removed", actor)
        await revoke(self._registry.providers.client_of(account), account.tokens)
        await self._audit.forget_account(account.info.id)
        return await self.logout_url(page_url, account.tokens.id_token, account.info.id)

    async def set_default(
        self, account_id: str, *, actor: Actor, entitlement: Entitlement = EVERYTHING
    ) -> AccountInfo:
        """Make the account the one used when a request names none."""
        chosen = self._registry.resolve(account_id, entitlement)
        await self._registry.set_default(chosen)
        self._audit.record(audit_rows.made_default(actor, chosen.info.id))
        return self._registry.info(chosen)

    async def logout_url(self, page_url: str, id_token: str | None, account_id: str = "") -> str:
        """Where a browser ends its session at the provider, back to the page at page_url after.

        With an id_token, a one-time link to the loopback page (session.signout), which
        alone sends the browser on with the id_token_hint; "" without a page to serve it.
        """
        if not page_url:
            return ""
        target = await self.provider_logout_url(page_url + "/", id_token, account_id)
        return self.logout_links.create(page_url, target) if target and id_token else target

    async def provider_logout_url(
        self,
        post_logout_redirect_uri: str = "",
        id_token_hint: str | None = None,
        account_id: str = "",
    ) -> str:
        """The end-session address of the account's provider (contract: {idp_url}/logout).

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

    def _publish(self, kind: EventKind, account: str, detail: str, sign_in_id: str = "") -> None:
        begun = self._sign_ins.get(sign_in_id) if sign_in_id else None
        owner = begun.owner if begun is not None else ""
        self._registry.events.publish(
            SessionEvent(kind, account=account, detail=detail, sign_in_id=sign_in_id, owner=owner)
        )


def _text(claims: dict[str, Any], name: str) -> str:
    value = claims.get(name)
    return value if isinstance(value, str) else ""

"""Every sign-in under way, in one place: begun over the API or on the page, browser or device.

A sign-in begun over the API gets an id the browser or the device flow carries; its
owner alone hears how it goes (session.accounts.owner_key). A browser sign-in's
authorization request waits here under its state until the callback, for ten minutes
at most, and is good for one callback only: a replayed or forged callback finds
nothing. A device sign-in is a tenant-owned record (contract 5.4 T11): kept under its
owner's key, one per owner (a new one, or a sign-out, cancels it), and absent for
anyone else. A completed sign-in becomes an account of the provider it went to,
replacing that tenant's old session.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import secrets
import sys
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from ..identities import name_of
from ..oidc.dpop import is_bound
from ..oidc.errors import (
    DeviceGrantEnded,
    IdTokenInvalid,
    NoDeviceGrant,
    OAuthError,
    ProviderUnavailable,
)
from ..oidc.failures import failure_of
from ..store.audit import Actor
from . import audit_rows
from .accounts import (
    Account,
    AccountInfo,
    SignInStart,
    account_id_of,
    owner_key,
    provider_of,
    sign_in_facts,
)
from .errors import InvalidSignIn, NotConfigured, ProviderUnreachable, StepUpRefused
from .events import EventKind, SessionEvent
from .ports import AuditSink, daemon_actor
from .registry import AccountRegistry
from .schedule import SIGN_IN_SECONDS, next_revalidation
from .tokens import TokenSet
from .validation import check_provider

if TYPE_CHECKING:  # the OAuth stack loads after start-up (see daemon.app)
    from ..oidc.answers import DeviceAuthorization
    from .device import DeviceFlow, DeviceStart
    from .providers import ProviderLink
    from .signin import PendingSignIn, SignedIn, SignInFlow
    from .step_up import StepUp

log = logging.getLogger(__name__)

MAX_BROWSER_SIGN_INS = 64  # abandoned ones beyond this go, the oldest first


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


class SignIns:
    """Begins sign-ins, keeps them while they are pending, and records how they end."""

    def __init__(
        self,
        registry: AccountRegistry,
        audit: AuditSink,
        *,
        revalidate_seconds: int,
        clock: Callable[[], float],
    ) -> None:
        self._registry = registry
        self._audit = audit
        self._revalidate_seconds = revalidate_seconds
        self._clock = clock
        self._begun: dict[str, SignInStart] = {}  # over the API, by id
        self._browser: OrderedDict[str, tuple[SignInFlow, PendingSignIn]] = OrderedDict()
        self._devices: dict[str, tuple[DeviceStart, asyncio.Task[None]]] = {}  # by owner
        # The sign-ins a token request waits for (step_ups.py), by id: told how each ends.
        self.outcomes: dict[str, asyncio.Future[AccountInfo]] = {}

    # -- begun over the API ----------------------------------------------------------------

    async def begin(
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
        started = self.new(workspace_id, owner_key(account, app), authorize_params, provider)
        if device:
            return await self._begin_device(started)
        return BegunSignIn(started, page_url(begin_url, started, redirect_to))

    def new(
        self,
        workspace_id: str = "",
        owner: str = "",
        authorize_params: Mapping[str, str] | None = None,
        provider: str = "",
        step_up: tuple[StepUp, float] | None = None,
    ) -> SignInStart:
        """An id for a sign-in begun over the API; the browser carries it through the flow.

        The owner (see accounts.owner_key) is the only watcher told how it goes until
        it ends with an account, which then only those who may see it are told of.
        The authorize parameters (login_hint, prompt, ...) stay here, looked up by the
        id when the browser arrives: a page address cannot add any; nor can it choose
        another provider than the one (by alias; "" the default) chosen here. A step-up
        (what a token request asked, and when) is checked when the sign-in completes.
        """
        link = self._registry.providers.named(provider)  # NotConfigured when there is no such one
        now = self._clock()
        self._begun = {key: begun for key, begun in self._begun.items() if begun.expires_at > now}
        started = SignInStart(
            secrets.token_urlsafe(16),
            now + SIGN_IN_SECONDS,
            workspace_id,
            owner,
            dict(authorize_params or {}),
            link.alias,
            step_up=step_up[0] if step_up else None,
            asked_at=step_up[1] if step_up else 0.0,
        )
        self._begun[started.sign_in_id] = started
        return started

    def _started(self, sign_in_id: str) -> SignInStart | None:
        """A sign-in begun over the API and not yet expired, by its id."""
        begun = self._begun.get(sign_in_id)
        return begun if begun is not None and begun.expires_at > self._clock() else None

    # -- in the browser ----------------------------------------------------------------------

    async def browser_url(
        self,
        redirect_uri: str,
        redirect_to: str,
        sign_in_id: str = "",
        workspace_id: str = "",
        *,
        provider: str = "",
        dpop_again: bool = False,
    ) -> str:
        """The provider's authorize URL for a browser at the page; the request waits here.

        An app's sign-in (sign_in_id) goes where the app chose; one begun on the page,
        to the provider the page names. ValueError for a malformed provider name,
        NotConfigured for an unknown one, ProviderUnavailable (the waiting app is told).
        `dpop_again`: begun again, with DPoP, after a DpopSignInAgain (SignInFlow.begin).
        """
        begun = self._started(sign_in_id) if sign_in_id else None
        providers = self._registry.providers
        link = (
            providers.at(begun.provider)
            if begun is not None
            else providers.named(check_provider(provider))
        )
        try:
            pending, url = await link.sign_in.begin(
                redirect_uri,
                redirect_to,
                sign_in_id,
                created_at=self._clock(),
                workspace_id=workspace_id,
                authorize_params=begun.authorize_params if begun is not None else None,
                dpop_again=dpop_again,
            )
        except ProviderUnavailable as error:
            if sign_in_id:  # an app (`signin-broker login`) waits for this sign-in: tell it
                self.failed(sign_in_id, str(failure_of(error)))
            raise
        self._forget_expired_browser_sign_ins()
        while len(self._browser) >= MAX_BROWSER_SIGN_INS:
            self._browser.popitem(last=False)  # the oldest abandoned one
        self._browser[pending.request.state] = (link.sign_in, pending)
        return url

    def take_browser(self, state: str) -> tuple[SignInFlow, PendingSignIn] | None:
        """The sign-in begun with this state and its provider's flow, removed: used once."""
        self._forget_expired_browser_sign_ins()
        for known in self._browser:
            if hmac.compare_digest(known.encode(), state.encode()):  # str: ASCII only
                return self._browser.pop(known)
        return None

    def _forget_expired_browser_sign_ins(self) -> None:
        cutoff = self._clock() - SIGN_IN_SECONDS
        for state in [s for s, (_, p) in self._browser.items() if p.created_at < cutoff]:
            del self._browser[state]

    # -- on another device ---------------------------------------------------------------

    async def _begin_device(self, begun: SignInStart) -> BegunSignIn:
        flow = self._registry.providers.at(begun.provider).device
        try:
            started, grant = await flow.begin(begun.sign_in_id, begun.owner, begun.workspace_id)
        except NoDeviceGrant as error:
            raise NotConfigured(str(error)) from None
        except DeviceGrantEnded as error:
            raise NotConfigured(
                f"the identity provider refused a device sign-in ({error})"
            ) from None
        except ProviderUnavailable as error:
            raise ProviderUnreachable(str(error)) from None
        await self.cancel_devices(started.owner, "a new device sign-in replaced this one")
        task = asyncio.get_running_loop().create_task(self._follow(flow, started, grant))
        self._devices[started.owner] = (started, task)
        self.progress(
            started.sign_in_id, f"enter code {started.user_code} at {started.verification_uri}"
        )
        return BegunSignIn(
            begun, started.verification_uri_complete or started.verification_uri, started
        )

    async def _follow(
        self, flow: DeviceFlow, started: DeviceStart, grant: DeviceAuthorization
    ) -> None:
        try:
            signed_in = await flow.outcome(
                started, grant, lambda detail: self.progress(started.sign_in_id, detail)
            )
        except (DeviceGrantEnded, IdTokenInvalid, ProviderUnavailable) as error:
            # The contract's record of a failed sign-in (section 6): each poll is a
            # token exchange.
            failure = failure_of(error)
            log.warning(
                "device sign-in failed",
                extra={
                    "flow": "oauth",
                    "step": "token_exchange",
                    "error_code": failure.error_code,
                    "reason": failure.reason,
                },
            )
            self._devices.pop(started.owner, None)
            self.failed(started.sign_in_id, str(failure))
            return
        self._devices.pop(started.owner, None)
        await self.complete(signed_in)

    def device(self, sign_in_id: str, owners: frozenset[str]) -> DeviceStart | None:
        """The pending device sign-in with this id if one of `owners` owns it.

        The lookup goes by owner: another owner's sign-in is as absent as an unknown one.
        """
        for owner in owners:
            pending = self._devices.get(owner)
            if pending is not None and pending[0].sign_in_id == sign_in_id:
                return pending[0]
        return None

    def waiting_devices(self) -> list[DeviceStart]:
        """The device sign-ins waiting for the person (for the loopback dashboard)."""
        return [started for started, _ in self._devices.values()]

    async def cancel_devices(self, owner: str | None, reason: str) -> None:
        """End the owner's pending device sign-in (None: every one), telling watchers why."""
        for key in [owner] if owner is not None else list(self._devices):
            pending = self._devices.pop(key, None)
            if pending is None:
                continue
            started, task = pending
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.failed(started.sign_in_id, f"cancelled: {reason}")

    # -- how they end ------------------------------------------------------------------------

    async def complete(self, signed_in: SignedIn, actor: Actor | None = None) -> AccountInfo:
        """Record a validated sign-in as an account (replacing that tenant's old session).

        StepUpRefused, and nothing changes, for a step-up sign-in of another user or
        short of what it asked for. The token requests waiting for this sign-in, or for
        a step-up of the account that it meets (`login --acr-values`), are answered.
        """
        link = self._registry.providers.at(signed_in.provider)
        workspace_id = signed_in.workspace_id
        account_id = account_id_of(str(signed_in.claims["sub"]), workspace_id, link.alias)
        acr, auth_time = sign_in_facts(signed_in.claims)  # the ID token's, not userinfo's
        begun = self._begun.get(signed_in.sign_in_id) if signed_in.sign_in_id else None
        if begun is not None and begun.step_up is not None:
            refusal = begun.step_up.refusal(begun.owner, begun.asked_at, account_id, acr, auth_time)
            if refusal:
                raise StepUpRefused(refusal)
        claims = await self._profile_claims(link, signed_in)
        platform_user_id = str(claims["sub"])
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
            username=_text(claims, "preferred_username"),
            is_default=previous.info.is_default if previous else not self._registry.all(),
            signed_in_at=now,
            acr=acr,
            auth_time=auth_time,
            dpop_bound_by=signed_in.dpop_bound_by,
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
            dpop_key=signed_in.dpop_key,
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
        added = self._registry.info(account)
        for sign_in_id, waiting in list(self.outcomes.items()):  # this one, or any it meets
            begun = self._begun.get(sign_in_id)
            meets = (
                begun is not None
                and begun.step_up is not None
                and not begun.step_up.refusal(
                    begun.owner, begun.asked_at, account_id, acr, auth_time
                )
            )
            if sign_in_id == signed_in.sign_in_id or meets:
                del self.outcomes[sign_in_id]
                if not waiting.done():
                    waiting.set_result(added)
        return added

    async def _profile_claims(self, link: ProviderLink, signed_in: SignedIn) -> dict[str, Any]:
        """The id_token's claims, completed from userinfo when name or email is missing."""
        claims = dict(signed_in.claims)
        if "name" in claims and "email" in claims:
            return claims
        try:
            tokens = signed_in.tokens
            bound = signed_in.dpop_key if is_bound(tokens.token_type) else None
            extra = await link.client.userinfo(tokens.access_token, bound)
        except (OAuthError, ProviderUnavailable) as error:
            log.info("userinfo not available for the profile", extra={"reason": str(error)})
            return claims
        if extra.get("sub") == claims["sub"]:  # OpenID Connect Core 5.3.2
            return {**extra, **claims}
        return claims

    def failed(self, sign_in_id: str, detail: str) -> None:
        """Tell watchers that a sign-in attempt failed, and why (no secrets in detail)."""
        self._publish(EventKind.SIGN_IN_FAILED, "", detail, sign_in_id)
        waiting = self.outcomes.pop(sign_in_id, None)
        if waiting is not None and not waiting.done():
            waiting.set_exception(InvalidSignIn(detail))

    def progress(self, sign_in_id: str, detail: str) -> None:
        """Tell watchers how a sign-in that takes a while stands (a device sign-in)."""
        self._publish(EventKind.SIGN_IN_PROGRESS, "", detail, sign_in_id)

    def _publish(self, kind: EventKind, account: str, detail: str, sign_in_id: str = "") -> None:
        begun = self._begun.get(sign_in_id) if sign_in_id else None
        owner = begun.owner if begun is not None else ""
        self._registry.events.publish(
            SessionEvent(kind, account=account, detail=detail, sign_in_id=sign_in_id, owner=owner)
        )


def page_url(begin_url: str, started: SignInStart, redirect_to: str = "") -> str:
    """Where the browser begins a sign-in begun over the API: the loopback page, by its id."""
    query = {"sign_in": started.sign_in_id}
    if started.workspace_id:
        query["workspace_id"] = started.workspace_id
    if redirect_to:
        query["redirect_to"] = redirect_to
    return f"{begin_url}?{urlencode(query, safe='', quote_via=quote)}"


def _text(claims: dict[str, Any], name: str) -> str:
    value = claims.get(name)
    return value if isinstance(value, str) else ""

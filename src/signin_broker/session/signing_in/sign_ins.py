"""Every sign-in under way, and how each ends: begun over the API or on the page, browser or device.

A sign-in begun over the API gets an id the browser or the device flow carries; its
owner alone hears how it goes (session.accounts.records.owner_key). A browser sign-in's
authorization request waits here under its state until the callback, for ten minutes
at most, and is good for one callback only: a replayed or forged callback finds
nothing. A device sign-in is a tenant-owned record (docs/contract.md §10 and §11): kept under
its owner's key, one per owner (a new one, or a sign-out, cancels it), and absent for
anyone else.

How a sign-in ends is one use case for both (`complete`): the loopback page hands over
the provider's answer to the browser (`complete_browser`), the device poller its
poll's; here it is checked, redeemed, stored as an account of the provider it went to
(replacing that tenant's old session), audited and told to watchers, and a failure is
named once, as the contract names it (oidc.errors.failure_of), logged and told to the
app that waits. A code the provider refused without a DPoP proof and then with one
sends the browser through the provider's page once more, bound from the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import re
import secrets
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from ...identities import name_of
from ...oidc.answers import DeviceAuthorization
from ...oidc.dpop import is_bound
from ...oidc.errors import (
    DeviceGrantEnded,
    DpopSignInAgain,
    IdTokenInvalid,
    NoDeviceGrant,
    OAuthError,
    ProviderMisfit,
    ProviderUnavailable,
    SignInFailure,
    failure_of,
)
from ...states import EventKind
from .. import audit_entries
from ..accounts.events import EventBus, SessionEvent
from ..accounts.overview import SessionOverview
from ..accounts.records import (
    Account,
    AccountInfo,
    SignInStart,
    Standing,
    account_id_of,
    owner_key,
    provider_of,
    sign_in_facts,
)
from ..accounts.registry import AccountRegistry
from ..audit_entries import Actor, daemon_actor
from ..errors import (
    InvalidSignIn,
    NoPerson,
    NotConfigured,
    ProviderDoesNotFit,
    ProviderUnreachable,
    SignInNotTaken,
)
from ..fresh_tokens.provider_health import ProviderHealth
from ..ports import AuditSink
from ..providers.links import ProviderLink
from ..schedule import SIGN_IN_SECONDS
from ..step_up import StepUp
from ..tokens import TokenSet
from ..validation import check_provider

if TYPE_CHECKING:  # the OAuth stack loads after the daemon is ready (daemon/app.py)
    from ..providers.flows import DeviceFlow, DeviceStart, PendingSignIn, SignedIn, SignInFlow

log = logging.getLogger(__name__)

MAX_BROWSER_SIGN_INS = 64  # abandoned ones beyond this go, the oldest first
MAX_PARAMETER_LENGTH = 4096  # of any parameter the provider sends the browser back with
MAX_PARAMETERS = 16
ERROR_CODE = re.compile(r"[a-z_]{1,64}")  # an OAuth error code as RFC 6749 4.1.2.1 spells them
# An exchange's failures the person caused or mends by signing in again are warnings;
# the others (the provider, the settings, the clock) errors. A callback's answer that is
# refused before any exchange is a warning (docs/contract.md §3: a state mismatch).
PERSONS_FAILURES = frozenset({"invalid_code", "access_denied", "expired_token"})


@dataclass(frozen=True, slots=True)
class BegunSignIn:
    """A sign-in begun over the API, and where the person completes it."""

    start: SignInStart
    url: str  # the loopback page's address, or the provider's verification address
    device: DeviceStart | None = None  # a device sign-in's code; None for a browser one


@dataclass(frozen=True, slots=True)
class SignInEnd:
    """How a sign-in the person went through at the provider ended, for the page to show."""

    account: AccountInfo | None = None  # signed in as this account
    redirect_to: str = ""  # where the browser goes then (a same-origin path)
    again_at: str = ""  # begun once more, with DPoP: the provider's page, where it goes now
    failure: SignInFailure | None = None  # why it failed, in the contract's words


def browser_at_hand() -> bool:
    """Whether the user's session can show a browser (else a device sign-in is offered)."""
    return sys.platform in ("darwin", "win32") or bool(
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )


class SignIns:
    """Begins sign-ins, keeps them while they are pending, and completes each, however it ends."""

    def __init__(
        self,
        registry: AccountRegistry,
        overview: SessionOverview,
        health: ProviderHealth,
        audit: AuditSink,
        events: EventBus,
        *,
        clock: Callable[[], float],
    ) -> None:
        self._registry = registry
        self._overview = overview
        self._health = health
        self._audit = audit
        self._events = events
        self._clock = clock
        self._begun: dict[str, SignInStart] = {}  # over the API, by id
        self._browser: OrderedDict[str, tuple[SignInFlow, PendingSignIn]] = OrderedDict()
        self._devices: dict[str, tuple[DeviceStart, asyncio.Task[None]]] = {}  # by owner
        # The sign-ins a token request waits for (step_up_sign_ins.py), by id: told how each ends.
        self._outcomes: dict[str, asyncio.Future[AccountInfo]] = {}

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
        only_as: bool = False,
    ) -> BegunSignIn:
        """Begin a sign-in for an app: in the browser, at begin_url, or on another device.

        Without a choice, a device sign-in where no browser can be shown. Signing an
        account in again goes to its own provider, and belongs to that account; a new
        account's sign-in belongs to the app that began it (records.owner_key).
        `only_as`: the sign-in is taken only if it ends as `account` (an app limited to
        some accounts began it).
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
        if only_as:
            started = self._begun[started.sign_in_id] = replace(started, only_as=account)
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

        The owner (see records.owner_key) is the only watcher told how it goes until
        it ends with an account, which then only those who may see it are told of.
        The authorize parameters (login_hint, prompt, ...) stay here, looked up by the
        id when the browser arrives: a page address cannot add any; nor can it choose
        another provider than the one (by alias; "" the default) chosen here. A step-up
        (what a token request asked, and when) is checked when the sign-in completes.
        """
        link = _for_people(self._registry.providers.named(provider))  # or NotConfigured
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

    def waited_for(
        self,
        workspace_id: str,
        owner: str,
        authorize_params: Mapping[str, str],
        provider: str,
        step_up: tuple[StepUp, float],
    ) -> tuple[SignInStart, asyncio.Future[AccountInfo]]:
        """A sign-in begun (`new`) for a token request that waits for it, and how it will end.

        The future is the account it signs in as (or a sign-in later that meets its
        step-up), or InvalidSignIn when it fails.
        """
        started = self.new(workspace_id, owner, authorize_params, provider, step_up)
        outcome: asyncio.Future[AccountInfo] = asyncio.get_running_loop().create_future()
        self._outcomes[started.sign_in_id] = outcome
        return started, outcome

    def not_waited_for(self, sign_in_id: str) -> None:
        """No request waits for the sign-in any more: how it ends is told to its watchers only."""
        self._outcomes.pop(sign_in_id, None)

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
        NotConfigured for an unknown one, ProviderUnreachable, or ProviderDoesNotFit when
        a setting stands in the way (the waiting app is told either).
        `dpop_again`: begun again, with DPoP, after a DpopSignInAgain (SignInFlow.begin).
        Its failure is logged here; the page says it.
        """
        begun = self._started(sign_in_id) if sign_in_id else None
        providers = self._registry.providers
        link = _for_people(
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
            failure = failure_of(error)
            _log_failure("authorize", failure)
            if sign_in_id:  # an app (`signin-broker login`) waits for this sign-in: tell it
                self.failed(sign_in_id, str(failure))
            if isinstance(error, ProviderMisfit):  # a setting to mend: say exactly what
                raise ProviderDoesNotFit(failure.message) from None
            raise ProviderUnreachable(str(error)) from None
        self._forget_expired_browser_sign_ins()
        while len(self._browser) >= MAX_BROWSER_SIGN_INS:
            self._browser.popitem(last=False)  # the oldest abandoned one
        self._browser[pending.request.state] = (link.sign_in, pending)
        return url

    def _take_browser(self, state: str) -> tuple[SignInFlow, PendingSignIn] | None:
        """The sign-in begun with this state and its provider's flow, removed: used once."""
        self._forget_expired_browser_sign_ins()
        for known in self._browser:
            if hmac.compare_digest(known.encode(), state.encode()):  # str: ASCII only
                return self._browser.pop(known)
        return None

    def pending(self) -> int:
        """How many sign-ins are under way: in a browser (till they expire), on a device."""
        self._forget_expired_browser_sign_ins()
        return len(self._browser) + len(self._devices)

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
        """Poll until the person has signed in on the other device, or the grant ends."""

        async def polled() -> SignedIn:
            try:
                return await flow.outcome(
                    started, grant, lambda detail: self.progress(started.sign_in_id, detail)
                )
            finally:  # no longer pending, however it ended: a sign-out cancels nothing now
                if self._devices.get(started.owner, (None,))[0] is started:
                    del self._devices[started.owner]

        await self.complete(started.sign_in_id, polled(), daemon_actor())

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

    async def complete_browser(self, answer: Mapping[str, str], actor: Actor) -> SignInEnd:
        """End a browser sign-in with the parameters the provider sent the browser back with.

        They must name a sign-in begun here, by its state (taken once), come from the
        provider it went to (RFC 9207's iss), and carry a code, not an error.
        """
        if len(answer) > MAX_PARAMETERS or any(
            len(value) > MAX_PARAMETER_LENGTH for value in answer.values()
        ):
            malformed = "The sign-in response was malformed."
            return self._end("", ("callback", "invalid_request", "oversized parameters", malformed))
        state = answer.get("state", "")
        taken = self._take_browser(state) if state else None
        if taken is None:
            message = (
                "This sign-in response does not belong to a sign-in started here,"
                " or it was used already."
            )
            return self._end("", ("callback", "state_mismatch", "unknown or reused state", message))
        flow, pending = taken
        if (refusal := _refusal_in(answer, pending)) is not None:
            return self._end(pending.sign_in_id, refusal)
        return await self.complete(
            pending.sign_in_id,
            flow.complete(pending, answer["code"]),
            actor,
            pending=pending,
        )

    async def complete(
        self,
        sign_in_id: str,
        answer: Awaitable[SignedIn],
        actor: Actor,
        *,
        pending: PendingSignIn | None = None,
    ) -> SignInEnd:
        """End a sign-in, browser or device, with the provider's answer: its redeemed tokens.

        The answer is checked (the flows validate the id_token; a step-up sign-in must
        meet its step-up), the account stored, audited and told to watchers, and the
        requests waiting for it answered; a failure is named, logged and told to the
        app waiting. `pending`: the browser's sign-in, begun once more with DPoP when
        the provider refused its code without a proof and then with one.
        """
        try:
            signed_in = await answer
        except DpopSignInAgain as again:
            if pending is None:
                raise
            return await self._again_with_dpop(pending, again)
        except (OAuthError, IdTokenInvalid, ProviderUnavailable, DeviceGrantEnded) as error:
            step = "id_token" if isinstance(error, IdTokenInvalid) else "token_exchange"
            return self._ended(sign_in_id, failure_of(error), step)
        try:
            account = await self._signed_in(signed_in, actor)
        except SignInNotTaken as refused:  # another account, or short of the step-up asked for
            failure = SignInFailure(refused.error_code, str(refused), f"{refused}.")
            return self._ended(sign_in_id, failure, "callback", logging.WARNING)
        log.info("signed in", extra={"flow": "oauth", "account": account.id})
        return SignInEnd(account, redirect_to=pending.redirect_to if pending else "")

    async def _again_with_dpop(self, pending: PendingSignIn, again: DpopSignInAgain) -> SignInEnd:
        """Begin the browser's sign-in once more, bound with DPoP from the start.

        The provider refused the code without a DPoP proof and with one: it may require
        DPoP of this client and have spent the code. A sign-in begun again so is never
        begun again a second time (SignInFlow.begin).
        """
        _log_failure(
            "token_exchange", SignInFailure("dpop_required", str(again), ""), logging.WARNING
        )
        try:
            url = await self.browser_url(
                pending.request.redirect_uri,
                pending.redirect_to,
                pending.sign_in_id,
                pending.request.workspace_id,
                provider=name_of(pending.provider),
                dpop_again=True,
            )
        except (ProviderUnreachable, ProviderDoesNotFit, NotConfigured) as error:
            message = (
                f"The identity provider refused the sign-in code ({again}), and a new"
                f" sign-in could not begin: {error}."
            )
            failure = SignInFailure("invalid_code", message, message)
            return self._ended(pending.sign_in_id, failure, "token_exchange")
        return SignInEnd(again_at=url)

    def _end(self, sign_in_id: str, refusal: tuple[str, str, str, str]) -> SignInEnd:
        """A browser sign-in refused before any exchange (its step, code, reason and message)."""
        step, *failure = refusal
        return self._ended(sign_in_id, SignInFailure(*failure), step, logging.WARNING)

    def _ended(
        self, sign_in_id: str, failure: SignInFailure, step: str, level: int | None = None
    ) -> SignInEnd:
        """A failed sign-in: logged (no secret in it), the app waiting told, the page shown."""
        _log_failure(step, failure, level)
        self.failed(sign_in_id, str(failure))
        return SignInEnd(failure=failure)

    async def _signed_in(self, signed_in: SignedIn, actor: Actor | None = None) -> AccountInfo:
        """Record a validated sign-in as an account (replacing that tenant's old session).

        SignInNotTaken, and nothing changes, for a step-up sign-in of another user or
        short of what it asked for, and for one an app limited to its accounts began of
        one of them that ended as another (SignInStart.only_as). The token requests
        waiting for this sign-in, or for a step-up of the account that it meets (`login
        --acr-values`), are answered.
        """
        link = self._registry.providers.at(signed_in.provider)
        account_id = account_id_of(str(signed_in.claims["sub"]), signed_in.workspace_id, link.alias)
        acr, auth_time = sign_in_facts(signed_in.claims)  # the ID token's, not userinfo's
        begun = self._begun.get(signed_in.sign_in_id) if signed_in.sign_in_id else None
        if begun is not None and begun.only_as and begun.only_as != account_id:
            raise SignInNotTaken(
                f"the sign-in was begun for {begun.only_as} by an app that may use only the"
                " accounts its policy names, and another account signed in",
                "wrong_account",
            )
        if begun is not None and begun.step_up is not None:
            refusal = begun.step_up.refusal(begun.owner, begun.asked_at, account_id, acr, auth_time)
            if refusal:
                raise SignInNotTaken(refusal, "step_up_refused")
        account, previous = await self._registry.add(
            await self._account_of(link, account_id, signed_in)
        )
        self._audit.record(
            audit_entries.signed_in(
                actor or daemon_actor(), account_id, account.tokens.scopes, again=bool(previous)
            )
        )
        who = account.info.display_name or account.info.platform_user_id
        self._publish(EventKind.SIGNED_IN, account_id, f"signed in as {who}", signed_in.sign_in_id)
        for conflict in self._overview.alias_conflicts():
            if account_id in conflict.hidden:
                log.warning(
                    "an alias is the login of the account that signed in",
                    extra={"account": account_id, "reason": str(conflict)},
                )
        added = self._overview.info(account)
        self._answer_waiting(signed_in.sign_in_id, account_id, (acr, auth_time), added)
        return added

    async def _account_of(
        self, link: ProviderLink, account_id: str, signed_in: SignedIn
    ) -> Account:
        """The new account of a sign-in, with the profile the provider gives."""
        claims = await self._profile_claims(link, signed_in)
        now = self._clock()
        self._health.contacted(link)  # it just answered the code exchange (status shows when)
        acr, auth_time = sign_in_facts(signed_in.claims)
        info = AccountInfo(
            id=account_id,
            platform_user_id=str(claims["sub"]),
            workspace_id=signed_in.workspace_id,
            provider=link.alias,
            display_name=_text(claims, "name") or _text(claims, "preferred_username"),
            email=_text(claims, "email"),
            username=_text(claims, "preferred_username"),
            signed_in_at=now,
            acr=acr,
            auth_time=auth_time,
            dpop_bound_by=signed_in.dpop_bound_by,
        )
        tokens = TokenSet.issued(signed_in.tokens, now - signed_in.tokens.age(), ())
        if tokens.refresh_token is None:  # status shows it too: no next renewal
            log.warning(
                "the provider issued no refresh token: sign in again when the token expires",
                extra={"account": account_id, "expires_in_s": int(tokens.expires_at - now)},
            )
        return Account(
            info,
            tokens,
            signed_in.client_id,
            signed_in.dpop_key,
            link=link,
            standing=Standing(revalidate_at=self._health.next_revalidation_at(link)),
        )

    def _answer_waiting(
        self, sign_in_id: str, account_id: str, facts: tuple[str, int], added: AccountInfo
    ) -> None:
        """Answer the requests waiting for this sign-in, or for a step-up it meets."""
        acr, auth_time = facts
        for waited_for, waiting in list(self._outcomes.items()):
            begun = self._begun.get(waited_for)
            meets = (
                begun is not None
                and begun.step_up is not None
                and not begun.step_up.refusal(
                    begun.owner, begun.asked_at, account_id, acr, auth_time
                )
            )
            if waited_for == sign_in_id or meets:
                del self._outcomes[waited_for]
                if not waiting.done():
                    waiting.set_result(added)

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
        waiting = self._outcomes.pop(sign_in_id, None)
        if waiting is not None and not waiting.done():
            waiting.set_exception(InvalidSignIn(detail))

    def progress(self, sign_in_id: str, detail: str) -> None:
        """Tell watchers how a sign-in that takes a while stands (a device sign-in)."""
        self._publish(EventKind.SIGN_IN_PROGRESS, "", detail, sign_in_id)

    def _publish(self, kind: EventKind, account: str, detail: str, sign_in_id: str = "") -> None:
        begun = self._begun.get(sign_in_id) if sign_in_id else None
        owner = begun.owner if begun is not None else ""
        self._events.publish(
            SessionEvent(kind, account=account, detail=detail, sign_in_id=sign_in_id, owner=owner)
        )


def _for_people(link: ProviderLink) -> ProviderLink:
    """The provider a person signs in at; a service account's has nobody to (NoPerson)."""
    if link.service:
        raise NoPerson(
            f"{link.name}'s account",
            "there is nobody to sign in; its token comes from the client's own credentials",
        )
    return link


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


def _refusal_in(
    answer: Mapping[str, str], pending: PendingSignIn
) -> tuple[str, str, str, str] | None:
    """Why the provider's answer to a browser sign-in is not taken (step, code, reason, message).

    None when it is: from the provider the request went to, with a code and no error.
    """
    if problem := pending.request.issuer_problem(answer.get("iss")):
        message = "This sign-in response does not come from the identity provider it was sent to."
        return "callback", "iss_mismatch", problem, message
    if "error" in answer:
        error = answer["error"] if ERROR_CODE.fullmatch(answer["error"]) else "invalid"
        message = (
            "The sign-in was declined."
            if error == "access_denied"
            else f"The identity provider refused the sign-in ({error})."
        )
        if said := _error_description(answer.get("error_description", "")):
            message = f"{message[:-1]}: {said}."
        return "authorize", error, f"{message[:1].lower()}{message[1:-1]}", message
    if not answer.get("code"):
        return (
            "callback",
            "invalid_request",
            "the response had no code",
            "The response had no code.",
        )
    return None


def _error_description(text: str) -> str:
    """The provider's own words, in RFC 6749 4.1.2.1's printable ASCII only, shortened."""
    kept = "".join(c for c in text if " " <= c <= "~" and c not in '"\\').strip()
    return kept[:200].rstrip(".")


def _log_failure(step: str, failure: SignInFailure, level: int | None = None) -> None:
    """The contract's structured record of a failed sign-in (docs/contract.md §15).

    Its reason never holds a code or a token; `level` by PERSONS_FAILURES unless given.
    """
    if level is None:
        level = logging.WARNING if failure.error_code in PERSONS_FAILURES else logging.ERROR
    log.log(
        level,
        "sign-in failed",
        extra={
            "flow": "oauth",
            "step": step,
            "error_code": failure.error_code,
            "reason": failure.reason,
        },
    )

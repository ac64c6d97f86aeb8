"""Step-up sign-ins under way (RFC 9470): token requests that wait for a stronger sign-in of theirs.

When an account's sign-in does not meet a request's step-up, a browser sign-in of that
account is begun with the step-up's authorize parameters, and the person is told (a
SIGN_IN_PROGRESS event of the account, which the daemon turns into a desktop
notification; the loopback page; `signin-broker login` continues it). The request
waits for it, bounded, as an app's `ask` does. Requests for the same account and the
same step-up share one sign-in; every other request is served from the current
session meanwhile, which the new sign-in replaces only when it completes, for the
same user, meeting the step-up (sign_ins.py checks that). What a step-up asks, and
whether a sign-in meets it, is step_up.py's.

Each app has room of its own: the step-ups one app waits for are bounded apart from
the others', so an app that keeps asking for new ones cannot take the others' room.
Only acr values the provider lists (acr_values_supported) are asked for and shown to
the person, with the app that asked; others are refused (step_up.StepUp.offered_by).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ...identities import name_of
from ...oidc.errors import ProviderUnavailable
from ...states import EventKind
from ..accounts.events import EventBus, SessionEvent
from ..accounts.records import Account, AccountInfo, Entitlement, IssuedToken, SignInStart
from ..accounts.registry import AccountRegistry
from ..audit_entries import Actor
from ..clock import to_wall
from ..errors import InvalidSignIn, NoPerson, StepUpRequired
from ..step_up import CLOCK_LEEWAY_SECONDS, StepUp
from .sign_ins import BegunSignIn, SignIns, page_url

log = logging.getLogger(__name__)

MAX_PENDING_PER_APP = 4  # different step-ups one app's requests wait for at once
MAX_PENDING = 64  # over all apps and accounts: a bound on what the daemon keeps


@dataclass(eq=False, slots=True)
class _Pending:
    """One step-up sign-in and the requests waiting for it."""

    started: SignInStart
    url: str
    outcome: asyncio.Future[AccountInfo]
    waiters: Counter[str] = field(default_factory=Counter)  # requests waiting, by app
    joined: set[str] = field(default_factory=set)  # the apps told of, for the person


class StepUpSignIns:
    """Begins step-up sign-ins, one per account and step-up, and lets requests wait for them."""

    def __init__(
        self,
        registry: AccountRegistry,
        sign_ins: SignIns,
        get_token: Callable[..., Awaitable[IssuedToken]],
        events: EventBus,
        *,
        timeout: float,
        clock: Callable[[], float],
    ) -> None:
        self._registry = registry
        self._sign_ins = sign_ins
        self._get_token = get_token  # TokenKeeper.get_token
        self._events = events
        self._clock = clock
        self.timeout = timeout
        # By account and what is asked: the acr values as a set (their order is only a
        # preference), and max_age.
        self._pending: dict[tuple[str, frozenset[str], int | None], _Pending] = {}

    async def token(
        self,
        step_up: StepUp,
        begin_url: str,
        account_id: str,
        *,
        actor: Actor,
        entitlement: Entitlement,
        may_begin: bool = True,
        **asked: object,
    ) -> IssuedToken:
        """A token (TokenKeeper.get_token, with `asked`) whose sign-in meets the step-up.

        Waits for a step-up sign-in when the account's does not, begun at begin_url's
        page, unless it may not begin one (a forward's caller: only a sign-in that meets
        it already); StepUpRequired when none that does comes within the timeout (or it
        failed).
        """
        app = actor.app
        asked_at = to_wall(self._clock, self._clock())
        account = self._registry.resolve(account_id, entitlement)
        if account.info.service:
            raise NoPerson(account.info.id, "it cannot step up: a step-up is a person's sign-in")
        step_up = step_up.offered_by(await _acr_values_listed(account))
        info = account.info
        leeway = 0
        unmet = step_up.unmet(info.acr, info.auth_time, asked_at)
        if unmet and not may_begin:
            options = "".join(
                [f" --acr-values '{' '.join(step_up.acr_values)}'"] * bool(step_up.acr_values)
                + [f" --max-age {step_up.max_age}"] * (step_up.max_age is not None)
            )
            why = (
                f"its sign-in: {unmet}; a step-up never begins through a forward: begin it on"
                f" the forward's host (`signin-broker token --account {info.id}{options}`)"
            )
            raise StepUpRequired(info.id, str(step_up), why)
        if unmet:
            offline = "offline_access" in account.tokens.scopes
            asked_at = await self._wait(step_up, info, app, (asked_at, offline), begin_url)
            leeway = CLOCK_LEEWAY_SECONDS  # as the sign-in was checked when it came
        token = await self._get_token(info.id, entitlement=entitlement, actor=actor, **asked)
        unmet = step_up.unmet(token.acr, token.auth_time, asked_at, leeway)
        if unmet:  # another sign-in replaced the stepped-up one meanwhile
            raise StepUpRequired(token.account, str(step_up), f"its current sign-in: {unmet}")
        return token

    async def _wait(
        self,
        step_up: StepUp,
        info: AccountInfo,
        app: str,
        asked: tuple[float, bool],
        begin_url: str,
    ) -> float:
        """Wait for the step-up sign-in (begun now, or joined); when the flight was asked for.

        `asked`: when the request came, and whether the session holds offline_access.
        """
        key = (info.id, frozenset(step_up.acr_values), step_up.max_age)
        pending = self._pending.get(key)
        if pending is None:
            self._make_room(app, info, step_up)
            pending = self._begin(step_up, info, asked, begin_url)
            self._pending[key] = pending
        if app not in pending.joined:
            pending.joined.add(app)
            self._tell(pending, info, step_up, app)
        pending.waiters[app] += 1
        try:
            await asyncio.wait_for(asyncio.shield(pending.outcome), self.timeout)
        except TimeoutError:
            why = f"no sign-in that meets it came within {self.timeout:g} s ({pending.url})"
            raise StepUpRequired(info.id, str(step_up), why) from None
        except InvalidSignIn as failed:
            raise StepUpRequired(info.id, str(step_up), f"the sign-in failed: {failed}") from None
        finally:
            pending.waiters[app] -= 1
            if not pending.waiters[app]:
                del pending.waiters[app]
            if not pending.waiters and self._pending.get(key) is pending:
                del self._pending[key]  # the next request looks afresh
                self._sign_ins.not_waited_for(pending.started.sign_in_id)
        return pending.started.asked_at

    def _make_room(self, app: str, info: AccountInfo, step_up: StepUp) -> None:
        """StepUpRequired when the app, or all apps together, wait for the most there may be."""
        mine = sum(1 for pending in self._pending.values() if app in pending.waiters)
        if mine >= MAX_PENDING_PER_APP:
            why = (
                f"this app waits for {mine} other step-up sign-ins already (at most"
                f" {MAX_PENDING_PER_APP} at once); ask again once one has ended"
            )
            raise StepUpRequired(info.id, str(step_up), why)
        if len(self._pending) >= MAX_PENDING:
            why = f"{MAX_PENDING} other step-up sign-ins wait for the person already"
            raise StepUpRequired(info.id, str(step_up), why)

    def _begin(
        self, step_up: StepUp, info: AccountInfo, asked: tuple[float, bool], url: str
    ) -> _Pending:
        """A browser sign-in of the account that asks the provider for the step-up."""
        asked_at, offline = asked
        acr_unmet = bool(step_up.acr_values) and info.acr not in step_up.acr_values
        started, outcome = self._sign_ins.waited_for(
            info.workspace_id,
            info.id,
            step_up.authorize_params(acr_unmet=acr_unmet, offline=offline),
            name_of(info.provider),
            (step_up, asked_at),
        )
        log.info(
            "a token request waits for a step-up sign-in",
            extra={"account": info.id, "step_up": str(step_up)},
        )
        return _Pending(started, page_url(url, started), outcome)

    def _tell(self, pending: _Pending, info: AccountInfo, step_up: StepUp, app: str) -> None:
        """Tell the person (watchers, the TUI, a desktop notification) what to do, per app."""
        detail = (
            f"{app or 'an app'} needs a stronger sign-in of {info.display_name or info.id}"
            f" ({step_up}): sign in at {pending.url} or run `signin-broker login`"
        )
        self._events.publish(
            SessionEvent(
                EventKind.SIGN_IN_PROGRESS,
                account=info.id,
                detail=detail,
                sign_in_id=pending.started.sign_in_id,
                owner=info.id,
                step_up=True,
            )
        )

    def continued(self, account: str, entitlement: Entitlement) -> BegunSignIn | None:
        """The newest step-up sign-in waited for, of `account` (any the caller sees if "")."""
        for (account_id, *_), pending in reversed(self._pending.items()):
            if (account_id == account or not account) and entitlement.sees(account_id):
                return BegunSignIn(pending.started, pending.url)
        return None

    def waiting(self) -> list[tuple[str, str]]:
        """The step-up sign-ins waited for, as (account, page address), for the dashboard."""
        return [(account_id, pending.url) for (account_id, *_), pending in self._pending.items()]


async def _acr_values_listed(account: Account) -> tuple[str, ...] | None:
    """The acr values the account's provider lists; None when it lists none, or cannot be read.

    A discovery document that cannot be read now asks for nothing to be refused: the
    values are then treated as unlisted (never shown), and a sign-in needs the provider.
    """
    link = account.link
    if link is None:
        return None
    try:
        return (await link.client.metadata()).acr_values_supported
    except ProviderUnavailable:
        return None

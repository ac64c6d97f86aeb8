"""The TokenBroker gRPC service: checks requests, asks the session manager, answers.

Requests become session calls and their results messages (messages.py); refusals
become the contract's statuses (statuses.py).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ..._version import __version__
from ...session import audit_rows
from ...session.accounts import (
    AppUse,
    Entitlement,
    owner_key,
)
from ...session.errors import (
    AccountNotFound,
    SessionError,
)
from ...session.events import SessionEvent, WatcherDropped
from ...session.manager import SessionManager
from ...session.validation import (
    MAX_MIN_TTL_SECONDS,
    check_account,
    check_alias,
    check_audience,
    check_authorize_params,
    check_provider,
    check_scopes,
    check_workspace_id,
)
from ...v1 import broker_pb2 as pb
from ..apps.gate import AppGate, AppView
from ..apps.policy import Decision
from ..audit_trail import AuditTrail
from ..callers.identity import Caller
from ..host.memory import resident_bytes
from ..qr import qr_image
from .messages import (
    DECISION,
    DECISION_OF,
    DEVICE_OF,
    EVENT_KIND,
    REVOCATION,
    SIGN_IN_STATE,
    account_message,
    actor_of,
    app_message,
    audit_event,
    provider_message,
)
from .statuses import InvalidRequest, checked, status_of, unary
from .transport import current_caller

log = logging.getLogger(__name__)

MAX_AUDIT_ROWS = 1000
MAX_REDIRECT_TO_LENGTH = 2048  # the loopback pages refuse longer parameters anyway


@dataclass(frozen=True, slots=True)
class DaemonInfo:
    """Facts about this daemon process that GetStatus reports."""

    socket_path: Path
    started_at: float
    web_url: str  # the loopback page, e.g. http://127.0.0.1:8765
    sign_in_url: str  # where the page begins a browser sign-in (web.pages.BEGIN_PATH)
    started_by: str = "manual"  # "socket activation", "service manager" or "manual"
    pid: int = field(default_factory=os.getpid)


class TokenBrokerServicer:
    """Serves signin_broker.v1.TokenBroker for the verified caller of each call."""

    def __init__(
        self, session: SessionManager, info: DaemonInfo, apps: AppGate, audit: AuditTrail
    ) -> None:
        self._session = session
        self._info = info
        self._apps = apps
        self._audit = audit

    @unary
    async def GetToken(self, request: pb.GetTokenRequest) -> pb.GetTokenResponse:
        """Check the request, then return a token from the session manager."""
        account = checked(check_account, request.account)
        scopes = checked(check_scopes, list(request.scopes))
        if not 0 <= request.min_ttl_seconds <= MAX_MIN_TTL_SECONDS:
            raise InvalidRequest(f"min_ttl_seconds must be between 0 and {MAX_MIN_TTL_SECONDS}")
        audience = checked(check_audience, request.audience)
        caller = current_caller()
        entitlement = await self._apps.admit(caller)
        token = await self._session.get_token(
            self._session.account_named(account, entitlement),
            scopes,
            request.min_ttl_seconds,
            audience=audience,
            actor=actor_of(caller),
            entitlement=entitlement,
            id_token=request.id_token,
            refused=request.refused,
        )
        return pb.GetTokenResponse(
            access_token=token.access_token,
            token_type=token.token_type,
            expires_at_unix=token.expires_at,
            scopes=token.scopes,
            account=token.account,
            id_token=token.id_token,
            id_token_expires_at_unix=token.id_token_expires_at,
        )

    @unary
    async def GetStatus(self, request: pb.GetStatusRequest) -> pb.GetStatusResponse:
        """Describe the daemon, the sign-in state and the caller."""
        caller = current_caller()
        visible = await self._apps.visible(caller)
        sessions = self._session.status(visible)
        return pb.GetStatusResponse(
            version=__version__,
            pid=self._info.pid,
            started_at_unix=int(self._info.started_at),
            socket_path=str(self._info.socket_path),
            issuer=self._session.issuer or "",
            sign_in_state=SIGN_IN_STATE[sessions.state],
            default_account=sessions.default.id if sessions.default else "",
            account_count=sessions.account_count,
            caller=pb.Caller(
                uid=caller.uid, gid=caller.gid, pid=caller.pid, executable=caller.executable
            ),
            web_url=self._info.web_url + "/",
            degraded_reason=self._session.degraded_reason,
            last_provider_contact_unix=int(self._session.last_provider_contact),
            storage=self._session.storage,
            storage_problem=sessions.storage_problem,
            default_account_detail=account_message(sessions.default) if sessions.default else None,
            started_by=self._info.started_by,
            rss_bytes=resident_bytes(),
            audit_degraded_reason=self._audit.degraded_reason,
            providers=[provider_message(link) for link in self._session.providers],
            ended_sessions=[
                pb.EndedSession(
                    account=ended.account,
                    display_name=ended.display_name,
                    kind=EVENT_KIND[ended.kind],
                    reason=ended.reason,
                    ended_at_unix=int(ended.ended_at),
                )
                for ended in sessions.ended
            ],
        )

    @unary
    async def ListAccounts(self, request: pb.ListAccountsRequest) -> pb.ListAccountsResponse:
        """List the accounts, default first."""
        visible = await self._apps.readable(current_caller())
        return pb.ListAccountsResponse(
            accounts=[account_message(a) for a in self._session.accounts(visible)]
        )

    @unary
    async def BeginSignIn(self, request: pb.BeginSignInRequest) -> pb.BeginSignInResponse:
        """Start a sign-in for an app the user allows; only it hears how the sign-in goes."""
        workspace_id = checked(check_workspace_id, request.workspace_id)
        if len(request.redirect_to) > MAX_REDIRECT_TO_LENGTH:
            raise InvalidRequest(f"redirect_to must be at most {MAX_REDIRECT_TO_LENGTH} characters")
        authorize_params = checked(check_authorize_params, dict(request.authorize_params))
        provider = checked(check_provider, request.provider)
        if request.method not in DEVICE_OF:
            raise InvalidRequest("method must be SIGN_IN_METHOD_BROWSER or _DEVICE_CODE, or unset")
        caller = current_caller()
        account, _ = await self._writable(request.account, caller)
        begun = await self._session.begin_sign_in(
            account=account,
            app=actor_of(caller).app,
            device=DEVICE_OF[request.method],
            workspace_id=workspace_id,
            authorize_params=authorize_params,
            redirect_to=request.redirect_to,
            provider=provider,
            begin_url=self._info.sign_in_url,
        )
        response = pb.BeginSignInResponse(
            sign_in_id=begun.start.sign_in_id,
            sign_in_url=begun.url,
            expires_at_unix=int(begun.start.expires_at),
            method=pb.SIGN_IN_METHOD_BROWSER,
        )
        if begun.device is not None:
            response.method = pb.SIGN_IN_METHOD_DEVICE_CODE
            response.expires_at_unix = int(begun.device.expires_at)
            response.verification_uri = begun.device.verification_uri
            response.verification_uri_complete = begun.device.verification_uri_complete
            response.user_code = begun.device.user_code
            response.interval_seconds = begun.device.interval
        return response

    @unary
    async def SignOut(self, request: pb.SignOutRequest) -> pb.SignOutResponse:
        """End an account's session."""
        caller = current_caller()
        account, entitlement = await self._writable(request.account, caller)
        result = await self._session.sign_out(
            account, self._info.web_url, actor=actor_of(caller), entitlement=entitlement
        )
        return pb.SignOutResponse(
            was_signed_in=result.was_signed_in,
            logout_url=result.logout_url,
            revocation=REVOCATION[result.revocation],
            revocation_error=result.revocation_error,
        )

    @unary
    async def GetSignInQr(self, request: pb.GetSignInQrRequest) -> pb.GetSignInQrResponse:
        """The QR code of a pending device sign-in the caller owns; NOT_FOUND otherwise."""
        caller = current_caller()
        owners = self._owners(caller, await self._apps.readable(caller))
        started = self._session.device_sign_in(request.sign_in_id, owners)
        if started is None:
            raise AccountNotFound
        svg = request.format != pb.QR_FORMAT_PNG
        return pb.GetSignInQrResponse(
            media_type="image/svg+xml" if svg else "image/png",
            image=qr_image(started.verification_uri_complete or started.verification_uri, svg),
            user_code=started.user_code,
            verification_uri=started.verification_uri,
            expires_at_unix=int(started.expires_at),
        )

    @unary
    async def ListApps(self, request: pb.ListAppsRequest) -> pb.ListAppsResponse:
        """The apps seen and in the policy, with their decisions (for a managing app only)."""
        await self._apps.admit_manager(current_caller())
        return pb.ListAppsResponse(
            apps=[app_message(view, use) for view, use in self._apps_by_last_use()],
            default_decision=DECISION[self._apps.default],
            policy_file=str(self._apps.policy.path),
            policy_error=self._apps.policy.error,
        )

    @unary
    async def SetAppPolicy(self, request: pb.SetAppPolicyRequest) -> pb.SetAppPolicyResponse:
        """Record the user's decision for an app and answer its waiting requests."""
        caller = current_caller()
        await self._apps.admit_manager(caller)  # else a denied app could allow itself
        if not request.app:
            raise InvalidRequest("app is required: its id, path or file name")
        accounts = [checked(check_account, account) for account in request.accounts]
        if not all(accounts):
            raise InvalidRequest("accounts must not contain an empty id")
        accounts = [self._session.account_named(account) for account in accounts]  # as ids
        scopes = checked(check_scopes, list(request.scopes))
        decision = DECISION_OF.get(request.decision)
        if request.id_token and decision is not Decision.ALLOW:
            raise InvalidRequest("the ID token can be allowed only with the decision allow")
        if request.once:
            if decision not in (Decision.ALLOW, Decision.DENY) or request.id_token or request.pin:
                raise InvalidRequest("an answer for once is allow or deny, without rules")
            view, answered = self._apps.answer_once(request.app, decision)
            entry = audit_rows.app_answered_once(
                actor_of(caller), view.record.id, str(decision), answered
            )
        else:
            view, answered = await self._apps.decide(
                request.app, decision, accounts, scopes, pin=request.pin, id_token=request.id_token
            )
            entry = audit_rows.app_decided(
                actor_of(caller),
                view.record.id,
                str(decision or "default"),
                accounts,
                kept=view.decided,
                id_token=request.id_token,
            )
        self._audit.record(entry)
        use = self._session.app_use().get(view.record.id)
        return pb.SetAppPolicyResponse(app=app_message(view, use), answered=answered)

    @unary
    async def SetDefaultAccount(
        self, request: pb.SetDefaultAccountRequest
    ) -> pb.SetDefaultAccountResponse:
        """Make an account the default."""
        caller = current_caller()
        account, entitlement = await self._writable(request.account, caller, required=True)
        info = await self._session.set_default(
            account, actor=actor_of(caller), entitlement=entitlement
        )
        return pb.SetDefaultAccountResponse(account=account_message(info))

    @unary
    async def RemoveAccount(self, request: pb.RemoveAccountRequest) -> pb.RemoveAccountResponse:
        """Sign the account out and delete everything kept of it."""
        caller = current_caller()
        account, entitlement = await self._writable(request.account, caller, required=True)
        logout_url = await self._session.remove_account(
            account, self._info.web_url, actor=actor_of(caller), entitlement=entitlement
        )
        return pb.RemoveAccountResponse(
            logout_url=logout_url,
            audit_purge_at_unix=int(time.time() + self._audit.retention_seconds),
        )

    @unary
    async def SetAccountAlias(
        self, request: pb.SetAccountAliasRequest
    ) -> pb.SetAccountAliasResponse:
        """Give a signed-in account an alias, or remove one (for a managing app only)."""
        caller = current_caller()
        await self._apps.admit_manager(caller)  # the aliases are the person's, like the policy
        alias = checked(check_alias, request.alias)
        account = checked(check_account, request.account)
        if account:
            named = await self._session.set_alias(alias, account, actor=actor_of(caller))
        else:
            named = await self._session.remove_alias(alias, actor=actor_of(caller))
        return pb.SetAccountAliasResponse(account=named)

    @unary
    async def ListAuditEvents(
        self, request: pb.ListAuditEventsRequest
    ) -> pb.ListAuditEventsResponse:
        """Recent audit rows of the accounts the caller may see, newest first."""
        caller = current_caller()
        if not 0 <= request.limit <= MAX_AUDIT_ROWS or request.before_id < 0:
            raise InvalidRequest(f"limit must be 0 to {MAX_AUDIT_ROWS} and before_id at least 0")
        visible = await self._apps.readable(caller)
        account = self._session.account_named(checked(check_account, request.account), visible)
        if account and not visible.sees(account):
            raise AccountNotFound
        # A signed-out account's rows stay readable until a removal marks them deleted.
        accounts = (
            [account]
            if account
            else sorted(
                {a.id for a in self._session.accounts(visible)}
                | {a for a in await self._audit.accounts() if visible.sees(a)}
            )
        )
        rows = await self._audit.read(
            accounts,
            app=request.app,
            limit=request.limit or 100,
            before_id=request.before_id or None,
            # Rows of no account (app policy, audit reads) may name any account.
            daemon_wide=not account and visible.accounts is None,
        )
        self._audit.record(audit_rows.audit_read(actor_of(caller), account, request.app, len(rows)))
        return pb.ListAuditEventsResponse(events=[audit_event(row) for row in rows])

    def _apps_by_last_use(self) -> list[tuple[AppView, AppUse | None]]:
        """The apps with their use of any account, the most recently used first."""
        use = self._session.app_use()
        listed = [(view, use.get(view.record.id)) for view in self._apps.apps()]
        return sorted(listed, key=lambda pair: -(pair[1].last_used if pair[1] else 0.0))

    async def _writable(
        self, account: str, caller: Caller, *, required: bool = False
    ) -> tuple[str, Entitlement]:
        """The account a write names, and what the caller may act on.

        Naming an account the caller may not act on, by any name, is INVALID_ARGUMENT
        whether it exists or not (the contract's T4), so a write cannot probe for
        accounts either.
        """
        named = checked(check_account, account)
        if required and not named:
            raise InvalidRequest(
                "account is required: name it by its id, alias or e-mail (signin-broker accounts)"
            )
        entitlement = await self._apps.admit(caller)
        try:
            account = self._session.account_named(named, entitlement)
        except AccountNotFound:
            if entitlement.accounts is None:
                raise
            account = named  # no account it may see has this name: refused below
        if account and not entitlement.sees(account):
            raise InvalidRequest(f"{named} is not an account this app may act on")
        return account, entitlement

    async def WatchEvents(
        self, request: pb.WatchEventsRequest
    ) -> AsyncIterator[pb.WatchEventsResponse]:
        """A snapshot, then every event the caller may see, until it leaves or the daemon stops.

        What it may see is decided afresh for each event: the user may change the
        policy while the app watches.
        """
        caller = current_caller()
        try:
            await self._apps.readable(caller)
        except SessionError as error:
            raise GRPCError(status_of(error), str(error)) from None
        await self._session.ready.wait()  # the snapshot tells the restored state
        with self._session.subscribe() as subscription:
            yield self._snapshot(await self._apps.visible(caller), time.time())
            while True:
                try:
                    event = await subscription.next()
                except WatcherDropped as dropped:
                    raise GRPCError(Status.UNAVAILABLE, str(dropped)) from None
                visible = await self._apps.visible(caller)
                if event.concerns(visible, self._owners(caller, visible)):
                    yield self._event(event, visible)

    def _owners(self, caller: Caller, entitlement: Entitlement) -> frozenset[str]:
        """The owner keys of sign-ins the caller may follow: its own, and its accounts'."""
        accounts = [account.id for account in self._session.accounts(entitlement)]
        return frozenset([*accounts, owner_key("", actor_of(caller).app)])

    def _event(self, event: SessionEvent, visible: Entitlement) -> pb.WatchEventsResponse:
        message = self._snapshot(visible, event.occurred_at)
        message.kind = EVENT_KIND[event.kind]
        message.account, message.detail = event.account, event.detail
        message.sign_in_id = event.sign_in_id
        return message

    def _snapshot(self, visible: Entitlement, at: float) -> pb.WatchEventsResponse:
        """A message with the sign-in state as the watcher may know it."""
        return pb.WatchEventsResponse(
            kind=pb.EVENT_KIND_SNAPSHOT,
            occurred_at_unix_ms=int(at * 1000),
            sign_in_state=SIGN_IN_STATE[self._session.sign_in_state(visible)],
        )

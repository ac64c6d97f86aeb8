"""The TokenBroker calls that read: check requests, ask the session manager, answer.

Requests become session calls and their results messages (messages.py); refusals
become the contract's statuses (statuses.py).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from grpclib.const import Status
from grpclib.exceptions import GRPCError

from ..._version import __version__
from ...session import audit_entries
from ...session.accounts.events import SessionEvent, WatcherDropped
from ...session.accounts.records import Entitlement
from ...session.errors import AccountNotFound
from ...session.manager import SessionManager
from ...session.validation import check_account, check_step_up
from ...store.audit_log import AuditTrail
from ...v1 import broker_pb2 as pb
from ..host.memory import resident_bytes
from ..qr import qr_image
from ..token_files import TokenFiles
from .account_access import Admitted
from .messages import (
    EVENT_KIND,
    SIGN_IN_STATE,
    account_message,
    actor_of,
    audit_event,
    provider_message,
    token_file_message,
    token_terms,
)
from .service_info import DaemonInfo
from .statuses import InvalidRequest, checked

MAX_AUDIT_ROWS = 1000


class TokenBrokerServicer:
    """What apps read: tokens, the status, accounts, a device sign-in's QR code, events, audit.

    The calls that change sessions are AccountCalls (account_calls.py), the person's
    own ManagerCalls (manager_calls.py). Who may call each is the access table's
    (access.py), and which accounts a call may see its object-level half's
    (account_access.py): a handler is given the call as admitted and asks it.
    """

    def __init__(
        self,
        session: SessionManager,
        info: DaemonInfo,
        audit: AuditTrail,
        token_files: TokenFiles,
    ) -> None:
        self._session = session
        self._info = info
        self._audit = audit
        self._token_files = token_files

    async def GetToken(
        self, request: pb.GetTokenRequest, admitted: Admitted
    ) -> pb.GetTokenResponse:
        """Check the request, then return a token from the session manager."""
        account, scopes, audience = token_terms(request)
        step_up = None  # the common case costs one look at the two fields
        if request.acr_values or request.HasField("max_age_seconds"):
            max_age = request.max_age_seconds if request.HasField("max_age_seconds") else None
            step_up = checked(partial(check_step_up, request.acr_values), max_age)
        caller, entitlement, origin = admitted.caller, admitted.entitlement, admitted.origin
        asked: dict[str, Any] = {
            "scopes": scopes,
            "min_ttl": request.min_ttl_seconds,
            "audience": audience,
            "actor": actor_of(caller, request.app_hint, origin or ""),
            "entitlement": entitlement,
            "id_token": request.id_token,
            "refused": request.refused,
        }
        account_id = admitted.account_to_see(account, self._session.names)
        if step_up:
            token = await self._session.step_ups.token(
                step_up,
                self._info.sign_in_url,
                account_id,
                may_begin=admitted.begins_sign_ins,
                **asked,
            )
        else:
            token = await self._session.tokens.get_token(account_id, **asked)
        return pb.GetTokenResponse(
            access_token=token.access_token,
            token_type=token.token_type,
            expires_at_unix=token.expires_at,
            scopes=token.scopes,
            account=token.account,
            id_token=token.id_token,
            id_token_expires_at_unix=token.id_token_expires_at,
            acr=token.acr,
            auth_time_unix=token.auth_time,
            dpop_bound_by=token.dpop_bound_by,
        )

    async def GetStatus(
        self, request: pb.GetStatusRequest, admitted: Admitted
    ) -> pb.GetStatusResponse:
        """Describe the daemon, the sign-in state and the caller."""
        caller = admitted.caller
        sessions = self._session.overview.status(admitted.entitlement)
        return pb.GetStatusResponse(
            version=__version__,
            pid=self._info.pid,
            started_at_unix=int(self._info.started_at),
            socket_path=str(self._info.socket_path),
            issuer=self._session.overview.issuer or "",
            sign_in_state=SIGN_IN_STATE[sessions.state],
            default_account=sessions.default.id if sessions.default else "",
            account_count=sessions.account_count,
            caller=pb.Caller(
                uid=caller.uid, gid=caller.gid, pid=caller.pid, executable=caller.executable
            ),
            web_url=self._info.web_url + "/",
            degraded_reason=self._session.overview.degraded_reason,
            last_provider_contact_unix=int(self._session.overview.last_provider_contact),
            storage=self._session.overview.storage,
            storage_problem=sessions.storage_problem,
            config_warnings=self._info.config_warnings,
            alias_conflicts=sessions.alias_conflicts,
            default_account_detail=account_message(sessions.default) if sessions.default else None,
            started_by=self._info.started_by,
            rss_bytes=resident_bytes(),
            audit_degraded_reason=self._audit.degraded_reason,
            providers=[provider_message(link) for link in self._session.overview.providers],
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
            token_files=[
                token_file_message(file)
                for file in self._token_files.statuses(admitted.entitlement)
            ],
        )

    async def ListAccounts(
        self, request: pb.ListAccountsRequest, admitted: Admitted
    ) -> pb.ListAccountsResponse:
        """List the accounts, default first."""
        return pb.ListAccountsResponse(
            accounts=[
                account_message(a) for a in self._session.overview.accounts(admitted.entitlement)
            ]
        )

    async def GetSignInQr(
        self, request: pb.GetSignInQrRequest, admitted: Admitted
    ) -> pb.GetSignInQrResponse:
        """The QR code of a pending device sign-in the caller owns; NOT_FOUND otherwise."""
        started = self._session.sign_ins.device(request.sign_in_id, self._followed(admitted))
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

    async def WatchEvents(
        self, request: pb.WatchEventsRequest, admitted: Admitted
    ) -> AsyncIterator[pb.WatchEventsResponse]:
        """A snapshot, then every event the caller may see, until it leaves or the daemon stops.

        What it may see is asked afresh for each event (Admitted.now): the user may
        change the policy while the app watches.
        """
        with self._session.subscribe() as subscription:
            yield self._snapshot(admitted.entitlement, time.time())
            while True:
                try:
                    event = await subscription.next()
                except WatcherDropped as dropped:
                    raise GRPCError(Status.UNAVAILABLE, str(dropped)) from None
                now = await admitted.now()
                if event.concerns(now.entitlement, self._followed(now)):
                    yield self._event(event, now.entitlement)

    async def ListAuditEvents(
        self, request: pb.ListAuditEventsRequest, admitted: Admitted
    ) -> pb.ListAuditEventsResponse:
        """Recent audit rows of the accounts the caller may see, newest first."""
        if not 0 <= request.limit <= MAX_AUDIT_ROWS or request.before_id < 0:
            raise InvalidRequest(f"limit must be 0 to {MAX_AUDIT_ROWS} and before_id at least 0")
        named = checked(check_account, request.account)
        account = admitted.account_to_see(named, self._session.names)
        # A signed-out account's rows stay readable until a removal marks them deleted.
        accounts = (
            [account]
            if account
            else sorted(
                {a.id for a in self._session.overview.accounts(admitted.entitlement)}
                | {a for a in await self._audit.accounts() if admitted.sees(a)}
            )
        )
        rows = await self._audit.read(
            accounts,
            app=request.app,
            limit=request.limit or 100,
            before_id=request.before_id or None,
            # Rows of no account (app policy, audit reads) may name any account.
            daemon_wide=not account and admitted.sees_every_account,
        )
        actor = actor_of(admitted.caller)
        self._audit.record(audit_entries.audit_read(actor, account, request.app, len(rows)))
        return pb.ListAuditEventsResponse(events=[audit_event(row) for row in rows])

    def _followed(self, admitted: Admitted) -> frozenset[str]:
        """The owner keys of the sign-ins the caller may follow, of the accounts it sees."""
        accounts = self._session.overview.accounts(admitted.entitlement)
        return admitted.sign_ins_followed(account.id for account in accounts)

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
            sign_in_state=SIGN_IN_STATE[self._session.overview.sign_in_state(visible)],
        )

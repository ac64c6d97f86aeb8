"""The person's calls on forwards (open, close, list), and the reduced status a forward answers.

Opening, closing and listing are for a managing app only, like the app policy (the
access table says so, access.py): a forward hands tokens to whatever reaches its
socket. What a forward gives is fixed here, when it is opened: its accounts by id (the
default account when none is named), its scopes, audience, ID token and confirmation
(callers.forwarded.ForwardGrant).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..._version import __version__
from ...session import audit_entries
from ...session.audit_entries import Actor, daemon_actor
from ...session.manager import SessionManager
from ...session.validation import check_account, check_audience, check_scopes
from ...store.audit_log import AuditTrail
from ...v1 import broker_pb2 as pb
from ..callers.forwarded import ForwardGrant
from ..host.forward_sockets import ForwardSocketError
from ..refusals import NoAccountToForward
from .account_access import Admitted
from .forwards import Forwards, LiveForward
from .messages import SIGN_IN_STATE, account_message, actor_of
from .statuses import InvalidRequest, checked

FORWARD_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
MAX_TTL_SECONDS = 30 * 24 * 3600


class ForwardCalls:
    """OpenForward, CloseForward and ListForwards; and GetStatus as a forward answers it."""

    def __init__(self, session: SessionManager, forwards: Forwards, audit: AuditTrail) -> None:
        self._session = session
        self._forwards = forwards
        self._audit = audit

    async def OpenForward(
        self, request: pb.OpenForwardRequest, admitted: Admitted
    ) -> pb.OpenForwardResponse:
        """Open a forward with the policy the request gives it (for a managing app only)."""
        caller = admitted.caller
        if not FORWARD_NAME.fullmatch(request.name):
            raise InvalidRequest(
                "name must be 1 to 32 lower-case letters, digits, '-' or '_',"
                " starting with a letter or digit"
            )
        if not 0 < request.ttl_seconds <= MAX_TTL_SECONDS:
            raise InvalidRequest(f"ttl_seconds must be between 1 and {MAX_TTL_SECONDS}")
        path = Path(request.socket_path) if request.socket_path else None
        if path is not None and not path.is_absolute():
            raise InvalidRequest(f"socket_path must be absolute, not {request.socket_path}")
        grant = ForwardGrant(
            request.name,
            self._accounts(request),
            frozenset(checked(check_scopes, list(request.scopes))) or None,
            checked(check_audience, request.audience),
            request.id_token,
            request.confirm,
        )
        use = self._session.overview.app_use().get(grant.app)
        try:
            forward = await self._forwards.open(
                grant, request.ttl_seconds, path, use.tokens_issued if use else 0
            )
        except ForwardSocketError as error:
            raise InvalidRequest(str(error)) from None
        self._audit.record(
            audit_entries.forward_opened(
                actor_of(caller),
                grant.name,
                sorted(grant.accounts) if grant.accounts is not None else None,
                sorted(grant.scopes or ()),
                audience=grant.audience,
                id_token=grant.id_token,
                confirm=grant.confirm,
                ttl=request.ttl_seconds,
                socket=str(forward.listener.path),
            )
        )
        return pb.OpenForwardResponse(forward=self._message(forward))

    async def CloseForward(
        self, request: pb.CloseForwardRequest, admitted: Admitted
    ) -> pb.CloseForwardResponse:
        """Close a forward: its connections and socket go at once (for a managing app only)."""
        caller = admitted.caller
        forward = await self._forwards.close(request.name, "closed", actor_of(caller))
        return pb.CloseForwardResponse(forward=self._message(forward))

    def closed(self, forward: LiveForward, why: str, actor: Actor | None) -> None:
        """Audit a forward's closing, with its use (Forwards calls this, however it closed)."""
        message = self._message(forward)
        self._audit.record(
            audit_entries.forward_closed(
                actor or daemon_actor(),
                forward.grant.name,
                why,
                message.tokens_issued,
                message.connections_total,
            )
        )

    async def ListForwards(
        self, request: pb.ListForwardsRequest, admitted: Admitted
    ) -> pb.ListForwardsResponse:
        """The open forwards with their use (for a managing app only)."""
        return pb.ListForwardsResponse(
            forwards=[self._message(forward) for forward in self._forwards.listed()]
        )

    async def reduced_status(
        self, request: pb.GetStatusRequest, admitted: Admitted
    ) -> pb.GetStatusResponse:
        """GetStatus on a forward: that it is one, of what, its accounts; nothing of the host."""
        grant = admitted.forward_grant
        sessions = self._session.overview.status(grant.entitlement)
        forward = self._forwards.get(grant.name)
        return pb.GetStatusResponse(
            version=__version__,
            issuer=self._session.overview.issuer or "",
            sign_in_state=SIGN_IN_STATE[sessions.state],
            default_account=sessions.default.id if sessions.default else "",
            account_count=sessions.account_count,
            default_account_detail=account_message(sessions.default) if sessions.default else None,
            forward=pb.Forward(
                name=grant.name,
                accounts=sorted(grant.accounts or ()),
                scopes=sorted(grant.scopes or ()),
                audience=grant.audience,
                id_token=grant.id_token,
                confirm=grant.confirm,
                opened_at_unix=int(forward.opened_at) if forward else 0,
                expires_at_unix=int(forward.expires_at) if forward else 0,
                host=self._forwards.host,
            ),
        )

    def _accounts(self, request: pb.OpenForwardRequest) -> frozenset[str] | None:
        """The ids of the accounts the forward gives tokens of; None for every account."""
        if request.all_accounts:
            if request.accounts:
                raise InvalidRequest("name accounts, or ask for all of them: not both")
            return None
        names = [checked(check_account, name) for name in request.accounts]
        if not all(names):
            raise InvalidRequest("accounts must not contain an empty name")
        if not names:
            default = self._session.overview.status().default
            if default is None:
                raise NoAccountToForward(
                    "no account is signed in to forward; sign in first (signin-broker login)"
                )
            return frozenset({default.id})
        return frozenset(self._session.names.account_id(name) for name in names)

    def _message(self, forward: LiveForward) -> pb.Forward:
        """A forward with its use, as the person's listing shows it."""
        grant = forward.grant
        use = self._session.overview.app_use().get(grant.app)
        used = use is not None and use.last_used >= forward.opened_at
        return pb.Forward(
            name=grant.name,
            socket_path=str(forward.listener.path),
            accounts=sorted(grant.accounts) if grant.accounts is not None else [],
            scopes=sorted(grant.scopes or ()),
            audience=grant.audience,
            id_token=grant.id_token,
            confirm=grant.confirm,
            opened_at_unix=int(forward.opened_at),
            expires_at_unix=int(forward.expires_at),
            tokens_issued=use.tokens_issued - forward.tokens_before if used and use else 0,
            last_used_unix=int(use.last_used) if used and use else 0,
            connections=len(forward.gate),
            connections_total=forward.gate.admitted,
            host=self._forwards.host,
        )

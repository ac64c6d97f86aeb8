"""The calls by which an app changes sessions: sign in, sign out, the default, removal.

Each names an account the caller may act on (`_writable`: of those its entitlement
sees); the session manager does the work and writes the audit row.
"""

from __future__ import annotations

import time

from ...session.accounts.records import Entitlement
from ...session.errors import AccountNotFound
from ...session.manager import SessionManager
from ...session.validation import (
    check_account,
    check_authorize_params,
    check_provider,
    check_workspace_id,
)
from ...store.audit_log import AuditTrail
from ...v1 import broker_pb2 as pb
from ..refusals import NewAccountNotAllowed
from .access import Admitted
from .messages import DEVICE_OF, REVOCATION, account_message, actor_of
from .service_info import DaemonInfo
from .statuses import InvalidRequest, checked

MAX_REDIRECT_TO_LENGTH = 2048  # the loopback pages refuse longer parameters anyway


class AccountCalls:
    """BeginSignIn, SignOut, SetDefaultAccount and RemoveAccount for the verified caller."""

    def __init__(self, session: SessionManager, info: DaemonInfo, audit: AuditTrail) -> None:
        self._session = session
        self._info = info
        self._audit = audit

    async def BeginSignIn(
        self, request: pb.BeginSignInRequest, admitted: Admitted
    ) -> pb.BeginSignInResponse:
        """Start a sign-in for an app the user allows; only it hears how the sign-in goes.

        An app allowed every account may sign in any account, a new one too; an app its
        policy limits to some accounts may sign in again only one of those, named, and
        the sign-in is taken only if it ends as that account: it cannot add an account
        it may not use (NewAccountNotAllowed). A plain one (no parameters, workspace or
        provider) while a token request waits for a step-up sign-in of the account (of
        any the caller may use, when it names none) is that sign-in, so `signin-broker
        login` continues it.
        """
        workspace_id = checked(check_workspace_id, request.workspace_id)
        if len(request.redirect_to) > MAX_REDIRECT_TO_LENGTH:
            raise InvalidRequest(f"redirect_to must be at most {MAX_REDIRECT_TO_LENGTH} characters")
        authorize_params = checked(check_authorize_params, dict(request.authorize_params))
        provider = checked(check_provider, request.provider)
        if request.method not in DEVICE_OF:
            raise InvalidRequest("method must be SIGN_IN_METHOD_BROWSER or _DEVICE_CODE, or unset")
        caller = admitted.caller
        account, entitlement = self._writable(request.account, admitted)
        plain = not (authorize_params or workspace_id or provider or request.redirect_to)
        plain = plain and request.method != pb.SIGN_IN_METHOD_DEVICE_CODE
        waiting = self._session.step_ups.continued(account, entitlement) if plain else None
        limited = entitlement.accounts is not None
        if waiting is None and limited and not account:
            raise NewAccountNotAllowed(
                "this app may sign in again only the accounts its policy lets it use; name one"
                " (`account`): a new account is added by the person (`signin-broker login`) or"
                " by an app allowed every account"
            )
        begun = waiting or await self._session.sign_ins.begin(
            account=account,
            app=actor_of(caller).app,
            device=DEVICE_OF[request.method],
            workspace_id=workspace_id,
            authorize_params=authorize_params,
            redirect_to=request.redirect_to,
            provider=provider,
            begin_url=self._info.sign_in_url,
            only_as=limited,
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

    async def SignOut(self, request: pb.SignOutRequest, admitted: Admitted) -> pb.SignOutResponse:
        """End an account's session."""
        caller = admitted.caller
        account, entitlement = self._writable(request.account, admitted)
        result = await self._session.endings.sign_out(
            account, self._info.web_url, actor=actor_of(caller), entitlement=entitlement
        )
        return pb.SignOutResponse(
            was_signed_in=result.was_signed_in,
            logout_url=result.logout_url,
            revocation=REVOCATION[result.revocation],
            revocation_error=result.revocation_error,
        )

    async def SetDefaultAccount(
        self, request: pb.SetDefaultAccountRequest, admitted: Admitted
    ) -> pb.SetDefaultAccountResponse:
        """Make an account the default."""
        caller = admitted.caller
        account, entitlement = self._writable(request.account, admitted, required=True)
        info = await self._session.endings.set_default(
            account, actor=actor_of(caller), entitlement=entitlement
        )
        return pb.SetDefaultAccountResponse(account=account_message(info))

    async def RemoveAccount(
        self, request: pb.RemoveAccountRequest, admitted: Admitted
    ) -> pb.RemoveAccountResponse:
        """Sign the account out and delete everything kept of it."""
        caller = admitted.caller
        account, entitlement = self._writable(request.account, admitted, required=True)
        logout_url = await self._session.endings.remove_account(
            account, self._info.web_url, actor=actor_of(caller), entitlement=entitlement
        )
        return pb.RemoveAccountResponse(
            logout_url=logout_url,
            audit_purge_at_unix=int(time.time() + self._audit.retention_seconds),
        )

    def _writable(
        self, account: str, admitted: Admitted, *, required: bool = False
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
        entitlement = admitted.entitlement
        try:
            account = self._session.names.account_id(named, entitlement)
        except AccountNotFound:
            if entitlement.accounts is None:
                raise
            account = named  # no account it may see has this name: refused below
        if account and not entitlement.sees(account):
            raise InvalidRequest(f"{named} is not an account this app may act on")
        return account, entitlement

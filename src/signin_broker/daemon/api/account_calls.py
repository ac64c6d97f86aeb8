"""The calls by which an app changes sessions: sign in, sign out, the default, removal.

Each names an account the caller may act on (account_access.Admitted.account_to_change);
the session manager does the work and writes the audit row.
"""

from __future__ import annotations

import time

from ...session.manager import SessionManager
from ...session.validation import (
    check_account,
    check_authorize_params,
    check_provider,
    check_workspace_id,
)
from ...store.audit_log import AuditTrail
from ...v1 import broker_pb2 as pb
from .account_access import Admitted
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
        account = self._changed(request.account, admitted)
        plain = not (authorize_params or workspace_id or provider or request.redirect_to)
        plain = plain and request.method != pb.SIGN_IN_METHOD_DEVICE_CODE
        begun = self._session.step_ups.continued(account, admitted.entitlement) if plain else None
        begun = begun or await self._session.sign_ins.begin(  # a new one
            account=account,
            app=actor_of(admitted.caller).app,
            device=DEVICE_OF[request.method],
            workspace_id=workspace_id,
            authorize_params=authorize_params,
            redirect_to=request.redirect_to,
            provider=provider,
            begin_url=self._info.sign_in_url,
            only_as=admitted.new_sign_in(account),
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
        account = self._changed(request.account, admitted)
        result = await self._session.endings.sign_out(
            account,
            self._info.web_url,
            actor=actor_of(admitted.caller),
            entitlement=admitted.entitlement,
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
        account = self._changed(request.account, admitted, required=True)
        info = await self._session.endings.set_default(
            account, actor=actor_of(admitted.caller), entitlement=admitted.entitlement
        )
        return pb.SetDefaultAccountResponse(account=account_message(info))

    async def RemoveAccount(
        self, request: pb.RemoveAccountRequest, admitted: Admitted
    ) -> pb.RemoveAccountResponse:
        """Sign the account out and delete everything kept of it."""
        account = self._changed(request.account, admitted, required=True)
        logout_url = await self._session.endings.remove_account(
            account,
            self._info.web_url,
            actor=actor_of(admitted.caller),
            entitlement=admitted.entitlement,
        )
        return pb.RemoveAccountResponse(
            logout_url=logout_url,
            audit_purge_at_unix=int(time.time() + self._audit.retention_seconds),
        )

    def _changed(self, account: str, admitted: Admitted, *, required: bool = False) -> str:
        """The id of the account a change names, which the caller must be allowed to act on."""
        named = checked(check_account, account)
        if required and not named:
            raise InvalidRequest(
                "account is required: name it by its id, alias or e-mail (signin-broker accounts)"
            )
        return admitted.account_to_change(named, self._session.names)

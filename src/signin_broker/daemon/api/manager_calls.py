"""The person's own calls, for a managing app only (the access table's): the app policy, aliases."""

from __future__ import annotations

from ...session import audit_entries
from ...session.accounts.records import AppUse
from ...session.manager import SessionManager
from ...session.validation import check_account, check_alias, check_origins, check_scopes
from ...store.audit_log import AuditTrail
from ...v1 import broker_pb2 as pb
from ..apps.gate import AppGate, AppView
from ..apps.policy import Decision
from .account_access import Admitted
from .messages import DECISION, DECISION_OF, actor_of, app_message
from .statuses import InvalidRequest, checked


class ManagerCalls:
    """ListApps, SetAppPolicy and SetAccountAlias."""

    def __init__(self, session: SessionManager, apps: AppGate, audit: AuditTrail) -> None:
        self._session = session
        self._apps = apps
        self._audit = audit

    async def ListApps(
        self, request: pb.ListAppsRequest, admitted: Admitted
    ) -> pb.ListAppsResponse:
        """The apps seen and in the policy, with their decisions (for a managing app only)."""
        return pb.ListAppsResponse(
            apps=[app_message(view, use) for view, use in self._apps_by_last_use()],
            default_decision=DECISION[self._apps.default],
            policy_file=str(self._apps.policy.path),
            policy_error=self._apps.policy.error,
        )

    async def SetAppPolicy(
        self, request: pb.SetAppPolicyRequest, admitted: Admitted
    ) -> pb.SetAppPolicyResponse:
        """Record the user's decision for an app and answer its waiting requests.

        For a managing app only (access.py), else a denied app could allow itself.
        """
        caller = admitted.caller
        if not request.app:
            raise InvalidRequest("app is required: its id, path or file name")
        accounts = [checked(check_account, account) for account in request.accounts]
        if not all(accounts):
            raise InvalidRequest("accounts must not contain an empty id")
        accounts = [self._session.names.account_id(account) for account in accounts]  # as ids
        scopes = checked(check_scopes, list(request.scopes))
        origins = checked(check_origins, list(request.origins))
        decision = DECISION_OF.get(request.decision)
        if request.id_token and decision is not Decision.ALLOW:
            raise InvalidRequest("the ID token can be allowed only with the decision allow")
        if request.once:
            rules = request.id_token or request.pin or origins
            if decision not in (Decision.ALLOW, Decision.DENY) or rules:
                raise InvalidRequest("an answer for once is allow or deny, without rules")
            view, answered = self._apps.answer_once(request.app, decision)
            entry = audit_entries.app_answered_once(
                actor_of(caller), view.record.id, str(decision), answered
            )
        else:
            view, answered = await self._apps.decide(
                request.app,
                decision,
                accounts,
                scopes,
                pin=request.pin,
                id_token=request.id_token,
                origins=origins,
            )
            entry = audit_entries.app_decided(
                actor_of(caller),
                view.record.id,
                str(decision or "default"),
                accounts,
                kept=view.decided,
                id_token=request.id_token,
                origins=origins,
            )
        self._audit.record(entry)
        use = self._session.overview.app_use().get(view.record.id)
        return pb.SetAppPolicyResponse(app=app_message(view, use), answered=answered)

    async def SetAccountAlias(
        self, request: pb.SetAccountAliasRequest, admitted: Admitted
    ) -> pb.SetAccountAliasResponse:
        """Give a signed-in account an alias, or remove one (for a managing app only)."""
        caller = admitted.caller
        alias = checked(check_alias, request.alias)
        account = checked(check_account, request.account)
        if account:
            named = await self._session.names.set_alias(
                alias, account, actor=actor_of(caller), force=request.force
            )
        else:
            named = await self._session.names.remove_alias(alias, actor=actor_of(caller))
        return pb.SetAccountAliasResponse(account=named)

    def _apps_by_last_use(self) -> list[tuple[AppView, AppUse | None]]:
        """The apps with their use of any account, the most recently used first."""
        use = self._session.overview.app_use()
        listed = [(view, use.get(view.record.id)) for view in self._apps.apps()]
        return sorted(listed, key=lambda pair: -(pair[1].last_used if pair[1] else 0.0))
